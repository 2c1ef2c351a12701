#!/usr/bin/env python3
"""Writes the nccl-tests logs of this folder from the published numbers in
configs/validation/nccl_reference.csv, in the exact output format of NVIDIA/nccl-tests
(src/util.cu: writeDeviceReport, writeResultHeader, writeBenchmarkLinePreamble,
writeBenchmarkLineBody, writeResultFooter; getFloatStr for the number widths).

Only the measurements (size, time, algbw, busbw) come from the sources; host names, pids, PCI
bus ids and the in-place columns (which repeat the out-of-place numbers: the sources give one
value per size) are illustrative. Run from the repository root:
    python3 tests/data/nccl-tests/generate_logs.py
"""
import csv
import os

HERE = os.path.dirname(os.path.abspath(__file__))
CSV = os.path.join(HERE, "..", "..", "..", "configs", "validation", "nccl_reference.csv")


def float_str(value, width):
    """nccl-tests getFloatStr: %.2f, else %.1f, else %.0f, else %.1e / %.0e, in `width`."""
    for fmt in ("%*.2f", "%*.1f", "%*.0f"):
        s = fmt % (width, value)
        if len(s) <= width:
            return s
    return ("%*.1e" if width >= 7 else "%*.0e") % (width, value)


def rows(gpu_prefix, nodes, collective="all_reduce"):
    out = []
    for r in csv.DictReader(open(CSV)):
        if not r["gpu"].startswith(gpu_prefix) or r["nodes"] != str(nodes) or r["collective"] != collective:
            continue
        if not r["size_bytes"]:
            continue
        out.append(r)
    return out


def devices(hosts, per_host, name, start_pid):
    lines = []
    rank = 0
    for h, host in enumerate(hosts):
        for d in range(per_host):
            bus = [0x07, 0x0F, 0x47, 0x4E, 0x87, 0x90, 0xB7, 0xBD][d % 8]
            lines.append("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s"
                         % (rank, 0, start_pid + (rank if per_host == 1 else 0), host, d, 0, bus, 0, name))
            rank += 1
    return lines


def modern_header(timestamp=False):
    ts_lbl = "timestamp" if timestamp else ""
    ts_pad = 19 if timestamp else 0
    return [
        "#",
        "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          " % ("", "", "", "", ""),
        ("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s"
         % ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
            "#wrong", ts_pad, ts_lbl)).rstrip(),
        ("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s"
         % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", ts_pad,
            "")).rstrip(),
    ]


def row(size, count, type_name, redop, root, time_us, algbw, busbw, wrong="0"):
    body = "  %7s  %6s  %6s  %6s" % (float_str(time_us, 7), float_str(algbw, 6), float_str(busbw, 6), wrong)
    return "%12d  %12d  %8s  %6s  %6d" % (size, count, type_name, redop, root) + body + body


def footer(avg_busbw, program=None):
    lines = ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : %g " % avg_busbw, "#"]
    if program:
        lines.append("# Collective test concluded: %s" % program)
    return lines


def write(name, lines):
    with open(os.path.join(HERE, name), "w") as f:
        f.write("\n".join(lines) + "\n")


