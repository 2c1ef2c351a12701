#!/usr/bin/env python3
"""Writes reports/fsdp-paper.md from the results .ci/make-paper-report produced.

Reads OUT/<sweep>/results.jsonl (one fsdpsim result per grid point, with its "grid") and
OUT/runs/<scenario>.json, writes the comparison plots OUT/compare_*.{gp,svg} (gnuplot) and the
page. Every published statement below is quoted with its source and tag ([V] verbatim from the
source, [U] an approximate reading of a figure); the verdict rules are fixed here, before any
number is looked at, and nothing is fitted to the paper.

Usage: paper_report.py --out reports/fsdp-paper --md reports/fsdp-paper.md --fsdpsim-version V
Python 3 standard library only.
"""

import argparse
import csv
import json
import os
import subprocess

TOLERANCE = 0.15  # the target: a number within 15 %
OK, FAIL = "✅", "❌"


def load_points(out, name):
    with open(os.path.join(out, name, "results.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_run(out, name):
    with open(os.path.join(out, "runs", name + ".json"), encoding="utf-8") as f:
        return json.load(f)


def find(points, **grid):
    """The one point whose grid has these values (keys with '.' written as '__')."""
    want = {k.replace("__", "."): v for k, v in grid.items()}
    hits = [p for p in points if all(p["grid"].get(k) == v for k, v in want.items())]
    if len(hits) != 1:
        raise SystemExit(f"paper_report: {len(hits)} points match {want}")
    return hits[0]


def rel(value, reference):
    return value / reference - 1.0


def pct(x, digits=1):
    return f"{x * 100:+.{digits}f} %"


def within(value, reference):
    return abs(rel(value, reference)) <= TOLERANCE


def verdict(ok):
    return OK if ok else FAIL


def backward_share(p):
    b = p["breakdown"]
    return (b["backward_s"] + b["recompute_s"]) / p["step_time_s"]


def gib(x):
    return f"{x:.1f} GiB"


class Plot:
    """A small gnuplot line/point plot written as NAME.gp (data inline) and rendered to NAME.svg."""

    def __init__(self, out, name, title, xlabel, ylabel, logx=False, xtics=None):
        self.out, self.name = out, name
        self.lines = [
            f"# .ci/make-paper-report: {title}. Re-render with: gnuplot {name}.gp",
            'if (!exists("outfile")) outfile = "' + name + '.svg"',
            'set terminal svg size 760,440 noenhanced font "Helvetica,12" background rgb "white"',
            "set output outfile",
            f'set title "{title}" font ",13"',
            f'set xlabel "{xlabel}"',
            f'set ylabel "{ylabel}"',
            'set grid lc rgb "#dddddd"',
            "set key below",
        ]
        if logx:
            self.lines.append("set logscale x 2")
        if xtics:
            self.lines.append("set xtics (" + ", ".join(f'"{label}" {x}' for label, x in xtics) + ")")
        self.series = []

    def set(self, line):
        self.lines.append(line)

    def add(self, label, xy, style="linespoints lw 2 pt 7", color=None):
        self.series.append((label, xy, style, color))

    def write(self):
        body = list(self.lines)
        plots = []
        for i, (label, xy, style, color) in enumerate(self.series):
            body.append(f"$d{i} << EOD")
            body += [f"{x} {y}" for x, y in xy]
            body.append("EOD")
            lc = f' lc rgb "{color}"' if color else ""
            plots.append(f'$d{i} using 1:2 with {style}{lc} title "{label}"')
        body.append("plot " + ", \\\n     ".join(plots))
        gp = os.path.join(self.out, self.name + ".gp")
        with open(gp, "w", encoding="utf-8") as f:
            f.write("\n".join(body) + "\n")
        subprocess.run(["gnuplot", self.name + ".gp"], cwd=self.out, check=True)
        return f"fsdp-paper/{self.name}.svg"


def gpt175b_level_text(b1, b2):
    """How fsdpsim's 128-GPU figures sit against the paper's 173 (a lower bound) and 186."""
    off = f"{pct(rel(b1, 173), 0)}/{pct(rel(b2, 186), 0)}"
    if b1 > 173 and b2 >= 186:
        return (f"fsdpsim stays optimistic by {off}: the paper's numbers are a 2022 eager minGPT "
                "with unfused attention, below the kernel efficiencies of the presets.")
    short = " (at batch 1 under the \"more than 173\" the paper states, so that statement is " \
            "not reproduced)" if b1 <= 173 else ""
    return (f"fsdpsim's figures are {off} off the paper's{short}; its kernel efficiencies are the "
            "presets' cited ones, not fitted to the paper's 2022 eager minGPT.")


def gpt175b(out, rows, sections):
    pts = load_points(out, "gpt175b_scaling")
    gpus = [128, 192, 256, 384, 512]
    tf = {(g, mb): find(pts, hardware__nodes=g // 8, training__micro_batch=mb)["hardware_tflops_per_gpu"]
          for g in gpus for mb in (1, 2)}
    b1, b2 = tf[(128, 1)], tf[(128, 2)]
    ok1 = b1 > 173 and within(b1, 173)
    ok2 = within(b2, 186)
    rows.append(("GPT-175B, batch 1, 128 GPUs: TFLOPS/GPU", "> 173 [V]", f"{b1:.1f} ({pct(rel(b1, 173))})", verdict(ok1)))
    rows.append(("GPT-175B, batch 2, 128 GPUs: TFLOPS/GPU", "186 [V]", f"{b2:.1f} ({pct(rel(b2, 186))})", verdict(ok2)))
    lin = {mb: tf[(512, mb)] / tf[(128, mb)] - 1 for mb in (1, 2)}
    ok_lin = all(abs(v) <= TOLERANCE for v in lin.values())
    rows.append(("GPT-175B: per-GPU TFLOPS 128 → 512 GPUs", "linear [V]",
                 f"{pct(lin[1])} (bs 1), {pct(lin[2])} (bs 2)", verdict(ok_lin)))
    anomaly = find(pts, hardware__nodes=16, training__micro_batch=2)
    others = [p for p in pts if p is not anomaly]
    retries_only_there = anomaly["num_alloc_retries"] > 0 and all(p["num_alloc_retries"] == 0 for p in others)
    reserved_gb = anomaly["peak_mem_reserved_gib"] * 2**30 / 1e9
    share = backward_share(anomaly)
    share_others = [backward_share(p) for p in others]
    # The paper's point: the allocator runs out of cache there (and only there) near 80 GB.
    ok_mem = retries_only_there and within(reserved_gb, 80)
    # ... and that stretches the backward: 85.56 % of the step vs ~67 % normally. Reproduced if
    # the share is within the target of 85.56 % and above the other points' by half the
    # paper's 18.6 points.
    ok_time = within(share, 0.8556) and share - max(share_others) >= (0.8556 - 0.67) / 2
    rows.append(("GPT-175B, 128 GPUs, batch 2: allocator defragmentation", "reserved hit 80 GB [V]",
                 (f"{anomaly['num_alloc_retries']} cudaMalloc "
                  f"{'retry' if anomaly['num_alloc_retries'] == 1 else 'retries'} per step, "
                  "the only point with any; "
                  if retries_only_there else
                  f"no cudaMalloc retry ({sum(p['num_alloc_retries'] for p in others)} at the other points); ") +
                 f"{anomaly['peak_mem_reserved_gib']:.1f} GiB = {reserved_gb:.1f} GB reserved", verdict(ok_mem)))
    rows.append(("GPT-175B, 128 GPUs, batch 2: backward share of the iteration", "85.56 % (normally ~67 %) [V]",
                 f"{share * 100:.1f} % (others {min(share_others) * 100:.1f}-{max(share_others) * 100:.1f} %)",
                 verdict(ok_time)))

    p = Plot(out, "compare_gpt175b_scaling", "GPT-175B: hardware TFLOPS/GPU vs GPUs",
             "GPUs (8 per node assumed)", "TFLOPS per GPU (counting the recompute)", logx=True,
             xtics=[(str(g), g) for g in gpus])
    p.set("set xrange [112:590]")
    p.set("set yrange [0:250]")
    p.add("fsdpsim, batch 1", [(g, f"{tf[(g, 1)]:.2f}") for g in gpus], color="#08519c")
    p.add("fsdpsim, batch 2", [(g, f"{tf[(g, 2)]:.2f}") for g in gpus], color="#de2d26")
    p.add("paper, batch 1: > 173 (Sec. 5.4, linear scaling)", [(g, 173) for g in gpus], "lines dt 2 lw 2", "#6baed6")
    p.add("paper, batch 2: 186 (Sec. 5.4, linear scaling)", [(g, 186) for g in gpus], "lines dt 2 lw 2", "#fc9272")
    plot = p.write()

    table = ["| GPUs | batch | TFLOPS/GPU (hardware) | model TFLOPS/GPU | step time | peak allocated | peak reserved | cudaMalloc retries | backward + recompute share |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for g in gpus:
        for mb in (1, 2):
            q = find(pts, hardware__nodes=g // 8, training__micro_batch=mb)
            table.append(f"| {g} | {mb} | {q['hardware_tflops_per_gpu']:.1f} | {q['model_tflops_per_gpu']:.1f} | "
                         f"{q['step_time_s']:.2f} s | {gib(q['peak_mem_allocated_gib'])} | {gib(q['peak_mem_reserved_gib'])} | "
                         f"{q['num_alloc_retries']} | {backward_share(q) * 100:.1f} % |")
    sections.append(f"""## 1. GPT-175B on 128 to 512 A100-80GB

Paper, Sec. 5.4 (Fig. 7b, 8b), [V]: minGPT GPT-175B, vocab 50000, block 2048, batch 1 and 2 per
GPU, 128/192/256/384/512 GPUs: "more than 173 and 186 TFLOPS per GPU" (~55 % and 60 % of 312),
linear scaling from 128 to 512 GPUs; at 128 GPUs with batch 2 the run hit defragmentation: the
backward took 85.56 % of the iteration (normally ~67 %) and reserved memory reached 80 GB. The
paper's TFLOPS count the recompute (Megatron's formula), so they compare with fsdpsim's
*hardware* TFLOPS. Scenarios: `scenarios/paper/sweeps/gpt175b_scaling.json` (the grid),
`scenarios/paper/gpt175b_512xa100_bs{{1,2}}.json` (the 512-GPU points, checked in CI),
`scenarios/paper/gpt175b_128xa100_bs{{1,2}}.json`.

![GPT-175B scaling]({plot})

{chr(10).join(table)}

The 15 % target holds for both batches at every GPU count, and per-GPU throughput is flat from
128 to 512 GPUs: with 2 Tb/s per node the per-unit all-gather and reduce-scatter hide behind the
block's compute (exposed communication {find(pts, hardware__nodes=16, training__micro_batch=1)['breakdown']['exposed_communication_s']:.2f} s of a
{find(pts, hardware__nodes=16, training__micro_batch=1)['step_time_s']:.1f} s step at 128 GPUs, batch 1). {gpt175b_level_text(b1, b2)}

{defrag_text(anomaly, reserved_gb, share, load_run(out, "whatif_gpt175b_128_bs2_no_host_sync"))} Sweep plots: [gpt175b_scaling/index.md](fsdp-paper/gpt175b_scaling/index.md).
""")


def defrag_text(anomaly, reserved_gb, share, no_host_sync):
    """What the simulation says of the 128-GPU batch-2 defragmentation anomaly; no_host_sync is
    the same point under a training loop that never waits for the GPU."""
    memory = (f"{anomaly['peak_mem_reserved_gib']:.1f} GiB = {reserved_gb:.1f} GB reserved of "
              f"{anomaly['usable_mem_gib']:.1f} GiB usable")
    if anomaly["num_alloc_retries"] > 0:
        head = ("The defragmentation anomaly is half reproduced. The memory side comes out of the "
                "caching-allocator model: the 128-GPU batch-2 point, the one with the most allocated "
                f"memory ({gib(anomaly['peak_mem_allocated_gib'])}), is the only one whose allocator "
                f"runs out of cache, frees it and retries a cudaMalloc "
                f"({anomaly['num_alloc_retries']} per step), with {memory}. The time side "
                "is not: each retry costs milliseconds in fsdpsim (a device synchronisation "
                "and the cudaFree/cudaMalloc calls), so the backward share stays at ")
    else:
        retries = no_host_sync["num_alloc_retries"]
        head = ("The defragmentation anomaly is not reproduced. The 128-GPU batch-2 point, the one "
                f"with the most allocated memory ({gib(anomaly['peak_mem_allocated_gib'])}), comes "
                f"closest to the device, {memory}, but its allocator finds room in its cache "
                "without a cudaMalloc retry. That is under a training loop that waits for the GPU "
                "once a step (`training.host_sync: step`, as PyTorch's FSDP example does with its "
                "`loss.item()`; the paper does not show its loop). Under one that never waits "
                "(`host_sync: none`) the CPU enters the next step while the backward's last units "
                "still run, its first all-gathers find the blocks those units freed still in use, "
                f"and the same point reserves {no_host_sync['peak_mem_reserved_gib']:.1f} GiB with "
                f"{retries} cudaMalloc {'retry' if retries == 1 else 'retries'} a step, a what-if "
                "(`reports/fsdp-paper/runs/whatif_gpt175b_128_bs2_no_host_sync.json`). Without "
                "retries the backward share stays at ")
    return (head + f"{share * 100:.1f} %, where the paper measured 85.56 %. A real allocator at "
            "that pressure keeps retrying (PyTorch's `num_alloc_retries` grows every iteration), "
            "which the model, reaching a steady cache, does not produce.")


def prefetch(out, rows, sections):
    pts = load_points(out, "gpt175b_backward_prefetch")
    gpus = [128, 192, 256, 384, 512]
    sp = {}
    for g in gpus:
        pre = find(pts, hardware__nodes=g // 8, fsdp__backward_prefetch="BACKWARD_PRE")
        none = find(pts, hardware__nodes=g // 8, fsdp__backward_prefetch="none")
        sp[g] = (none["step_time_s"] / pre["step_time_s"] - 1, pre, none)
    s128 = sp[128][0]
    ok = within(s128, 0.18) and all(within(sp[g][0], 0.18) for g in gpus)
    rows.append(("Backward prefetch speedup, GPT-175B", "≈ 18 %, across sizes [V]",
                 f"{s128 * 100:.1f} % at 128 GPUs ({pct(rel(s128, 0.18))}); "
                 f"{min(v[0] for v in sp.values()) * 100:.1f}-{max(v[0] for v in sp.values()) * 100:.1f} % over 128-512",
                 verdict(ok)))
    p = Plot(out, "compare_gpt175b_prefetch", "GPT-175B: BACKWARD_PRE speedup over no prefetch",
             "GPUs (8 per node assumed)", "speedup (step time none / BACKWARD_PRE - 1, %)", logx=True,
             xtics=[(str(g), g) for g in gpus])
    p.set("set xrange [112:590]")
    p.set("set yrange [0:25]")
    p.add("fsdpsim", [(g, f"{sp[g][0] * 100:.2f}") for g in gpus], color="#08519c")
    p.add("paper: approximately 18 % (Sec. 5.3, Fig. 6b)", [(g, 18) for g in gpus], "lines dt 2 lw 2", "#de2d26")
    plot = p.write()
    table = ["| GPUs | TFLOPS/GPU BACKWARD_PRE | TFLOPS/GPU none | speedup | exposed communication, none |",
             "|---:|---:|---:|---:|---:|"]
    for g in gpus:
        s, pre, none = sp[g]
        table.append(f"| {g} | {pre['hardware_tflops_per_gpu']:.1f} | {none['hardware_tflops_per_gpu']:.1f} | "
                     f"{s * 100:.1f} % | {none['breakdown']['exposed_communication_s']:.2f} s |")
    pre128, none128 = sp[128][1], sp[128][2]
    sections.append(f"""## 2. Backward prefetch on GPT-175B

Paper, Sec. 5.3 (Fig. 6b), [V]: backward prefetching gives "approximately 18% speedup",
consistently across cluster sizes; [U] read off the figure: ~150 → ~175 TFLOPS/GPU at 128 GPUs.
Scenarios: `scenarios/paper/sweeps/gpt175b_backward_prefetch.json`,
`scenarios/paper/gpt175b_128xa100_bs1_no_prefetch.json`.

![Backward prefetch]({plot})

{chr(10).join(table)}

[U] figure reading at 128 GPUs: ~150 → ~175 TFLOPS/GPU; fsdpsim {none128['hardware_tflops_per_gpu']:.0f} → {pre128['hardware_tflops_per_gpu']:.0f}.
Without prefetch the next unit's all-gather is issued in its own pre-backward hook, after this
unit's reduce-scatter on the same NCCL communicator, so it waits for it, and for the gradient's
pre-divide that the reduce-scatter waits for on the post-backward stream (`_div_if_needed`), and
overlaps no gradient kernel (`fsdpsim explain scenarios/paper/gpt175b_128xa100_bs1_no_prefetch.json`:
backward all-gathers and reduce-scatters on the inter-node link). The effect comes out of the
stream and communicator semantics; nothing was set to produce it. The speedup grows with the
cluster, {sp[gpus[0]][0] * 100:.1f} % at {gpus[0]} GPUs to {sp[gpus[-1]][0] * 100:.1f} % at {gpus[-1]}, because a ring's bus bandwidth falls with each doubling
of its nodes (`hardware/collective_cost.cpp`, NVIDIA/nccl#1229), which lengthens exactly the
collectives that prefetching hides.{"" if ok else " That growth is where fsdpsim departs from the paper, whose speedup is about the same at every size: past the 15 % band around 18 % at " + ", ".join(str(g) for g in gpus if not within(sp[g][0], 0.18)) + " GPUs, hence the verdict."} Sweep plots:
[gpt175b_backward_prefetch/index.md](fsdp-paper/gpt175b_backward_prefetch/index.md).
""")


def t5_scaling(out, rows, sections):
    pts = load_points(out, "t5_11b_scaling")
    gpus = [8, 16, 32, 64, 128, 256, 512]
    tf = {(g, mb): find(pts, hardware__nodes=g // 8, training__micro_batch=mb) for g in gpus for mb in (8, 16)}
    reg = {mb: tf[(512, mb)]["hardware_tflops_per_gpu"] / tf[(8, mb)]["hardware_tflops_per_gpu"] - 1 for mb in (8, 16)}
    ok = all(within(1 + reg[mb], 0.93) and reg[mb] < 0 for mb in (8, 16))
    rows.append(("T5-11B, 8 → 512 GPUs: TFLOPS/GPU change", "−7 % [V]",
                 f"{pct(reg[8])} (bs 8), {pct(reg[16])} (bs 16)", verdict(ok)))
    worst = max(p["peak_mem_allocated_gib"] / p["usable_mem_gib"] for p in pts)
    ok_mem = worst <= 0.75 and all(p["status"] == "ok" for p in pts)
    rows.append(("T5-11B, 8-512 GPUs: memory", "well below capacity [V]",
                 f"peak allocated ≤ {worst * 100:.0f} % of usable at every point", verdict(ok_mem)))
    p = Plot(out, "compare_t5_11b_scaling", "T5-11B: TFLOPS/GPU relative to 8 GPUs",
             "GPUs (8 per node assumed)", "TFLOPS/GPU / TFLOPS/GPU at 8 GPUs", logx=True,
             xtics=[(str(g), g) for g in gpus])
    p.set("set xrange [7:590]")
    p.set("set yrange [0.85:1.05]")
    for mb, color in ((8, "#08519c"), (16, "#de2d26")):
        base = tf[(8, mb)]["hardware_tflops_per_gpu"]
        p.add(f"fsdpsim, batch {mb}", [(g, f"{tf[(g, mb)]['hardware_tflops_per_gpu'] / base:.4f}") for g in gpus], color=color)
    p.add("paper: 7 % regression from 8 to 512 GPUs (Sec. 5.4; endpoints only)", [(8, 1.0), (512, 0.93)],
          "linespoints dt 2 lw 2 pt 6", "#636363")
    plot = p.write()
    table = ["| GPUs | batch | TFLOPS/GPU (hardware) | step time | exposed communication | peak allocated | peak reserved |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for g in gpus:
        for mb in (8, 16):
            q = tf[(g, mb)]
            table.append(f"| {g} | {mb} | {q['hardware_tflops_per_gpu']:.1f} | {q['step_time_s']:.3f} s | "
                         f"{q['breakdown']['exposed_communication_s'] * 1000:.1f} ms | {gib(q['peak_mem_allocated_gib'])} | {gib(q['peak_mem_reserved_gib'])} |")
    q = tf[(512, 8)]
    slow = load_run(out, "whatif_t5_11b_512_one_slow_gpu")
    spread = load_run(out, "whatif_t5_11b_512_node_spread")
    published = load_run(out, "published_scaling")
    per_doubling = published["per_doubling"]
    most = max(c["gpus"][1] for c in published["cases"])
    six = (1 + per_doubling["measured_change"]) ** 6 - 1
    sections.append(f"""## 3. T5-11B from 8 to 512 GPUs

Paper, Sec. 5.4 (Fig. 7c, 8c), [V]: HF T5-11B, sequence 512, batch 8 and 16 per GPU, 8 to 512
GPUs: memory "well below" capacity, and "7% regression" in TFLOPS/GPU from 8 to 512 GPUs.
Scenarios: `scenarios/paper/sweeps/t5_11b_scaling.json`, `scenarios/paper/t5_11b_8xa100.json`.

![T5-11B scaling]({plot})

{chr(10).join(table)}

Not reproduced: fsdpsim predicts flat per-GPU throughput ({pct(reg[8])} and {pct(reg[16])}).
`fsdpsim explain` at 512 GPUs reads "compute-bound: communication fully overlapped": the
collectives are busy ~12 % of the step and {q['breakdown']['exposed_communication_s'] * 1000:.0f} ms
are exposed. In a ring, each GPU sends M(W−1)/W bytes whatever W, so with 2 Tb/s per node the
per-unit collectives stay shorter than a T5 block's compute at every size; only the ring latency
grows (a few ms at 512 GPUs). What could cost 7 % in a real cluster: stragglers (every
collective waits for the slowest of 512 GPUs; Sinha et al., SC'22, measured 8 % average
performance variation between GPUs of one model in large clusters), congestion in a RoCE fabric
that is not non-blocking at 64 nodes, and NCCL's tree/ring choice at scale. fsdpsim simulates
stragglers when told which ranks are slow (`hardware.stragglers`), and one would be enough: the
512-GPU batch-8 point with one GPU at 93 % compute speed runs at
{slow['hardware_tflops_per_gpu']:.1f} TFLOPS/GPU ({pct(rel(slow['hardware_tflops_per_gpu'], q['hardware_tflops_per_gpu']))} against the same point without it,
{pct(rel(slow['hardware_tflops_per_gpu'], tf[(8, 8)]['hardware_tflops_per_gpu']))} against 8 GPUs, near the paper's −7 %). The paper does not say its GPUs
differed, so this is a what-if and the verdict stands. So is a spread between nodes: with the
nodes' GPU speeds spread by 2.5 % (`hardware.node_speed_spread`, the spread under which
fsdpsim's loss per doubling about matches the published pairs' below), the job runs at its slowest
node's expected pace, and the 512-GPU point gives {spread['hardware_tflops_per_gpu']:.1f} TFLOPS/GPU
({pct(rel(spread['hardware_tflops_per_gpu'], tf[(8, 8)]['hardware_tflops_per_gpu']))} against 8 GPUs). The published runs of
`configs/validation/cases.csv` that differ only in their GPU count (`fsdpsim validate`'s
"Scaling" section, {published['pairs']} pairs between 8 and {most} GPUs, llm-foundry's MPT runs on A100 and H100)
change their tokens/s per GPU by {pct(per_doubling['measured_change'])} per doubling of the GPUs (the median over the pairs),
where fsdpsim predicts {pct(per_doubling['predicted_change'])}: six doublings at that measured rate make {pct(six)}, about the
paper's −7 % from 8 to 512 GPUs. So the paper's regression is the size of the cost of scale that
fsdpsim misses on those runs too, whatever it is made of (`README.md`, "What is left"). The memory
statement holds: peak allocated memory stays under {worst * 100:.0f} % of the usable memory.
Sweep plots: [t5_11b_scaling/index.md](fsdp-paper/t5_11b_scaling/index.md).
""")


def fsdp_vs_ddp(out, rows, sections):
    pts = load_points(out, "t5_fsdp_vs_ddp")
    small = {"611M": {"ffn_dim": 2816, "preset": "t5-large"}, "2.28B": {"ffn_dim": 10496, "preset": "t5-3b"}}
    paper_u = {"611M": (15.18, 14.61), "2.28B": (27.40, 25.76)}
    res = {}
    for label, model in list(small.items()) + [("11B", "t5-11b")]:
        for dt in ("fp32", "bf16"):
            for par in ("fsdp", "ddp"):
                res[(label, dt, par)] = find(pts, model=model, fsdp__param_dtype=dt, parallelism=par)
    for label in small:
        ratios = {dt: res[(label, dt, "fsdp")]["hardware_tflops_per_gpu"] / res[(label, dt, "ddp")]["hardware_tflops_per_gpu"]
                  for dt in ("fp32", "bf16")}
        ok = all(res[(label, dt, par)]["status"] == "ok" for dt in ("fp32", "bf16") for par in ("fsdp", "ddp")) and \
            all(abs(r - 1) <= TOLERANCE for r in ratios.values())
        f, d = paper_u[label]
        rows.append((f"T5 {label}: FSDP vs DDP TFLOPS/GPU", f"comparable [V]; [U] {f} vs {d} (×{f / d:.2f})",
                     f"×{ratios['fp32']:.2f} (fp32), ×{ratios['bf16']:.2f} (bf16)", verdict(ok)))
    ddp_oom = all(res[("11B", dt, "ddp")]["status"] == "oom" for dt in ("fp32", "bf16"))
    ddp_fits = all(res[(l, dt, "ddp")]["status"] == "ok" for l in small for dt in ("fp32", "bf16"))
    rows.append(("T5: DDP out of memory above 2.28B", "OOM at 11B [V]",
                 f"DDP 11B: {res[('11B', 'bf16', 'ddp')]['status']} (fp32 and bf16); DDP 2.28B: ok", verdict(ddp_oom and ddp_fits)))
    f32, b16 = res[("11B", "fp32", "fsdp")], res[("11B", "bf16", "fsdp")]
    # "Significantly": at least 1.5x. Not 2x: on an A100 the BF16 tensor-core peak is exactly twice
    # the TF32 one that fp32 matmuls ran on, so more than 2x cannot be what the paper meant.
    gain = b16["hardware_tflops_per_gpu"] / f32["hardware_tflops_per_gpu"]
    ok_bf16 = f32["status"] == "ok" and b16["status"] == "ok" and gain >= 1.5
    rows.append(("T5-11B: FSDP runs it, BF16 'significantly higher' (≥ 1.5×)", "[V]",
                 f"fits; {f32['hardware_tflops_per_gpu']:.1f} (fp32, TF32 matmuls) → {b16['hardware_tflops_per_gpu']:.1f} (bf16), ×{gain:.2f}",
                 verdict(ok_bf16)))
    abs_cells = []
    for label, dt in (("611M", "fp32"), ("2.28B", "fp32")):
        got = res[(label, dt, "fsdp")]["hardware_tflops_per_gpu"]
        abs_cells.append(f"{label} {got:.1f} vs {paper_u[label][0]} ({pct(rel(got, paper_u[label][0]), 0)})")
    abs_cells.append(f"11B {b16['hardware_tflops_per_gpu']:.1f} vs 148.48 ({pct(rel(b16['hardware_tflops_per_gpu'], 148.48), 0)})")
    ok_abs = within(res[("611M", "fp32", "fsdp")]["hardware_tflops_per_gpu"], 15.18) and \
        within(res[("2.28B", "fp32", "fsdp")]["hardware_tflops_per_gpu"], 27.40) and within(b16["hardware_tflops_per_gpu"], 148.48)
    rows.append(("T5 FSDP TFLOPS/GPU, absolute", "[U] 15.18 / 27.40 / 148.48", "; ".join(abs_cells), verdict(ok_abs)))

    labels = ["611M", "2.28B", "11B"]
    p = Plot(out, "compare_t5_fsdp_vs_ddp", "T5: FSDP vs DDP, hardware TFLOPS/GPU on 8 A100-80GB",
             "model", "TFLOPS per GPU (log scale; missing = out of memory)", xtics=[(l, i) for i, l in enumerate(labels)])
    p.set("set xrange [-0.5:2.5]")
    p.set("set logscale y 10")
    p.set("set yrange [5:300]")
    for dt, par, color, pt in (("fp32", "fsdp", "#08519c", 7), ("fp32", "ddp", "#6baed6", 5),
                               ("bf16", "fsdp", "#a50f15", 7), ("bf16", "ddp", "#fc9272", 5)):
        dx = -0.08 if par == "fsdp" else 0.08
        xy = [(i + dx, f"{res[(l, dt, par)]['hardware_tflops_per_gpu']:.2f}") for i, l in enumerate(labels)
              if res[(l, dt, par)]["status"] == "ok"]
        p.add(f"fsdpsim {par.upper()} {dt}", xy, f"points ps 1.4 pt {pt}", color)
    p.add("paper FSDP [U]: 611M, 2.28B (no BF16), 11B BF16", [(-0.08, 15.18), (0.92, 27.40), (1.92, 148.48)], "points ps 1.6 pt 6 lw 2", "#252525")
    p.add("paper DDP [U]", [(0.08, 14.61), (1.08, 25.76)], "points ps 1.6 pt 4 lw 2", "#737373")
    plot = p.write()
    table = ["| model | precision | FSDP TFLOPS/GPU | DDP TFLOPS/GPU | FSDP / DDP | FSDP peak allocated | DDP peak allocated |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for l in labels:
        for dt in ("fp32", "bf16"):
            f, d = res[(l, dt, "fsdp")], res[(l, dt, "ddp")]
            dcell = f"{d['hardware_tflops_per_gpu']:.1f}" if d["status"] == "ok" else "out of memory"
            ratio = f"×{f['hardware_tflops_per_gpu'] / d['hardware_tflops_per_gpu']:.2f}" if d["status"] == "ok" else "–"
            dmem = gib(d["peak_mem_allocated_gib"]) if d["status"] == "ok" else "> capacity"
            table.append(f"| {l} | {dt} | {f['hardware_tflops_per_gpu']:.1f} | {dcell} | {ratio} | {gib(f['peak_mem_allocated_gib'])} | {dmem} |")
    sections.append(f"""## 4. FSDP vs DDP on T5 611M, 2.28B, 11B

Paper, Sec. 5.2 (Fig. 6a), [V]: FSDP and DDP perform comparably on 611M and 2.28B; DDP runs out
of memory above 2.28B; FSDP trains 11B, "with significantly higher TFLOPS by turning on BF16".
[U] figure readings, TFLOPS/GPU: 611M 15.18 (FSDP) vs 14.61 (DDP); 2.28B 27.40 vs 25.76; 11B
BF16 148.48. The paper does not give the T5 shapes of 611M and 2.28B, the GPU count, the batch or
the precision of the smaller runs. Assumed (stated in the scenarios): t5-large with d_ff 2816
(611.8M parameters) and t5-3b with d_ff 10496 (2.27B), every other T5Config field as the preset;
one node of 8 GPUs, batch 8 per GPU, seq 512, full checkpointing, Adam; both precisions simulated,
fp32 with TF32 matmuls (`training.allow_tf32`): 27.40 TFLOPS/GPU at 2.28B is above the A100's
19.5 TFLOP/s fp32 peak, which only the TF32 tensor cores exceed (PyTorch's matmul default before
1.12).
Scenarios: `scenarios/paper/sweeps/t5_fsdp_vs_ddp.json`, `scenarios/paper/t5_2_28b_ddp_8xa100.json`
and `scenarios/paper/t5_11b_ddp_8xa100.json` (checked in CI), `scenarios/paper/t5_11b_8xa100.json`.

![FSDP vs DDP]({plot})

{chr(10).join(table)}

The statements hold: within a few percent of each other at 611M and 2.28B (FSDP slightly ahead,
as in the figure), and DDP's replicated fp32 parameters, gradients and Adam state (16 bytes per
parameter, 181 GB for 11.3B) cannot fit 80 GB. The absolute figure readings are not reproduced:
with TF32, fsdpsim predicts {res[("611M", "fp32", "fsdp")]['hardware_tflops_per_gpu'] / 15.18:.1f}× the 611M reading and {res[("2.28B", "fp32", "fsdp")]['hardware_tflops_per_gpu'] / 27.40:.1f}× the 2.28B one (without
TF32, fp32 could not reach 27.40 at all), and in BF16 {res[("611M", "bf16", "fsdp")]['hardware_tflops_per_gpu'] / 15.18:.1f}× (611M) and {res[("2.28B", "bf16", "fsdp")]['hardware_tflops_per_gpu'] / 27.40:.1f}× (2.28B); the
readings' ratio, 2.28B over 611M, is {27.40 / 15.18:.2f}, fsdpsim's {res[("2.28B", "fp32", "fsdp")]['hardware_tflops_per_gpu'] / res[("611M", "fp32", "fsdp")]['hardware_tflops_per_gpu']:.2f} with TF32. The runs were
smaller or slower than the assumed batch 8 in a way the paper does not say. For 11B BF16 the batch
and GPU count behind 148.48 are not given; fsdpsim's {b16['hardware_tflops_per_gpu']:.0f} is for the assumed batch 8 on 8 GPUs. Sweep plots:
[t5_fsdp_vs_ddp/index.md](fsdp-paper/t5_fsdp_vs_ddp/index.md).
""")


def span(values):
    """'a-b' with one decimal ('a to b' when a is negative), or 'a' when both ends print the
    same."""
    lo, hi = f"{min(values):.1f}", f"{max(values):.1f}"
    if lo == hi:
        return lo
    return f"{lo} to {hi}" if min(values) < 0 else f"{lo}-{hi}"


def rate_limiter(out, rows, sections):
    # make-paper-report's choice per point: the paper's batch, or fsdpsim's largest if smaller.
    with open(os.path.join(out, "rate_limiter_batches.tsv")) as f:
        rows_tsv = list(csv.DictReader(f, delimiter="\t"))
    batch = {(r["sweep"], int(r["nodes"])): (int(r["paper_batch"]), int(r["batch"])) for r in rows_tsv}
    largest = {(r["sweep"], int(r["nodes"])): int(r["largest"]) for r in rows_tsv}
    cases = [("T5-11B", "t5_11b_rate_limiter"), ("RegNet-9B", "regnet9b_rate_limiter"),
             ("DeepViT-8B", "deepvit8b_rate_limiter")]
    paper_u = {("T5-11B", 2): (18.61, 8.36), ("T5-11B", 4): (15.33, 5.02), ("DeepViT-8B", 4): (21.64, 22.79)}
    res = {}
    for model, name in cases:
        pts = load_points(out, name)
        for nodes in (2, 4):
            for lim in (True, False):
                res[(model, nodes, lim)] = find(pts, hardware__nodes=nodes, fsdp__limit_all_gathers=lim,
                                                training__micro_batch=batch[(name, nodes)][1])

    def ratio(model, nodes):
        return res[(model, nodes, False)]["step_time_s"] / res[(model, nodes, True)]["step_time_s"]

    t5 = [ratio("T5-11B", n) for n in (2, 4)]
    ok_t5 = within(max(t5), 5.0)
    rows.append(("Rate limiter, T5-11B: speedup", "up to 5× [V]; [U] ×2.2 (2 nodes), ×3.1 (4 nodes)",
                 f"×{t5[0]:.3f} (2 nodes), ×{t5[1]:.3f} (4 nodes)", verdict(ok_t5)))
    rg = [ratio("RegNet-9B", n) for n in (2, 4)]
    ok_rg = all(abs(r - 1) < 0.02 for r in rg)
    rows.append(("Rate limiter, RegNet-9B", "no gain [V]", f"×{rg[0]:.3f} (2 nodes), ×{rg[1]:.3f} (4 nodes); gain under 2 %", verdict(ok_rg)))
    dv = [1 / ratio("DeepViT-8B", n) - 1 for n in (2, 4)]
    ok_dv = all(within(1 + d, 1.05) and d > 0 for d in dv)
    rows.append(("Rate limiter, DeepViT-8B: cost", "~5 % overhead [V]; [U] +5.3 % (4 nodes)",
                 f"{pct(dv[0])} (2 nodes), {pct(dv[1])} (4 nodes)", verdict(ok_dv)))

    xt = [("T5 2n", 0), ("T5 4n", 1), ("RegNet 2n", 2), ("RegNet 4n", 3), ("DeepViT 2n", 4), ("DeepViT 4n", 5)]
    order = [("T5-11B", 2), ("T5-11B", 4), ("RegNet-9B", 2), ("RegNet-9B", 4), ("DeepViT-8B", 2), ("DeepViT-8B", 4)]
    p = Plot(out, "compare_rate_limiter", "Rate limiter: step time off / on (above 1: the limiter helps)",
             "model, nodes", "latency without limiter / with limiter", xtics=xt)
    p.set("set xrange [-0.5:5.5]")
    p.set("set logscale y 2")
    p.set("set yrange [0.8:6]")
    p.add("fsdpsim", [(i, f"{ratio(m, n):.4f}") for i, (m, n) in enumerate(order)], "points ps 1.6 pt 7", "#08519c")
    p.add("paper [U] (median latency read off Fig. 6c)",
          [(i, f"{paper_u[(m, n)][0] / paper_u[(m, n)][1]:.4f}") for i, (m, n) in enumerate(order) if (m, n) in paper_u],
          "points ps 1.8 pt 6 lw 2", "#de2d26")
    p.add("paper [V]: RegNet no gain", [(2, 1.0), (3, 1.0)], "points ps 1.8 pt 4 lw 2", "#de2d26")
    p.add("no effect", [(-0.5, 1), (5.5, 1)], "lines dt 2 lw 1", "#636363")
    plot = p.write()
    table = ["| model | nodes | batch (paper's) | step time, limiter on | off | off / on | peak reserved on / off | cudaMalloc retries on / off | [U] paper off → on |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for model, name in cases:
        for nodes in (2, 4):
            on, off = res[(model, nodes, True)], res[(model, nodes, False)]
            u = paper_u.get((model, nodes))
            ucell = f"{u[0]} → {u[1]} s" if u else "–"
            paper_mb, mb = batch[(name, nodes)]
            table.append(f"| {model} | {nodes} | {mb} ({paper_mb}) | {on['step_time_s']:.3f} s | {off['step_time_s']:.3f} s | "
                         f"×{off['step_time_s'] / on['step_time_s']:.3f} | {on['peak_mem_reserved_gib']:.1f} / {off['peak_mem_reserved_gib']:.1f} GiB | "
                         f"{on['num_alloc_retries']} / {off['num_alloc_retries']} | {ucell} |")
    t5on = res[("T5-11B", 4, True)]
    regnet_largest = largest[("regnet9b_rate_limiter", 2)]
    regnet_2n_fit = ("fits the paper's 48 on 2 nodes (its largest in fsdpsim too)"
                     if regnet_largest == 48 else
                     f"fits the paper's 48 on 2 nodes (fsdpsim's largest is {regnet_largest})"
                     if regnet_largest > 48 else
                     f"does not fit the paper's 48 on 2 nodes (fsdpsim's largest is "
                     f"{regnet_largest})")
    sections.append(f"""## 5. The rate limiter on T5-11B, RegNet-9B and DeepViT-8B

Paper, Sec. 5.3 (Fig. 6c), [V]: with the largest batch that fits (RegNet 9B: 48 per GPU on 2
nodes, 72 on 4; T5 11B: 2; DeepViT 8B: 105 and 120), the limiter gives T5 "up to 5X speedups",
RegNet no gain, and DeepViT "additional 5% overhead"; [U] median batch latency read off the
figure, off → on: T5 4 nodes 15.33 → 5.02 s, 2 nodes 18.61 → 8.36 s; DeepViT 4 nodes 21.64 →
22.79 s. RegNet-9B and DeepViT-8B are the custom layer-list presets `regnet-9b` and `deepvit-8b`
(shapes assumed from the published architectures, `configs/models/README.md`). Scenarios:
`scenarios/paper/sweeps/{{t5_11b,regnet9b,deepvit8b}}_rate_limiter_2_4_nodes.json`.

![Rate limiter]({plot})

{chr(10).join(table)}

Which settings Fig. 6c used beyond the batch the paper does not say, but it says each batch is the
largest that fits, and that pins one down: T5-11B fits batch 2 in fsdpsim only without activation
checkpointing (with full checkpointing 48 and 52 fit on 2 and 4 nodes: `fsdpsim run
scenarios/paper/sweeps/t5_11b_rate_limiter_2_4_nodes.json --set training.activation_checkpointing=full
--max-micro-batch`, and `--set hardware.nodes=4`), and RegNet-9B {regnet_2n_fit}. So these runs use no
checkpointing, BF16 and otherwise the Sec. 5.4 settings, each at the paper's batch or at fsdpsim's
largest where that is smaller (the batch column; DeepViT's assumed shape keeps more activations
than the paper's model).

Only RegNet's "no gain" is reproduced. The mechanism is there: without the limiter the CPU runs
ahead as far as CUDA's launch queues let it (1,024 ops per stream, `sim/engine/program.hpp`), all-gather outputs allocated on the unshard stream and freed with `record_stream` pile up
in the cache, reserved memory climbs to the device's capacity and the allocator frees its cache
and retries a cudaMalloc ({min(off['num_alloc_retries'] for (m, n, l), off in res.items() if not l)}-{max(off['num_alloc_retries'] for (m, n, l), off in res.items() if not l)} retries per step with the limiter off), stalling the CPU
until the GPU drains. But each retry costs only its device calls and one exposed all-gather,
because the CPU's wait is hidden behind queued GPU work (allocator and FSDP1 checked against the
PyTorch source in [rate-limiter-retries.md](rate-limiter-retries.md)), so the limiter buys
{span([(r - 1) * 100 for r in t5])} % on T5, not 5×. The paper's T5 latencies with the limiter on are
{paper_u[("T5-11B", 4)][1] / t5on['step_time_s']:.1f}-{paper_u[("T5-11B", 2)][1] / res[("T5-11B", 2, True)]['step_time_s']:.1f}× fsdpsim's step ({t5on['step_time_s']:.2f} s on 4 nodes) at the same batch, so
something else slowed those runs that the page's scenarios do not contain. DeepViT's 5 % cost is
not reproduced either: the limiter's only cost in the model is the CPU blocking on a free event
before the next all-gather, and with seconds-long steps of large GEMMs the CPU is far ahead of the
GPU, so the wait never reaches the GPU; the limiter even helps slightly (the retries it avoids).
Sweep plots: [T5](fsdp-paper/t5_11b_rate_limiter/index.md),
[RegNet](fsdp-paper/regnet9b_rate_limiter/index.md), [DeepViT](fsdp-paper/deepvit8b_rate_limiter/index.md).
""")


def dhen(out, rows, sections):
    pts = load_points(out, "dhen_sharding")
    nodes = [2, 4, 8, 16, 32, 64]
    strategies = [("FULL_SHARD", "full + RAF"), ("SHARD_GRAD_OP", "full + NRAF"),
                  ("HYBRID_SHARD", "hybrid + RAF"), ("_HYBRID_SHARD_ZERO2", "hybrid + NRAF")]
    r = {(n, s): find(pts, hardware__nodes=n, fsdp__sharding_strategy=s) for n in nodes for s, _ in strategies}
    qps = lambda p: p["tokens_per_s_per_gpu"]
    mem = lambda p: p["peak_mem_allocated_gib"]

    def count(pred):
        return sum(1 for n in nodes if pred(n))

    low_mem = count(lambda n: all(mem(r[(n, "FULL_SHARD")]) < mem(r[(n, s)]) for s, _ in strategies[1:]))
    low_qps = count(lambda n: all(qps(r[(n, "FULL_SHARD")]) < qps(r[(n, s)]) for s, _ in strategies[1:]))
    high_qps = count(lambda n: all(qps(r[(n, "_HYBRID_SHARD_ZERO2")]) > qps(r[(n, s)]) for s, _ in strategies[:3]))
    more_mem = count(lambda n: mem(r[(n, "_HYBRID_SHARD_ZERO2")]) > mem(r[(n, "FULL_SHARD")]))
    k = len(nodes)
    rows.append(("DHEN: full + RAF has the lowest memory", "[V]", f"at {low_mem} of {k} GPU counts", verdict(low_mem == k)))
    rows.append(("DHEN: full + RAF has the lowest QPS", "[V]", f"at {low_qps} of {k} GPU counts", verdict(low_qps == k)))
    rows.append(("DHEN: hybrid + NRAF has the highest QPS", "[V]", f"at {high_qps} of {k} GPU counts", verdict(high_qps == k)))
    rows.append(("DHEN: hybrid + NRAF uses more memory than full + RAF", "[V]", f"at {more_mem} of {k} GPU counts", verdict(more_mem == k)))
    falls = {s: all(mem(r[(a, s)]) >= mem(r[(b, s)]) for a, b in zip(nodes, nodes[1:])) and mem(r[(nodes[0], s)]) > mem(r[(nodes[-1], s)]) * 1.05
             for s, _ in strategies}
    rows.append(("DHEN: memory falls as GPUs are added", "[V]",
                 ", ".join(f"{lab}: {'falls' if falls[s] else 'flat'}" for s, lab in strategies), verdict(all(falls.values()))))
    colors = ["#08519c", "#6baed6", "#a50f15", "#fc9272"]
    gpus = [n * 8 for n in nodes]
    pq = Plot(out, "compare_dhen_qps", "DHEN dense part: QPS per GPU vs GPUs", "GPUs (8 per node assumed)",
              "samples/s per GPU", logx=True, xtics=[(str(g), g) for g in gpus])
    pm = Plot(out, "compare_dhen_memory", "DHEN dense part: peak allocated memory vs GPUs", "GPUs (8 per node assumed)",
              "peak allocated memory per GPU (GiB)", logx=True, xtics=[(str(g), g) for g in gpus])
    pq.set("set xrange [14:590]")
    pm.set("set xrange [14:590]")
    pm.set("set yrange [0:*]")
    for (s, lab), color in zip(strategies, colors):
        pq.add(f"{lab} ({s})", [(n * 8, f"{qps(r[(n, s)]):.1f}") for n in nodes], color=color)
        pm.add(f"{lab} ({s})", [(n * 8, f"{mem(r[(n, s)]):.4f}") for n in nodes], color=color)
    plot_q, plot_m = pq.write(), pm.write()
    table = ["| GPUs | " + " | ".join(f"{lab} QPS/GPU" for _, lab in strategies) + " | " +
             " | ".join(f"{lab} peak alloc." for _, lab in strategies) + " |",
             "|---:|" + "---:|" * 8]
    for n in nodes:
        table.append(f"| {n * 8} | " + " | ".join(f"{qps(r[(n, s)]):.0f}" for s, _ in strategies) + " | " +
                     " | ".join(f"{mem(r[(n, s)]):.2f}" for s, _ in strategies) + " |")
    exposed = lambda n, s: 100 * r[(n, s)]["breakdown"]["exposed_communication_s"] / r[(n, s)]["step_time_s"]
    order_lines = [f"- {n * 8} GPUs: " + " > ".join(lab for s, lab in sorted(strategies, key=lambda x: -qps(r[(n, x[0])])))
                   for n in nodes]
    sections.append(f"""## 6. DHEN: hybrid vs full sharding, reshard-after-forward

Paper, Sec. 5.4 (Fig. 7a, 8a), [V]: DHEN (768B sparse parameters sharded by activation exchange,
550M dense parameters under FSDP), batch 1024: full sharding with reshard-after-forward (RAF) has
the lowest memory and the lowest QPS; hybrid sharding without it (NRAF) the highest QPS and more
memory; memory falls as GPUs are added. The hybrid factor and the numbers are not given. Assumed:
the `dhen-dense-550m` custom layer-list preset (8 DHEN layers of 68.75M parameters), hybrid shard
groups of one 8-GPU node, 16 to 512 GPUs. FSDP1 ties RAF to the strategy: FULL_SHARD = full + RAF,
SHARD_GRAD_OP = full + NRAF, HYBRID_SHARD = hybrid + RAF, _HYBRID_SHARD_ZERO2 = hybrid + NRAF.
Scenario: `scenarios/paper/sweeps/dhen_dense_sharding_16_512.json`.

![DHEN QPS]({plot_q})

![DHEN memory]({plot_m})

{chr(10).join(table)}

The memory ordering is reproduced: full + RAF is always the lowest, hybrid + NRAF the highest.
Memory falls with more GPUs only under full sharding: with hybrid groups fixed at 8 GPUs the
shards do not shrink, so fsdpsim keeps that memory flat (the paper's curve may use a hybrid factor
that grows with the cluster; it does not say). QPS order, fastest first, at each GPU count:
{chr(10).join(order_lines)}

The dense part alone is a small model ({r[(2, 'FULL_SHARD')]['step_time_s'] * 1000:.0f} ms steps). On few nodes every collective
hides behind compute except hybrid's extra inter-node all-reduce after each reduce-scatter, the
exposed tail that makes it slower: at {gpus[0]} GPUs {exposed(nodes[0], 'HYBRID_SHARD'):.1f} % of the step is exposed
communication under hybrid + RAF against {exposed(nodes[0], 'FULL_SHARD'):.1f} % under full + RAF. As the cluster grows, full
sharding's all-gathers and reduce-scatters cross the network with a latency that grows with the
ring and a bandwidth that falls with the node count, while hybrid keeps them on NVLink: at
{gpus[-1]} GPUs {exposed(nodes[-1], 'FULL_SHARD'):.1f} % of the step is exposed under full + RAF against {exposed(nodes[-1], 'HYBRID_SHARD'):.1f} % under hybrid + RAF.
In the paper, the 768B sparse part's activation exchange (all-to-all on the same network) also
competes with FSDP's inter-node traffic, which would move the crossover to fewer GPUs; fsdpsim simulates only the FSDP part and no competing traffic. Sweep
plots: [dhen_sharding/index.md](fsdp-paper/dhen_sharding/index.md).
""")


def blog(out, rows, sections):
    cases = [("GPT-175B, 128 A100-40GB, bs 20, seq 512", "blog2022_gpt175b_128xa100_40gb", 159),
             ("GPT-1T, 128 A100-40GB, bs 4, seq 2048", "blog2022_gpt1t_128xa100_40gb", 84)]
    table = ["| run | blog TFLOPS/GPU | fsdpsim TFLOPS/GPU (hardware) | error | fsdpsim status | cudaMalloc retries |",
             "|---|---:|---:|---:|---|---:|"]
    for label, name, paper in cases:
        d = load_run(out, name)
        got = d["hardware_tflops_per_gpu"]
        ok = d["status"] == "ok" and within(got, paper)
        status = "fits" if d["status"] == "ok" else "out of memory"
        rows.append((f"Blog 2022: {label}", f"{paper} [V]", f"{got:.1f} ({pct(rel(got, paper))}), {status}", verdict(ok)))
        table.append(f"| {label} | {paper} | {got:.1f} | {pct(rel(got, paper))} | {status} | {d['num_alloc_retries']} |")
    d175 = load_run(out, "blog2022_gpt175b_128xa100_40gb")
    d1t = load_run(out, "blog2022_gpt1t_128xa100_40gb")

    def fit_text(d, label):
        if d["status"] == "ok":
            return (f"{label} fits, at {d['hardware_tflops_per_gpu']:.1f} TFLOPS/GPU with "
                    f"{d['num_alloc_retries']} cudaMalloc retries per step")
        # The failing allocation, up to the device's state; the step's allocated peak is what it
        # would take on a device large enough (active memory there is no guide: without the rate
        # limiter the CPU runs ahead of an unbounded device).
        failed = d["oom_reason"].split(". The device")[0]
        return (f"{label} is out of memory ({failed}): the step would need at least "
                f"{d['peak_mem_allocated_gib']:.0f} GiB allocated at its peak, of "
                f"{d['usable_mem_gib']:.1f} GiB usable (its time, "
                f"{d['hardware_tflops_per_gpu']:.0f} TFLOPS/GPU, is given for completeness only)")

    shard_1t = d1t["parameters"] / d1t["world_size"] * 2 / 2**30  # fp16 _saved_grad_shard
    heads128 = load_run(out, "whatif_blog2022_gpt1t_128_heads")
    sections.append(f"""## 7. The 2022 PyTorch blog: GPT-175B and GPT-1T on A100-40GB

Blog "Introducing PyTorch Fully Sharded Data Parallel (FSDP) API" (March 2022), [V]: AWS, 8
A100-40GB per node, EFA 400 Gb/s, minGPT, vocab 50K, fp16, SGD, parameter CPU offload and
activation checkpointing: GPT-175B reaches 159 TFLOPS/GPU (51 % of peak) at batch 20, seq 512,
on 128 GPUs; GPT-1T (128 layers, 25600 hidden, 160 heads) 84 TFLOPS/GPU (27 %) at batch 4, seq
2048, on 128 GPUs, limited by the "slow CUDA cache allocator" near the memory limit. Scenarios:
`scenarios/paper/blog2022_gpt175b_128xa100_40gb.json`, `scenarios/paper/blog2022_gpt1t_128xa100_40gb.json`.

{chr(10).join(table)}

Both scenarios are set as the AWS blog on the same runs ("Training a 1 Trillion Parameter Model
With PyTorch FSDP on AWS", 2022) describes them. PyTorch 1.10 with "all experiments ... run with fp16,
including SGD optimizer": that prototype FSDP has no MixedPrecision, so the modules were fp16 and
the parameters, their gradient shards and the reduction are fp16 (`training.param_storage_dtype`).
Nor had it a rate limiter: `limit_all_gathers` came with pytorch#83917 (August 2022), so
`fsdp.limit_all_gathers: false`.
Each decoder linear is an FSDP unit of its own, nested in its block's unit ("the decoder's linear
layers were wrapped using FSDP"; `fsdp.wrap_policy: block_and_linear`, which, as PyTorch's
`ModuleWrapPolicy({{Block, nn.Linear}})`, also wraps the LM head's linear): a GPT-1T block's unsharded
fp16 parameters are 15.7 GB, its largest linear 5.2 GB. Each block's input is kept in host memory
("we also offloaded outer activations of transformer layers to CPUs", with `save_on_cpu` hooks;
`training.offload_activations`): those inputs alone are 22.5 GiB for 175B (96 blocks x 20 x 512 x
12288 x 2 B) and 50 GiB for 1T, against {d175['usable_mem_gib']:.1f} GiB usable. The host copies
run at 6.3 GB/s per GPU (`hardware.node.pcie_GBps`), as the blog's trace of the 1T run measured
them (one block input, 419 MB, in 66 ms to the host and 68 ms back; p4d hosts are Cascade Lake
Xeons, with PCIe 3.0). With these, {fit_text(d175, "GPT-175B")}. {fit_text(d1t, "GPT-1T")}.
FSDP1 keeps each unit's reduced gradient shard on the GPU until the end of backward, CPU offload
or not (`_saved_grad_shard`: `_accumulate_sharded_grad`, freed by `_finalize_params`,
`torch/distributed/fsdp/_runtime_utils.py`): {shard_1t:.1f} GiB in fp16 at
{d1t['world_size']} GPUs, beside one block's recompute of unfused attention at batch 4 x 2048 tokens x 160
heads and the gathered linears with their unsharded gradients. PyTorch 1.10's prototype instead
copied each reduced shard to the host at once and let the GPU copy go; fsdpsim models PyTorch 2.x,
and without those {shard_1t:.1f} GiB the step would still need {d1t['peak_mem_allocated_gib'] - shard_1t:.0f} GiB. The allocator stall the blog names as
GPT-1T's bottleneck belongs to a run that fits.

The authors' trainer of the time (`mrshenli/ptd_benchmark`, whose `trainer.py` writes the
blog's TFLOP/s formula; `models.py` at 62f8c89, 2022-01-26) differs from that description in
ways that move memory: its `GPT1TConfig` has 128 attention heads, not Megatron-2's 160; it wraps
each block's attention module (its four linears), each MLP linear and each LayerNorm, and also the
embedding and the final norm, which `block_and_linear` leaves to the root (2.4 GiB of the GPT-1T
embedding gathered all step); its loss is `out.sum()`; backward prefetch is off unless asked for. With 128 heads alone (a what-if,
`--set model.n_heads=128 --set model.n_kv_heads=128`) GPT-1T's peak allocated memory falls from
{d1t['peak_mem_allocated_gib']:.1f} to {heads128['peak_mem_allocated_gib']:.1f} GiB and the step is {'out of memory' if heads128['status'] == 'oom' else 'within the device'}; the
blog's run, whichever code it used, fitted at batch 4 ("maximum GPU memory utilization was
reached with a batch size of 4").
""")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--md", required=True)
    ap.add_argument("--fsdpsim-version", required=True)
    args = ap.parse_args()
    rows, sections = [], []
    # The one fitted constant, as the presets carry it (every preset has the same value).
    preset = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs", "hardware",
                          "a100-sxm-80gb.json")
    with open(preset) as f:
        sustained = json.load(f)["gpu"]["sustained_compute_fraction"]
    for part in (gpt175b, prefetch, t5_scaling, fsdp_vs_ddp, rate_limiter, dhen, blog):
        part(args.out, rows, sections)
    passed = sum(1 for r in rows if r[3] == OK)
    summary = ["| statement | paper / blog | fsdpsim | verdict |", "|---|---|---|:---:|"]
    summary += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    page = f"""# The FSDP paper, side by side

Every experiment of "PyTorch FSDP: Experiences on Scaling Fully Sharded Data Parallel" (Zhao et
al., PVLDB 16(12), 2023; arXiv 2304.11277) and of the PyTorch blog "Introducing PyTorch Fully
Sharded Data Parallel (FSDP) API" (March 2022) that fsdpsim can describe, simulated and set next
to the published statement. Generated by `.ci/make-paper-report [FSDPSIM_BINARY]` with
{args.fsdpsim_version}; do not edit by hand. {passed} of {len(rows)} statements reproduced.

## How to read this, and what is assumed

- **Sources and tags.** Each statement is quoted with its section or figure. [V]: stated in the
  text. [U]: an approximate reading of a figure, not a stated value; treat it as ±10 %.
- **Verdicts.** ✅ when the statement holds in fsdpsim: a stated number within 15 % (the target),
  a direction or ordering reproduced at every point simulated. ❌ otherwise, with the reason in
  the section. Rules are fixed in `.ci/paper_report.py` and apply to all points, not the best.
- **TFLOPS.** The paper and the blog count the activation-checkpointing recompute (Megatron's
  formula), so they are compared with fsdpsim's *hardware* TFLOPS/GPU (`hardware_tflops_per_gpu`).
- **Cluster.** Paper Sec. 5.1: "8 to 512 A100 80GB GPUs interconnected by a 2Tb/s RoCE network",
  read as `hardware.node.nic_Gbps_per_node: 2000`. The paper does not give GPUs per node: 8 is
  assumed (DGX/HGX A100). Sec. 5.4 settings everywhere unless a section says otherwise:
  FULL_SHARD, BACKWARD_PRE, rate limiter on, full activation checkpointing of every block
  re-running the whole block (`training.checkpoint_early_stop: false`: the early stop of PyTorch
  2.1's non-reentrant checkpoint postdates these 2022 runs), BF16
  parameters and reductions, Adam(W). The blog: A100-40GB, EFA 400 Gb/s per node, fp16 modules
  (no mixed precision), SGD, parameter and activation CPU offload, no rate limiter (PyTorch
  1.10 had none), host copies at the 6.3 GB/s per GPU its trace measured.
- **Shapes the paper does not give** are assumptions stated in each scenario's `description`:
  GPT-175B is the standard 96 × 12288 (the blog's), T5 11B is HF's `t5-11b`, T5 "611M" and
  "2.28B" are t5-large and t5-3b with `d_ff` changed to give those counts, RegNet-9B, DeepViT-8B
  and the DHEN dense part are custom layer lists derived from the published architectures
  (`configs/models/README.md`), batch and GPU count of Fig. 6a are assumed. The GPTs are
  minGPT's, whose every block holds a block_size² causal mask as a module buffer, unsharded:
  fp32 here (MixedPrecision's `buffer_dtype` left unset; a bf16 policy would halve GPT-175B's
  1.5 GiB), fp16 in the blog's fp16 modules. The memory breakdowns count them with the parameters.
- **Batch.** The paper's batches are per GPU, with no accumulation: every point runs with
  global batch = batch per GPU × GPUs (the sweep files carry a global batch valid for their whole
  grid, for running them by hand with `fsdpsim sweep`).
- **Nothing was tuned to these numbers.** The hardware presets are cited physical quantities
  (`configs/hardware/*.json`, each value with its source) plus one globally fitted
  `sustained_compute_fraction` = {sustained}, fitted once on the llm-foundry throughput tables
  (`reports/validation-fit.md`), not on any run of this page. Statements fsdpsim does not
  reproduce are reported as such, with the reason; no expectation was loosened to pass.
- **In CI.** The firm statements fsdpsim reproduces are `expect` blocks that
  `fsdpsim check scenarios/paper` verifies (ctest `check_shipped_scenarios`): GPT-175B on 512
  GPUs within 15 % of 173/186 TFLOPS/GPU, DDP fits T5 2.28B and is out of memory on T5-11B, FSDP
  fits T5-11B on 8 GPUs, the blog's GPT-175B fits 40 GB GPUs within 15 % of 159 TFLOPS/GPU.

## Summary

{chr(10).join(summary)}

{chr(10).join(sections)}
## Regenerate

```
cmake --preset release && cmake --build --preset release
.ci/make-paper-report            # or: .ci/make-paper-report build-ci/bin/fsdpsim
```

Each sweep's table, result lines and `fsdpsim report` plots are in `reports/fsdp-paper/<sweep>/`
(`sweep.csv`, `results.jsonl`, `index.md`), the single runs in `reports/fsdp-paper/runs/`, the
comparison plots with their gnuplot scripts in `reports/fsdp-paper/compare_*`.
"""
    with open(args.md + ".tmp", "w", encoding="utf-8") as f:
        f.write(page)
    os.replace(args.md + ".tmp", args.md)


if __name__ == "__main__":
    main()
