#!/bin/bash
# Measure one GPU machine in one go: build the calibration harness, train the runs of a runs file
# with FSDP2 (measure_fsdp_steps.py), time attention (measure_attention.py), and run the harness's
# GEMM, rank-speed and memory phases on a plan. Each stage has its own time limit and its own
# output, so one that fails or runs out of time keeps the others; the script ends with the stages
# that failed and exits 1 if any did. Run from the repository root:
#   calibrate/training_steps/measure_one_gpu.sh OUT_DIR [RUNS.json] [PLAN.txt] [GPU_PRESET]
# The defaults are the H200 runs and their GEMM plan (fsdpsim calibrate plan on each run's
# scenario, merged), and the fsdpsim hardware preset named after the GPU nvidia-smi reports.
# Stage time limits (seconds) can be raised for slower GPUs: BUILD_S (configure and build, each),
# STEPS_S, ATTENTION_S, HARNESS_S. Outputs in OUT_DIR: steps.csv (validation rows for `fsdpsim
# validate`), steps.json, attention.json, calibration.json (a profile for hardware.calibration),
# and the logs.
set -u
out=${1:?usage: measure_one_gpu.sh OUT_DIR [RUNS.json] [PLAN.txt] [GPU_PRESET]}
here=$(dirname "$0")
runs=${2:-$here/h200_runs.json}
plan=${3:-$here/h200_plan.txt}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
stage() { echo "== $(date -u +%H:%M:%S) $*"; }
failed=()
record() {  # record NAME EXIT_CODE
  echo "$1 exit $2"
  if [ "$2" -ne 0 ]; then failed+=("$1 (exit $2$([ "$2" -eq 124 ] && echo ', timed out'))"); fi
}

stage "GPU"
if ! nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.sm,power.limit,temperature.gpu --format=csv; then
  echo "measure_one_gpu.sh: nvidia-smi failed: no GPU to measure" >&2
  exit 1
fi
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
# The rows' gpu column: an fsdpsim hardware preset (configs/hardware/), GPU_PRESET if given, else
# from nvidia-smi's name of the SXM parts the presets describe (PCIe, NVL and Grace-Hopper parts
# need a preset of their own).
case "$name" in
  *GH200* | *PCIe* | *NVL*) gpu= ;;
  "NVIDIA H200") gpu=h200-sxm-141gb ;;
  "NVIDIA H100 80GB HBM3") gpu=h100-sxm-80gb ;;
  *A100-SXM4-80GB*) gpu=a100-sxm-80gb ;;
  *A100-SXM4-40GB*) gpu=a100-sxm-40gb ;;
  *) gpu= ;;
esac
gpu=${4:-$gpu}
if [ -z "$gpu" ]; then
  echo "measure_one_gpu.sh: no fsdpsim hardware preset for \"$name\"; pass one as GPU_PRESET" >&2
  exit 2
fi
echo "fsdpsim hardware preset: $gpu"

stage "build the harness for sm_$arch"
timeout "${BUILD_S:-100}" cmake -S calibrate -B build-harness -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" >"$out/harness-build.log" 2>&1 &&
  timeout "${BUILD_S:-100}" cmake --build build-harness >>"$out/harness-build.log" 2>&1
record build $?
grep -E "fsdpsim-calibrate|error" "$out/harness-build.log" | head -5
harness=build-harness/bin/fsdpsim-calibrate
[ -x "$harness" ] || harness=$(command -v fsdpsim-calibrate || true)  # one built elsewhere

stage "FSDP2 training steps ($runs)"
timeout "${STEPS_S:-200}" python3 "$here/measure_fsdp_steps.py" --runs "$runs" --gpu "$gpu" \
  --csv "$out/steps.csv" --json "$out/steps.json"
record steps $?

stage "attention"
timeout "${ATTENTION_S:-70}" python3 "$here/measure_attention.py" --json "$out/attention.json" \
  >"$out/attention.log" 2>&1
record attention $?
tail -n 3 "$out/attention.log"

stage "harness: GEMMs and memory ($plan)"
if [ -z "$harness" ]; then
  echo "no fsdpsim-calibrate: the build failed (see $out/harness-build.log) and none is on the PATH"
  record harness 127
else
  timeout "${HARNESS_S:-120}" "$harness" --phases gemm,rank-speed,memory --plan "$plan" --warmup 3 \
    --repeats 10 --timeout 100 -o "$out/calibration.json" 2>"$out/harness.log"
  record harness $?
  tail -n 5 "$out/harness.log"
fi

stage "done"
if [ ${#failed[@]} -ne 0 ]; then
  echo "failed: ${failed[*]}" >&2
  exit 1
fi