def a100_all_reduce():
    """8x A100 SXM, one process driving 8 GPUs (-g 8), float sum, 32 KiB - 16 GiB (-f 2), -n 50.
    stas00/ml-engineering network/README.md @744d01e "Real network throughput"."""
    data = rows("A100 (SXM", 1)
    lines = ["# nThread 1 nGpus 8 minBytes 32768 maxBytes 17179869184 step: 2(factor) warmup iters: 5 iters: 50 "
             "agg iters: 1 validation: 1 graph: 0",
             "#", "# Using devices"]
    lines += devices(["node001"], 8, "NVIDIA A100-SXM4-80GB", 104217)
    lines += modern_header()
    busbws = []
    for r in data:
        size = int(r["size_bytes"])
        algbw = float(r["algbw_GBps"])
        busbw = float(r["busbw_GBps"])
        time_us = float(r["notes"].split("time_us=")[1])
        lines.append(row(size, size // 4, "float", "sum", -1, time_us, algbw, busbw))
        busbws.append(busbw)
    lines += footer(sum(busbws) / len(busbws))
    write("a100_8gpu_all_reduce_perf.log", lines)
    return lines


def h200_single(collective, busbw, name):
    """8x H200, -b 16G -e 16G -g 8 -z 1 (blocking), float (the default -d), nccl 2.27.7: one size; the
    reduce-scatter log also
    runs with -c 0 (no data check: #wrong prints N/A). stas00/ml-engineering network/README.md
    @744d01e SHARP section."""
    size = 17179869184
    n = 8
    algbw = busbw / ((n - 1) / n)
    time_us = size / (algbw * 1e9) * 1e6
    program = "%s_perf" % collective
    check = collective != "reduce_scatter"
    lines = ["# nccl-tests version 2.17.4 nccl-headers=22707 nccl-library=22707",
             "# Collective test starting: %s" % program,
             "# nThread 1 nGpus 8 minBytes %d maxBytes %d step: 1048576(bytes) warmup iters: 1 iters: 20 agg iters: 1 "
             "validation: %d graph: 0" % (size, size, 1 if check else 0),
             "# Blocking Enabled: wait for completion and barrier after each collective ",
             "#", "# Using devices"]
    lines += devices(["h200-a07"], 8, "NVIDIA H200", 88211)
    lines += modern_header()
    redop = "none" if collective == "all_gather" else "sum"
    # The count column is the count each rank passes to NCCL (src/common.cu prints
    # args->nbytes / wordSize, nbytes = paramcount x wordSize): per rank for all_gather and
    # reduce_scatter (their GetCollByteCount's paramcount = base = count / nranks).
    body = row(size, size // 4 // n, "float", redop, -1, time_us, algbw, busbw,
               wrong="0" if check else "N/A")
    if not check:
        body = body.replace("     0", "   N/A")
    lines.append(body)
    lines += footer(busbw, program)
    write(name, lines)


def b200_four_nodes():
    """4 nodes x 8 B200, one GPU per process (mpirun -np 32 ... -g 1), all-reduce float 32 KiB - 16 GiB,
    old nccl-tests output (no version line, 'error' columns, no root) with NCCL_DEBUG=INFO lines mixed in.
    stas00/ml-engineering network/README.md @744d01e "Inter-node speed depends on intra-node speed"
    (busbw only; algbw = busbw * n / (2 (n - 1)), time = size / algbw)."""
    data = rows("B200", 4)
    n = 32
    lines = ["# nThread 1 nGpus 1 minBytes 32768 maxBytes 17179869184 step: 2(factor) warmup iters: 5 iters: 20 "
             "validation: 1 ", "#", "# Using devices"]
    lines += devices(["p6-%02d" % i for i in range(4)], 8, "NVIDIA B200", 5120)
    lines += [
        "#",
        "#                                                     out-of-place                       in-place          ",
        "#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error",
        "#        (B)    (elements)                       (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       ",
    ]
    busbws = []
    for i, r in enumerate(data):
        size = int(r["size_bytes"])
        busbw = float(r["busbw_GBps"])
        algbw = busbw * n / (2 * (n - 1))
        time_us = size / (algbw * 1e9) * 1e6
        body = "  %7s  %6s  %6s  %5s" % (float_str(time_us, 7), float_str(algbw, 6), float_str(busbw, 6), "0e+00")
        lines.append("%12d  %12d  %6s  %6s" % (size, size // 4, "float", "sum") + body + body)
        if i == 0:
            lines.append("p6-00:5120:5188 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM")
            lines.append("p6-00:5120:5188 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 1")
        busbws.append(busbw)
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : %g " % (sum(busbws) / len(busbws)), "#"]
    write("b200_4x8_all_reduce_perf_old_format.log", lines)


def main():
    a100 = a100_all_reduce()
    h200_single("all_gather", 361.4, "h200_8gpu_all_gather_perf_16g.log")
    h200_single("reduce_scatter", 362.9, "h200_8gpu_reduce_scatter_perf_16g_nocheck.log")
    b200_four_nodes()
    # A run cut short: the A100 log stopped in the middle of the 512 MiB row.
    cut = [l for l in a100 if not l.startswith("# Out of") and not l.startswith("# Avg")]
    last = next(i for i, l in enumerate(cut) if l.lstrip().startswith("536870912"))
    truncated = cut[:last] + [cut[last][:60]]
    with open(os.path.join(HERE, "truncated_all_reduce_perf.log"), "w") as f:
        f.write("\n".join(truncated))  # no final newline: the process was killed mid-line
    # Not an nccl-tests log at all: what a failed launch leaves in the output file.
    write("garbage.log", [
        "srun: error: gpu-node-17: task 3: Exited with exit code 1",
        "Traceback (most recent call last):",
        '  File "train.py", line 12, in <module>',
        "RuntimeError: CUDA error: out of memory",
        "\x00\x07\x1b[31mbinary junk\x1b[0m",
    ])


if __name__ == "__main__":
    main()
