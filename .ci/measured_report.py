#!/usr/bin/env python3
"""Writes reports/h200-measured.md: fsdpsim's predictions next to the FSDP2 steps, attention
kernels, GEMMs and copies this project measured on one H200 (configs/validation/measured-h200,
configs/calibration/h200-sxm-141gb-measured.json). Called by .ci/make-measured-report, which
says how to run it."""
import collections
import csv
import io
import json
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "configs/validation/measured-h200"
SETS = [("prompted the model changes", DATA), ("held out: measured after them", DATA / "heldout"),
        ("torch.compile, measured after them", DATA / "compiled")]
# The GEMMs and copies measured on the same H200 (configs/calibration/): predicting with them is
# the calibrated path of README "Calibrating a new cluster".
PROFILE = "h200-sxm-141gb-measured"


def fsdpsim(binary, *args):
    done = subprocess.run([binary, *args], capture_output=True, text=True)
    if done.returncode not in (0, 3):
        sys.exit(f"measured_report: fsdpsim {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    return done.stdout


def signed(predicted, measured):
    return (predicted - measured) / measured


def pct(x):
    return f"{x * 100:+.1f}%"


def run_label(run):
    return (f"{run['name']} s{run['seq_len']} mb{run['micro_batch']} AC {run['act_ckpt']}"
            + (" compiled" if run.get("compiled") else "")
            + (f" cap {run['memory_fraction'] * 100:g}%" if "memory_fraction" in run else ""))


def scenario_for(run, folder):
    """The scenario `validate --scenarios-out` wrote for a run's row (measure_fsdp_steps.py's
    case_id)."""
    ac = {"none": "0", "full": "1"}[run["act_ckpt"]] + ("-tc" if run.get("compiled") else "")
    if "memory_fraction" in run:
        ac += f"-mf{round(run['memory_fraction'] * 1000):03d}"
    return next(folder.glob(
        f"*-{run['name']}-s{run['seq_len']}-g1-mb{run['micro_batch']}-ac{ac}-1.json"))


def simulated_runs(binary, folder, scratch):
    """Each run of a measured set that ran, with fsdpsim's result for its row's scenario."""
    out = pathlib.Path(scratch) / folder.name
    fsdpsim(binary, "validate", str(folder / "steps.csv"), "--scenarios-out", str(out))
    measured = json.load(open(folder / "steps.json"))
    pairs = []
    for result in measured["results"]:
        run = result["run"]
        if "error" in result:
            continue
        scenario = scenario_for(run, out)
        calibrated = fsdpsim(binary, "run", str(scenario), "--json", "-", "--set",
                             f"hardware.calibration={PROFILE}")
        pairs.append((result, json.loads(fsdpsim(binary, "run", str(scenario), "--json", "-")),
                      json.loads(calibrated)))
    return measured, pairs


def predictions(binary, folder, scratch):
    """Per run: measured and predicted step time, allocated and reserved memory."""
    measured, pairs = simulated_runs(binary, folder, scratch)
    table = [{
        "run": run_label(result["run"]),
        "step": (result["median_step_s"], p["step_time_s"]),
        "calibrated step": (result["median_step_s"], c["step_time_s"]),
        "allocated": (result["max_allocated_gib"], p["peak_mem_allocated_gib"]),
        "reserved": (result["max_reserved_gib"], p["peak_mem_reserved_gib"]),
    } for result, p, c in pairs]
    return measured, table


def phases_section(binary):
    """The first set run again with each phase timed, next to the simulated breakdown."""
    first = {json.dumps(r["run"], sort_keys=True): r
             for r in json.load(open(DATA / "steps.json"))["results"] if "error" not in r}
    with tempfile.TemporaryDirectory() as scratch:
        _, pairs = simulated_runs(binary, DATA / "phases", scratch)
    lines = ["## Where the time goes: the first set again, phase by phase", "",
             "`configs/validation/measured-h200/phases/`: the runs of the first set measured "
             "again in a later session with CUDA events between forward (with the loss), "
             "backward (with the recompute) and the optimizer step (with zero_grad); medians "
             "in ms. fsdpsim's phases are its wall-time breakdown (compute stream busy per "
             "phase). The last column is the step time against the first session's.", "",
             "| run | forward | predicted | backward | predicted | optimizer | predicted "
             "| step vs first session |", "|---|---|---|---|---|---|---|---|"]
    for result, p, _ in pairs:
        b = p["breakdown"]
        predicted = (b["forward_s"], b["backward_s"] + b["recompute_s"], b["optimizer_s"])
        measured = [result["median_phase_s"][k] for k in ("forward", "backward", "optimizer")]
        cells = [run_label(result["run"])]
        for m, q in zip(measured, predicted):
            cells += [f"{m * 1e3:.1f}", f"{q * 1e3:.1f} ({pct(signed(q, m))})"]
        earlier = first.get(json.dumps(result["run"], sort_keys=True))
        cells.append(pct(signed(result["median_step_s"], earlier["median_step_s"]))
                     if earlier else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


def retries_section(binary, measured, scenarios):
    """The runs trained under allocator caps (`measured`: retries/steps.json; `scenarios`: its
    rows' scenarios): cudaMalloc retries and what they cost, measured and predicted, and the caps
    at which the step ran out of memory."""
    uncapped_scenario = {}
    for result in measured["results"]:
        if "memory_fraction" not in result["run"]:
            uncapped_scenario[result["run"]["name"]] = scenario_for(result["run"], scenarios)
    rows, grown, malloc_ratios = [], [0.0, 0.0], []
    uncapped = {}
    for result in measured["results"]:
        run = result["run"]
        base = uncapped_scenario[run["name"]]
        fraction = run.get("memory_fraction", 1.0)
        # A run that failed has no row: its scenario is the uncapped one at the failed cap.
        scenario = base if "error" in result else scenario_for(run, scenarios)
        p = json.loads(fsdpsim(binary, "run", str(scenario), "--json", "-", "--set",
                               f"allocator.memory_fraction={fraction}"))
        if "memory_fraction" not in run:
            uncapped[run["name"]] = (result, p)
        rows.append((run, result, p))
    lines = ["## Under allocator caps: cudaMalloc retries", "",
             "`configs/validation/measured-h200/retries/`: three models trained uncapped and "
             "with the caching allocator capped by `torch.cuda.set_per_process_memory_fraction` "
             "(the rows' `memory_fraction`, fsdpsim's `allocator.memory_fraction`) between their "
             "allocated and reserved peaks, where a step fits only after cudaMalloc retries: "
             "each retry synchronizes the device, cudaFrees every cached segment and allocates "
             "again (`CUDACachingAllocator.cpp`, `release_cached_blocks`). Measured in a fifth "
             "session (2026-12-04). Retries per step: measured over the 8 timed steps; growth: "
             "the step against the same run uncapped. fsdpsim prices the device calls with the "
             "preset's lines, measured on this H200 in the same session (cudaMalloc "
             "63.2 us + 120.3 us/GiB, cudaFree 6.4 us + 628.6 us/GiB; "
             "`configs/validation/measured-h200/retries/calibration.json`).", "",
             "| run | retries/step | predicted | cudaMalloc/step | predicted | step | predicted "
             "| error | growth | predicted | reserved GiB | predicted |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for run, result, p in rows:
        label = run_label(run)
        if "error" in result:
            verdict = "out of memory" if p["status"] == "oom" else f"fits ({p['step_time_s'] * 1e3:.1f} ms)"
            lines.append(f"| {label} | out of memory | {verdict} | | | | | | | | | |")
            continue
        steps = len(result["step_s"])
        retries = f"{result['num_alloc_retries'] / steps:g}"
        mallocs = f"{result['num_device_alloc'] / steps:.0f}"
        if p["status"] == "oom":
            lines.append(f"| {label} | {retries} | out of memory | {mallocs} | | "
                         f"{result['median_step_s'] * 1e3:.1f} ms | | | | | "
                         f"{result['max_reserved_gib']:.1f} | |")
            continue
        base_result, base_p = uncapped[run["name"]]
        growth_m = result["median_step_s"] - base_result["median_step_s"]
        growth_p = p["step_time_s"] - base_p["step_time_s"]
        if "memory_fraction" in run:
            grown[0] += growth_m
            grown[1] += growth_p
            malloc_ratios.append(p["num_device_alloc"] / (result["num_device_alloc"] / steps))
        lines.append(
            f"| {label} | {retries} | {p['num_alloc_retries']} | {mallocs} | "
            f"{p['num_device_alloc']} | "
            f"{result['median_step_s'] * 1e3:.1f} ms | {p['step_time_s'] * 1e3:.1f} ms | "
            f"{pct(signed(p['step_time_s'], result['median_step_s']))} | "
            + ("| |" if "memory_fraction" not in run else
               f"{growth_m * 1e3:+.1f} ms | {growth_p * 1e3:+.1f} ms |")
            + f" {result['max_reserved_gib']:.1f} | {p['peak_mem_reserved_gib']:.1f} |")
    most_mallocs = max(r["num_device_alloc"] / len(r["step_s"])
                       for _, r, _ in rows if "error" not in r)
    lines += ["", f"Over the capped runs that fit, the retries grew the steps by "
              f"{grown[0] * 1e3:.0f} ms measured and {grown[1] * 1e3:.0f} ms predicted "
              "(a test keeps the two within 25 %). The cudaMalloc calls "
              "(`num_device_alloc`, measured over the timed steps and in fsdpsim's result) show "
              "why a few retries cost tens of milliseconds: after each retry the allocator "
              f"cudaMallocs its cache again, up to {most_mallocs:.0f} segments per step. "
              f"fsdpsim makes {min(malloc_ratios):.2f}-{max(malloc_ratios):.2f} times as many "
              "calls: its requests are close to PyTorch's but not the same (a block's saved "
              "tensors come before its temporaries, where PyTorch interleaves them; the head's "
              "are one block; it has none of the optimizer's small temporaries), so the "
              "segments a retry frees and allocates again differ, and with each call priced by "
              "its size the retries' total cost comes out closer than their count.", ""]
    return lines


# Size classes of the caching allocator (CUDACachingAllocator.cpp): the small pool below 1 MiB,
# 20 MiB segments shared by requests below 10 MiB, a segment of its own for larger ones.
ALLOCATION_CLASSES = [(1 << 20, "< 1 MiB"), (10 << 20, "1-10 MiB"), (128 << 20, "10-128 MiB"),
                      (1 << 30, "128 MiB-1 GiB"), (None, ">= 1 GiB")]


def allocation_class(size):
    return next(name for limit, name in ALLOCATION_CLASSES if limit is None or size < limit)


def allocations_section(binary, measured, scenarios):
    """The tensors one step allocates, by size class: PyTorch's memory history of the runs traced
    (measure_fsdp_steps.py's allocation_trace, in `measured`) next to `fsdpsim run --allocations`
    of their scenarios."""
    lines = ["## Allocations per step, by size", "",
             "What the caching allocator is asked for in one step: PyTorch's memory history of "
             "one untimed step after the timed ones (`torch.cuda.memory._record_memory_history`, "
             "its \"alloc\" events; `allocation_trace` in "
             "`configs/validation/measured-h200/retries/steps.json`) next to the measured step's "
             "allocations in `fsdpsim run --allocations`. Counts, then GiB in all.", "",
             "| run | " + " | ".join(f"{name} | fsdpsim" for _, name in ALLOCATION_CLASSES)
             + " | all | fsdpsim | GiB | fsdpsim |",
             "|---|" + "---|---|" * (len(ALLOCATION_CLASSES) + 2)]
    for result in measured["results"]:
        if "allocation_trace" not in result:
            continue
        sizes = [e[1] for e in result["allocation_trace"]["events"] if e[0] == "alloc"]
        listed = fsdpsim(binary, "run", str(scenario_for(result["run"], scenarios)),
                         "--allocations", "-")
        predicted = [int(row["bytes"]) for row in csv.DictReader(io.StringIO(listed))
                     if row["action"] == "alloc"]
        by_class = [collections.Counter(map(allocation_class, s)) for s in (sizes, predicted)]
        cells = [run_label(result["run"])]
        for _, name in ALLOCATION_CLASSES:
            cells += [str(by_class[0][name]), str(by_class[1][name])]
        cells += [str(len(sizes)), str(len(predicted)),
                  f"{sum(sizes) / 2**30:.1f}", f"{sum(predicted) / 2**30:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "fsdpsim asks for fewer blocks, larger on average. Like PyTorch, it allocates "
              "FSDP2's unsharded copy of every parameter (and at world size 1 the cast of each "
              "shard it is copied from), autograd's gradient of every parameter and each tensor "
              "a transformer block saves for its backward on their own (the norm weights, the k "
              "and v projections and the norms' statistics are most of its requests below "
              "10 MiB), but the head's and the embedding's saved tensors are one block each, "
              "and it has none of the optimizer's small temporaries. How such requests fragment "
              "the cache is what the caps above probe. Allocating the parameters and gradients "
              "one by one, instead of one block per FSDP unit and per layer, took the counts of "
              "the two runs traced from 270 and 305 to 657 and 1102 and moved every run's "
              "reserved peak by 0.3 GiB at most; allocating each block's saved tensors on its "
              "own, with the unshard at world size 1 that gathers nothing, took them to 1123 "
              "and 1921, the reserved error of the held-out runs from 4.8 % to 3.0 % (max "
              "13.7 % to 7.1 %), and made the 58 % cap on llama-3.6b come out of memory, as it "
              "did on the H200.", ""]
    return lines


# fsdpsim's op names (fsdp/ builders) of the kernels torch.profiler names nvjet/cutlass (GEMMs)
# and sdpa/cudnn::fusion (attention); the rest are elementwise, normalization, copies and the
# optimizer's foreach kernels.
MODEL_GEMM = re.compile(r"\.fwd\.(q|k|v|o|gate|up|down|qkv|attn_out|mlp_up|mlp_down|lm_head)$"
                        r"|_(dgrad|wgrad)$")
MODEL_ATTENTION = re.compile(r"\.fwd\.attn$|\.bwd\.attn_bwd$")


def preset_attention_rates(preset, backend, seq):
    """The preset's attention rate in TFLOP/s, forward and backward, as a kernel benchmark
    (hardware/kernel_time.cpp, before sustained_compute_fraction): efficiency x s / (s +
    seq_half) x peak, times cuDNN's speedup for the cuDNN backend."""
    peak = preset["peak_dense_tflops"]["bf16"]
    rates = []
    for pass_ in ("forward", "backward"):
        rate = (preset[f"attention_{pass_}_efficiency"] * seq
                / (seq + preset[f"attention_{pass_}_seq_half"]) * peak)
        if backend == "cudnn":
            rate *= preset[f"cudnn_attention_{pass_}_speedup"]
        rates.append(rate)
    return tuple(rates)


def preset_head_dim_slowdown(preset, backend, head_dim):
    """Time per FLOP at this head dim over 128's (hardware/kernel_time.cpp, head_dim_slowdown):
    the head dim padded to a multiple of 32, and the softmax share of the time at 128."""
    share = preset["cudnn_attention_softmax_share" if backend == "cudnn"
                  else "attention_softmax_share"]
    padded = -(-head_dim // 32) * 32
    return (padded / 128 * (1 - share) + share) / (head_dim / 128)


def measured_kind(kernel):
    if kernel.startswith("nvjet") or "gemm" in kernel.lower() or "splitKreduce" in kernel:
        return "gemm"
    if "sdpa" in kernel or "cudnn::fusion" in kernel or "flash" in kernel.lower():
        return "attention"
    return "other"


def predicted_kinds(binary, scenario, scratch):
    """GPU time per kind of fsdpsim's measured step (its trace, less the warm-up step and the
    collectives, which a world size of 1 runs as no kernels); under "step" that step's length
    and under "idle" its time when no op runs on any stream."""
    trace = pathlib.Path(scratch) / "trace.json"
    fsdpsim(binary, "run", str(scenario), "--trace", str(trace))
    ops = sorted((e for e in json.load(open(trace))["traceEvents"]
                  if e.get("ph") == "X" and e.get("cat") in ("compute", "copy")),
                 key=lambda e: e["ts"])
    # The measured step starts with the first forward op after the warm-up step's optimizer.
    phases = [e["args"]["phase"] for e in ops]
    after_optimizer = phases.index("optimizer")
    start = next(e["ts"] for e, phase in zip(ops[after_optimizer:], phases[after_optimizer:])
                 if phase == "forward")
    kinds = {"gemm": 0.0, "attention": 0.0, "other": 0.0}
    busy, busy_until = 0.0, start
    for e in ops:
        if e["ts"] >= start:
            kind = ("gemm" if MODEL_GEMM.search(e["name"]) else
                    "attention" if MODEL_ATTENTION.search(e["name"]) else "other")
            kinds[kind] += e["dur"] / 1e6
            end = e["ts"] + e["dur"]
            busy += max(0.0, end - max(e["ts"], busy_until))
            busy_until = max(busy_until, end)
    kinds["step"] = (busy_until - start) / 1e6
    kinds["idle"] = kinds["step"] - busy / 1e6
    return kinds


def kernels_section(binary, preset):
    """Where the GPU time goes, kernel by kernel (torch.profiler) against fsdpsim's ops; and
    attention kernels across head dims and at the runs' own shapes."""
    folder = DATA / "kernels"
    measured = json.load(open(folder / "steps.json"))
    lines = ["## Kernel time by kind: GEMMs, attention and the rest", "",
             "`configs/validation/measured-h200/kernels/`: five runs of the first and held-out "
             "sets measured again in a sixth session (2026-12-04), each with one more step under "
             "`torch.profiler` (the run key `profile_kernels`): the GPU time of its GEMM kernels "
             "(cuBLAS's nvjet), its attention kernels (cuDNN SDPA with its dO.O and dQ "
             "conversion kernels) and all others (elementwise, normalization, copies, the "
             "foreach AdamW kernels), in ms, next to fsdpsim's ops of the same kinds in its "
             "measured step. `kernels` is the measured GPU busy time; the step is the median "
             "of 8 timed steps. `idle` is the step less the kernels' time: when the GPU ran "
             "nothing (the profiled step's kernels against the timed steps' median; kernels on "
             "two streams at once would make it larger), next to the time in fsdpsim's measured "
             "step when no op runs on any stream.", "",
             "| run | step | kernels | idle | predicted | GEMMs | predicted | attention "
             "| predicted | other | predicted |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    idle = []  # (measured, predicted) share of the step
    errors = {"gemm": [], "attention": [], "other": []}
    unslowed = []  # the GEMMs without sustained_compute_fraction
    with tempfile.TemporaryDirectory() as scratch:
        out = pathlib.Path(scratch) / "scenarios"
        fsdpsim(binary, "validate", str(folder / "steps.csv"), "--scenarios-out", str(out))
        for result in measured["results"]:
            profile = result["kernel_profile"]
            kinds = {"gemm": 0.0, "attention": 0.0, "other": 0.0}
            for name, _, total_us in profile["kernels"]:
                kinds[measured_kind(name)] += total_us / 1e6
            predicted = predicted_kinds(binary, scenario_for(result["run"], out), scratch)
            step = result["median_step_s"]
            measured_idle = step - profile["kernel_us"] / 1e6
            idle.append((measured_idle / step, predicted["idle"] / predicted["step"]))
            cells = [run_label(result["run"]), f"{step * 1e3:.1f}",
                     f"{profile['kernel_us'] / 1e3:.1f}",
                     f"{measured_idle * 1e3:.1f} ({idle[-1][0] * 100:.1f}%)",
                     f"{predicted['idle'] * 1e3:.1f} ({idle[-1][1] * 100:.1f}%)"]
            for kind in ("gemm", "attention", "other"):
                error = signed(predicted[kind], kinds[kind])
                errors[kind].append(error)
                if kind == "gemm":
                    unslowed.append(signed(predicted[kind] * preset["sustained_compute_fraction"],
                                           kinds[kind]))
                cells += [f"{kinds[kind] * 1e3:.1f}", f"{predicted[kind] * 1e3:.1f} ({pct(error)})"]
            lines.append("| " + " | ".join(cells) + " |")
    fraction = preset["sustained_compute_fraction"]
    attention_fraction = preset["attention_sustained_fraction"]

    def spread(kind):
        return f"{min(errors[kind]) * 100:+.0f} to {max(errors[kind]) * 100:+.0f} %"
    lines += ["", f"fsdpsim's GEMMs are {spread('gemm')} off the measured ones, its attention "
              f"{spread('attention')} and the other kernels "
              f"{spread('other')}. fsdpsim slows every GEMM by "
              f"`sustained_compute_fraction` ({fraction}, fitted on published multi-GPU runs) "
              f"and every attention kernel by `attention_sustained_fraction` "
              f"({attention_fraction}, measured below); "
              f"without it its GEMMs would be {min(unslowed) * 100:+.0f} to "
              f"{max(unslowed) * 100:+.0f} % off: on this single GPU the GEMMs run at the "
              "rates of fsdpsim's GEMM model alone. The step times agree within a few per "
              "cent because these errors offset one another: the step-level accuracy of the "
              "sets above is not yet accuracy kernel by kernel. Part of what the slow GEMMs "
              f"stand in for is time the GPU waits: {span([m * 100 for m, _ in idle], 1)} % of "
              "each measured step runs no kernel, against "
              f"{span([p * 100 for _, p in idle], 1)} % of fsdpsim's, whose CPU (launches, "
              "hooks) keeps ahead of the GPU throughout. Where those milliseconds go is not "
              "measured yet (these profiles kept kernel totals, not a timeline; "
              "`profile_kernels` runs now also record each idle gap with the CPU work the GPU "
              "waited for, `calibrate/training_steps/gpu_idle.py`), and until it is, GEMMs at "
              "the rates the power model below gives (0.95 of the short benchmark's at half "
              "the GPU's time) would make these steps too fast.", ""]

    shapes = json.load(open(folder / "attention-shapes.json"))["results"]
    ok = [r for r in shapes if "error" not in r]
    by = {(r["backend"], r["batch"], r["heads"], r["seq"], r["head_dim"]): r for r in ok}
    lines += ["## Attention kernels by head dim", "",
              "The same session, `measure_attention.py --backend flash --backend cudnn --shape ...`"
              " (`kernels/attention-shapes.json`): causal SDPA at 65,536 tokens per call and 32 "
              "heads, TFLOP/s forward / backward at 8,192 tokens per head dim, each with "
              "fsdpsim's rate for it (the preset's rate at 8,192 tokens, slowed for the head dim "
              "padded to a multiple of 32 and for the share of softmax work, "
              f"`attention_softmax_share` {preset['attention_softmax_share']} and "
              f"`cudnn_attention_softmax_share` {preset['cudnn_attention_softmax_share']}). "
              "Above head dim 128 the model only pads; no run here uses such head dims.", "",
              "| head dim | FA2 fwd | fsdpsim | FA2 bwd | fsdpsim | cuDNN fwd | fsdpsim "
              "| cuDNN bwd | fsdpsim |", "|---|---|---|---|---|---|---|---|---|"]
    for d in sorted({r["head_dim"] for r in ok if r["heads"] == 32 and r["seq"] == 8192}):
        cells = [str(d)]
        for backend in ("flash", "cudnn"):
            r = by.get((backend, 8, 32, 8192, d))
            model = [rate / preset_head_dim_slowdown(preset, backend, d)
                     for rate in preset_attention_rates(preset, backend, 8192)]
            for key, predicted in zip(("forward_tflops", "backward_tflops"), model):
                cells += [f"{r[key]:.0f}" if r else "-", f"{predicted:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")

    lines += ["", "## Attention kernels at the runs' shapes", "",
              "cuDNN at the shapes the runs train (batch, heads, tokens, head dim), against "
              "the preset's rate at that length and head dim as a kernel benchmark and as a "
              "training step prices it (times "
              f"`attention_sustained_fraction` {attention_fraction}):", "",
              "| shape | fwd TFLOP/s | preset | in a step | bwd TFLOP/s | preset | in a step |",
              "|---|---|---|---|---|---|---|"]
    for r in ok:
        if r["backend"] != "cudnn" or (r["heads"] == 32 and r["batch"] * r["seq"] == 65536):
            continue
        fwd, bwd = (rate / preset_head_dim_slowdown(preset, "cudnn", r["head_dim"])
                    for rate in preset_attention_rates(preset, "cudnn", r["seq"]))
        lines.append(f"| {r['batch']}, {r['heads']}, {r['seq']}, {r['head_dim']} | "
                     f"{r['forward_tflops']:.0f} | {fwd:.0f} | {fwd * attention_fraction:.0f} | "
                     f"{r['backward_tflops']:.0f} | {bwd:.0f} | {bwd * attention_fraction:.0f} |")
    return (lines + [""] + norms_section(folder, preset, measured)
            + sustained_section(folder, preset))


def layer_norm_rates(measured):
    """TB/s of the LayerNorm kernels in the profiled MPT steps (bf16 rows of the model width):
    the forward (2 passes), the input gradient (3) and the weight gradient (2)."""
    passes = {"vectorized_layer_norm_kernel": ("forward", 2),
              "layer_norm_grad_input_kernel": ("input gradient", 3),
              "GammaBetaBackward": ("weight gradient", 2)}
    rates = {name: [] for name, _ in passes.values()}
    for result in measured["results"]:
        run = result["run"]
        if run["model_family"] != "mpt":
            continue
        tensor = run["seq_len"] * run["micro_batch"] * run["d_model"] * 2
        for kernel, count, total_us in result["kernel_profile"]["kernels"]:
            for key, (name, n) in passes.items():
                if key in kernel:
                    rates[name].append(n * tensor * count / (total_us * 1e-6) / 1e12)
    def spread(r):
        low, high = f"{min(r):.1f}", f"{max(r):.1f}"
        return low if low == high else f"{low}-{high}"
    return ", ".join(f"{name} {spread(r)} TB/s" for name, r in rates.items())


def norms_section(folder, preset, measured):
    """PyTorch's LayerNorm and RMSNorm kernels across widths against fsdpsim's price
    (models/kernel_factory.cpp: one kernel forward, the input and the weight gradient backward,
    each at its share of HBM bandwidth, norm_memory_efficiency)."""
    peak = preset["hbm_bandwidth_GBps"] * 1e9
    share = preset["norm_memory_efficiency"]
    lines = ["## Normalization kernels", "",
             "The same session, `measure_norms.py` (`kernels/norms-*.json`): `nn.LayerNorm` "
             "and `nn.RMSNorm` on bf16 inputs, forward and backward (forward+backward minus "
             "forward), in microseconds, next to fsdpsim's price. PyTorch's backward is two "
             "kernels (`layer_norm_kernel.cu`): the input gradient and the weight gradient, a "
             "column reduction that reads dy and x again; fsdpsim prices the three kernels' "
             "bytes (forward x, y and the statistics; the input gradient dy, x, dx; the weight "
             "gradient dy and x) at their shares of the HBM bandwidth, `norm_memory_efficiency` "
             f"({', '.join(f'{k} {v}' for k, v in share.items())}), measured in the kernel "
             "profiles above: in the MPT steps (widths 1,536-2,048) LayerNorm's "
             f"{layer_norm_rates(measured)}. Each figure below times one call between two CUDA "
             "events, so it includes whatever part of the host's launch the GPU waits for: at "
             "16,384 rows (`norms-16384.json`) the narrow widths all take 50-70 us forward, "
             "launch-bound; the table shows 65,536 rows, where the kernels take longer than "
             "their launch.", "",
             "| norm | rows | width | fwd us | fsdpsim | bwd us | fsdpsim |",
             "|---|---|---|---|---|---|---|"]
    for name in ("norms-65536.json",):
        for r in json.load(open(folder / name))["results"]:
            kind = r["kind"]  # layer_norm, rms_norm or eager_rms_norm
            act = r["rows"] * r["width"] * 2
            if kind == "eager_rms_norm":
                # models/eager_rms_norm.cpp: 36 and 92 bytes per element (18 and 46 passes of
                # the bf16 input), each kernel streaming at memory_efficiency.
                rate = peak * preset["memory_efficiency"]
                lines.append(f"| {kind} | {r['rows']} | {r['width']} | "
                             f"{r['forward_s'] * 1e6:.0f} | {18 * act / rate * 1e6:.0f} | "
                             f"{r['backward_s'] * 1e6:.0f} | {46 * act / rate * 1e6:.0f} |")
                continue
            stat_vectors = 2 if kind == "layer_norm" else 1
            stats = r["rows"] * stat_vectors * 4
            params = stat_vectors * r["width"] * 2
            forward = (2 * act + stats + params) / (peak * share[f"{kind}_forward"])
            backward = ((3 * act + stats + r["width"] * 2) / (peak * share["input_grad"])
                        + (2 * act + params) / (peak * share[f"{kind}_weight_grad"]))
            lines.append(f"| {kind} | {r['rows']} | {r['width']} | "
                         f"{r['forward_s'] * 1e6:.0f} | {forward * 1e6:.0f} | "
                         f"{r['backward_s'] * 1e6:.0f} | {backward * 1e6:.0f} |")
    return lines + [""]


def span(values, digits=0):
    """'low-high' of values, or the one value where they round alike."""
    low, high = f"{min(values):,.{digits}f}", f"{max(values):,.{digits}f}"
    return low if low == high else f"{low}-{high}"


def forward_backward_rate(forward, backward):
    """One attention call's forward+backward TFLOP/s from each pass's: the backward does 2.5
    times the forward's FLOPs, so together 3.5 forward FLOPs in 1/forward + 2.5/backward."""
    return 3.5 / (1 / forward + 2.5 / backward)


def held_runs(folder, preset, short_gemm, short_fp8_gemm):
    """Each kernel held at the power limit (measure_sustained_compute.py), GEMMs first: its
    kind, description, windows' rates, clocks and power, the short benchmarks' rates of the
    same kernel, and the preset's fraction for it."""
    short_attention = {}  # backend -> fwd+bwd TFLOP/s of measure_attention.py's runs
    for name in ("attention.json", "kernels/attention-shapes.json"):
        for r in json.load(open(DATA / name))["results"]:
            if "error" not in r and (r["heads"], r["seq"], r["head_dim"]) == (32, 8192, 128):
                rate = forward_backward_rate(r["forward_tflops"], r["backward_tflops"])
                short_attention.setdefault(r["backend"], []).append(rate)
    runs = []
    for path in folder.glob("sustained-*.json"):
        if "duty" in path.name:
            continue
        data = json.load(open(path))
        kernel = data.get("kernel", "gemm")  # the first run predates --kernel
        windows = data["windows"]
        run = {"kernel": kernel, "file": path.name, "seconds": windows[-1]["t_s"],
               "rates": [w["tflops"] for w in windows],
               "clocks": [w["sm_clock_mhz"] for w in windows if "sm_clock_mhz" in w],
               "power": [w["power_w"] for w in windows if "power_w" in w]}
        if kernel in ("gemm", "gemm_fp8"):
            fp8 = kernel == "gemm_fp8"
            run["what"] = f"{'fp8 ' if fp8 else ''}GEMM {data['size']}^3"
            run["short"] = [short_fp8_gemm if fp8 else short_gemm]
            run["fraction"] = preset["sustained_compute_fraction"]
        else:
            fwd, bwd = preset_attention_rates(preset, kernel, data["shape"][2])
            run["what"] = (f"{'FlashAttention-2' if kernel == 'flash' else 'cuDNN'} fwd+bwd "
                           f"{'x'.join(map(str, data['shape']))}")
            run["short"] = short_attention[kernel] + [forward_backward_rate(fwd, bwd)]
            run["fraction"] = preset["attention_sustained_fraction"]
        run["kept"] = [statistics.mean(run["rates"]) / s for s in run["short"]]
        runs.append(run)
    return sorted(runs, key=lambda r: (r["kernel"] != "gemm", r["kernel"], r["file"]))


def sustained_section(folder, preset):
    """Kernels held for a minute and more: the rate each keeps at the GPU's power limit."""
    harness = [g["tflops"] for g in json.load(open(DATA / "retries/calibration.json"))["gemms"]
               if g["dtype"] == "bf16" and min(g["m"], g["n"], g["k"]) >= 2048]
    short_gemm = statistics.median(harness)
    # The float8 GEMMs' short benchmarks: the H200 profile's fp8 GEMMs of at least 2,048 a side.
    profile = json.load(open(ROOT / "configs/calibration/h200-sxm-141gb-measured.json"))
    short_fp8_gemm = statistics.median(g["tflops"] for g in profile["gemms"]
                                       if g["dtype"] == "fp8" and min(g["m"], g["n"], g["k"]) >= 2048)
    runs = held_runs(folder, preset, short_gemm, short_fp8_gemm)
    lines = ["## Kernels held at the power limit", "",
             "`measure_sustained_compute.py` (`kernels/sustained-*.json`): one kind of kernel "
             "back to back on random bf16 data for a minute or two, its TFLOP/s in every 5 s "
             "window from the first, with the SM clock (1980 MHz at most) and the power drawn "
             "(700 W limit) that nvidia-smi reports, against the same kernel's short benchmarks: "
             "for the GEMMs the harness's GEMMs of at least 2,048 on every side, timed 10 at a "
             f"time on the same GPU (`retries/calibration.json`, median of {len(harness)}); for "
             "attention `measure_attention.py`'s runs at 8x32x8192x128 (`attention.json`, "
             "`kernels/attention-shapes.json`) and the preset's rate at that length. Attention "
             "counts its forward and backward FLOPs together (3.5 times the causal forward's).",
             "", "| kernel | s | TFLOP/s held | short benchmarks | held / short | SM clock MHz "
             "| W | preset fraction |", "|---|---|---|---|---|---|---|---|"]
    for r in runs:
        lines.append(f"| {r['what']} (`{r['file']}`) | {r['seconds']:.0f} | {span(r['rates'])} | "
                     f"{', '.join(f'{s:.0f}' for s in r['short'])} | {span(r['kept'], 2)} | "
                     f"{span(r['clocks'])} | {span(r['power'])} | {r['fraction']} |")
    by_kind = {}
    for r in runs:
        by_kind.setdefault(r["kernel"], []).append(r)

    def pooled(kind, key):
        return [x for r in by_kind[kind] for x in r[key]]
    power = [x for r in runs for x in r["power"]]
    return lines + [
        "", f"Every run drew {span(power)} W, at the limit, but the GEMMs kept "
        f"{span(pooled('gemm', 'kept'), 2)} of their short benchmark's rate at "
        f"{span(pooled('gemm', 'clocks'))} MHz while FlashAttention-2 kept "
        f"{span(pooled('flash', 'kept'), 2)} of its rate at {span(pooled('flash', 'clocks'))} "
        f"MHz and cuDNN's attention {span(pooled('cudnn', 'kept'), 2)} at "
        f"{span(pooled('cudnn', 'clocks'))} MHz. So the presets slow GEMMs by "
        "`sustained_compute_fraction`, which the published multi-GPU runs fit close to the held "
        "GEMMs' rate, and the H100 and H200 attention kernels by `attention_sustained_fraction`, "
        "the held attention's; the training steps above, half of whose GPU time is not GEMMs, "
        "ran their GEMMs at the short benchmark's rates.", ""] + duty_table(folder, short_gemm)


def duty_table(folder, short_rate):
    """The products interleaved with copies (measure_sustained_compute.py --duty): the lighter the
    load, the more of its clock the GPU keeps under its power limit."""
    lines = ["With copies between batches of products (`--duty`, "
             "`kernels/sustained-gemm-duty-*.json`, 20 s each), the share of the GPU's time in "
             "the products against the products' rate:", "",
             "| products' share of GPU time | TFLOP/s | of the short GEMMs' | SM clock MHz | W |",
             "|---|---|---|---|---|"]
    runs = sorted((json.load(open(f)) for f in folder.glob("sustained-gemm-duty-*.json")),
                  key=lambda r: -r["duty"])
    for run in runs:
        last = run["windows"][-1]  # past the first window's warm-up
        lines.append(f"| {last['duty']:.2f} | {last['tflops']:.0f} | "
                     f"{last['tflops'] / short_rate:.2f} | {last.get('sm_clock_mhz', 0):.0f} | "
                     f"{last.get('power_w', 0):.0f} |")
    return lines + ["", "The copies draw power too, so the GPU stays near its limit at every "
                    "share, but the less of its time goes to products the higher the clock it "
                    "holds for them. fsdpsim's `sustained_compute_fraction` is one number for "
                    "every step whatever its mix of kernels.", ""]


def mape(table, key, invert=False):
    errors = []
    for row in table:
        m, p = row[key]
        if invert:  # tokens/s = tokens / step time
            m, p = 1 / m, 1 / p
        errors.append(abs(signed(p, m)))
    return statistics.mean(errors), max(errors)


def main():
    binary = sys.argv[1]
    lines = ["# fsdpsim against its own H200 measurements", "",
             "Generated by `.ci/make-measured-report BIN` from the measurements in "
             "`configs/validation/measured-h200/` (README there: what was run, how, and when) and "
             "`configs/calibration/h200-sxm-141gb-measured.json`. Unlike `reports/validation.md` "
             "(published runs, many settings assumed), every setting here is known. One GPU: "
             "FSDP2 at world size 1, so these rows check compute, attention, the eager kernels, "
             "the optimizer and memory, not the network.", ""]
    with tempfile.TemporaryDirectory() as scratch:
        sets = [(label, *predictions(binary, folder, scratch)) for label, folder in SETS]
    software = sets[0][1]["software"]
    lines += [f"Software: {software}.", "",
              "## Summary", "",
              "| set | runs | tokens/s MAPE | max | calibrated tokens/s MAPE | max "
              "| allocated MAPE | max | reserved MAPE | max |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for label, _, table in sets:
        cells = [mape(table, "step", invert=True), mape(table, "calibrated step", invert=True),
                 mape(table, "allocated"), mape(table, "reserved")]
        lines.append(f"| {label} | {len(table)} | " + " | ".join(
            f"{m * 100:.1f}% | {x * 100:.1f}%" for m, x in cells) + " |")
    lines += ["", f"Calibrated: the same runs predicted with `--set hardware.calibration={PROFILE}`, "
              "the GEMMs and copies measured on this H200 in place of the preset's GEMM model "
              "(README, \"Calibrating a new cluster\"). Signed errors below are (predicted - "
              "measured) / measured, without the profile; a negative step time error is a "
              "prediction that is too fast.", ""]
    for label, measured, table in sets:
        lines += [f"## Runs: {label}", "",
                  "| run | step measured | predicted | error | allocated GiB | predicted | error "
                  "| reserved GiB | predicted | error |", "|---|---|---|---|---|---|---|---|---|---|"]
        for row in table:
            cells = [row["run"]]
            for key, scale, unit in (("step", 1e3, " ms"), ("allocated", 1, ""), ("reserved", 1, "")):
                m, p = row[key]
                cells += [f"{m * scale:.1f}{unit}", f"{p * scale:.1f}{unit}", pct(signed(p, m))]
            lines.append("| " + " | ".join(cells) + " |")
        for result in measured["results"]:
            if "error" in result:
                lines += ["", f"`{result['run']['name']}` (s{result['run']['seq_len']}, AC "
                          f"{result['run']['act_ckpt']}) ran out of memory: {result['error'][:160]}... "
                          "fsdpsim predicts out of memory too (`scenarios/memory/"
                          "h200_llama3_8b_1gpu_oom.json`, checked in CI)."]
        lines.append("")

    lines += phases_section(binary)
    retries = json.load(open(DATA / "retries/steps.json"))
    with tempfile.TemporaryDirectory() as scenarios:
        fsdpsim(binary, "validate", str(DATA / "retries/steps.csv"), "--scenarios-out", scenarios)
        lines += retries_section(binary, retries, pathlib.Path(scenarios))
        lines += allocations_section(binary, retries, pathlib.Path(scenarios))
    preset = json.load(open(ROOT / "configs/hardware/h200-sxm-141gb.json"))["gpu"]
    lines += kernels_section(binary, preset)

    # Attention kernels against the preset's FlashAttention-2 efficiencies and cuDNN speedups.
    attention = json.load(open(DATA / "attention.json"))["results"]
    lines += ["## Attention kernels", "",
              "Causal SDPA, bf16, head dim 128, 32 heads, 65,536 tokens per call "
              "(`calibrate/training_steps/measure_attention.py`). The preset's rate is "
              "efficiency x s / (s + seq_half) x speedup x 989 TFLOP/s at sequence length s "
              "(`hardware/kernel_time.cpp`): FlashAttention-2 "
              f"{preset['attention_forward_efficiency']} forward / "
              f"{preset['attention_backward_efficiency']} backward, seq_half "
              f"{preset['attention_forward_seq_half']:g} / {preset['attention_backward_seq_half']:g}, cuDNN "
              f"x{preset['cudnn_attention_forward_speedup']} / "
              f"x{preset['cudnn_attention_backward_speedup']} (a kernel benchmark: without "
              "`sustained_compute_fraction`, which a training step adds).", "",
              "| seq | FA2 fwd TFLOP/s | preset | FA2 bwd | preset | cuDNN fwd | preset | cuDNN bwd | preset |",
              "|---|---|---|---|---|---|---|---|---|"]
    by = {(r["backend"], r["seq"]): r for r in attention if r["head_dim"] == 128}
    for seq in sorted({s for _, s in by}):
        cells = [str(seq)]
        for backend in ("flash", "cudnn"):
            r = by[(backend, seq)]
            fwd, bwd = preset_attention_rates(preset, backend, seq)
            cells += [f"{r['forward_tflops']:.0f}", f"{fwd:.0f}",
                      f"{r['backward_tflops']:.0f}", f"{bwd:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    default_matches = all(
        abs(by[("default", s)]["forward_s"] - by[("cudnn", s)]["forward_s"]) <
        abs(by[("default", s)]["forward_s"] - by[("flash", s)]["forward_s"]) for s in {s for _, s in by})
    lines += ["", "SDPA's default dispatch ran " + ("cuDNN" if default_matches else "not always cuDNN") +
              " at every length (its times are those of the forced CUDNN backend).", ""]

    profile = ROOT / "configs/calibration/h200-sxm-141gb-measured.json"
    fit = fsdpsim(binary, "calibrate", "fit", str(profile), "--against", "h200-sxm-141gb")
    gemm_table = fit[fit.index("GEMMs against"):].split("\n\n")[0]
    lines += ["## GEMMs and copies (the harness, `fsdpsim-calibrate --phases gemm,memory`)", "",
              "`fsdpsim calibrate fit configs/calibration/h200-sxm-141gb-measured.json --against "
              "h200-sxm-141gb`:", "", "```", gemm_table, "", fit[fit.index("memory (not used"):].strip(),
              "```", "",
              "The presets' `memory_efficiency` 0.87 (x 4800 GB/s = 4176 GB/s) and `pcie_GBps` 50 "
              "sit within 1 % and 10 % of the copies measured; the GEMM model's median is within "
              "a few per cent of the measured GEMMs per dtype, with small shapes (1024-wide) the "
              "outliers on both sides.", ""]
    (ROOT / "reports/h200-measured.md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
