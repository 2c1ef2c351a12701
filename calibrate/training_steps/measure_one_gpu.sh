#!/bin/bash
# Measure one GPU machine in one go: build the calibration harness, train the runs of a runs file
# with FSDP2 (measure_fsdp_steps.py), time attention (measure_attention.py), and run the harness's
# GEMM and memory phases on a plan. Each stage has its own time limit and its own output, so one
# that fails or runs out of time keeps the others. Run from the repository root:
#   calibrate/training_steps/measure_one_gpu.sh OUT_DIR [RUNS.json] [PLAN.txt]
# The defaults are the H200 runs and their GEMM plan (fsdpsim calibrate plan on each run's
# scenario, merged). Outputs in OUT_DIR: steps.csv (validation rows for `fsdpsim validate`),
# steps.json, attention.json, calibration.json (a profile for hardware.calibration), and the logs.
set -u
out=${1:?usage: measure_one_gpu.sh OUT_DIR [RUNS.json] [PLAN.txt]}
here=$(dirname "$0")
runs=${2:-$here/h200_runs.json}
plan=${3:-$here/h200_plan.txt}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
stage() { echo "== $(date -u +%H:%M:%S) $*"; }

stage "GPU"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.sm,power.limit,temperature.gpu --format=csv
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)

stage "build the harness for sm_$arch"
timeout 60 cmake -S calibrate -B build-harness -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" >"$out/harness-build.log" 2>&1 &&
  timeout 100 cmake --build build-harness >>"$out/harness-build.log" 2>&1
echo "build exit $?"; grep -E "fsdpsim-calibrate|error" "$out/harness-build.log" | head -5
harness=build-harness/bin/fsdpsim-calibrate
[ -x "$harness" ] || harness=$(command -v fsdpsim-calibrate)  # one built elsewhere, on the PATH

stage "FSDP2 training steps ($runs)"
timeout 200 python3 "$here/measure_fsdp_steps.py" --runs "$runs" --csv "$out/steps.csv" --json "$out/steps.json"
echo "steps exit $?"

stage "attention"
timeout 70 python3 "$here/measure_attention.py" --json "$out/attention.json" | tail -n 3
echo "attention exit $?"

stage "harness: GEMMs and memory ($plan)"
timeout 120 "$harness" --phases gemm,memory --plan "$plan" --warmup 3 \
  --repeats 10 --timeout 100 -o "$out/calibration.json" 2>"$out/harness.log"
echo "harness exit $?"; tail -n 5 "$out/harness.log"
stage "done"
