#!/usr/bin/env python3
"""Time bf16 matrix products back to back for a minute and report their rate over time.

fsdpsim slows every GEMM and attention kernel of a training step by the GPU preset's
`sustained_compute_fraction` (0.83, fitted on published multi-GPU runs), in part for the SM
clock a GPU holds under its power cap over a long run, which a short benchmark does not see.
This measures that part on one GPU: --seconds of --size cubed products on random data, the
achieved TFLOP/s per --window, with the SM clock, power draw and temperature that nvidia-smi
reports at the end of each window. With --duty D below 1 each batch of 10 products is followed
by device-to-device copies that take about (1 - D) / D of its time, as a training step mixes
GEMMs with memory-bound kernels; the TFLOP/s are then those of the products alone (CUDA events
around each batch), to see how much of the clock a lighter load keeps.

    python3 measure_sustained_gemm.py --json sustained_gemm.json
    python3 measure_sustained_gemm.py --duty 0.6 --seconds 30 --json duty60.json
"""
import argparse
import json
import os
import subprocess
import time

from torch_required import exit_without_torch

exit_without_torch(__doc__, "measure_sustained_gemm.py", "PyTorch with CUDA")

import torch  # noqa: E402 (after the check above)


def smi():
    """SM clock (MHz), power (W) and temperature (C) of GPU 0, or None where nvidia-smi fails."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu",
             "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True, text=True, check=True, timeout=10).stdout.split(",")
        return {"sm_clock_mhz": float(out[0]), "power_w": float(out[1]),
                "temperature_c": float(out[2])}
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", required=True)
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--window", type=float, default=5.0)
    parser.add_argument("--duty", type=float, default=1.0,
                        help="share of the GPU's time in the products (0 < D <= 1)")
    args = parser.parse_args()
    if not 0.0 < args.duty <= 1.0:
        parser.error(f"--duty: expected a number in (0, 1], found {args.duty}")
    n = args.size
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    source = torch.empty(256 * 2**20, device="cuda", dtype=torch.uint8)  # 256 MiB per copy
    target = torch.empty_like(source)
    for _ in range(3):
        torch.matmul(a, b, out=c)
        target.copy_(source)
    torch.cuda.synchronize()
    flops = 2.0 * n ** 3
    copies = 0  # per batch of 10 products, set from the first batch's time
    windows = []
    start = time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        count, gemm_s, copy_s = 0, 0.0, 0.0
        window_start = time.perf_counter()
        while time.perf_counter() - window_start < args.window:
            marks = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
            marks[0].record()
            for _ in range(10):
                torch.matmul(a, b, out=c)
            marks[1].record()
            for _ in range(copies):
                target.copy_(source)
            marks[2].record()
            marks[2].synchronize()  # keeps the host's clock and the GPU's work together
            count += 10
            gemm_s += marks[0].elapsed_time(marks[1]) / 1e3
            copy_s += marks[1].elapsed_time(marks[2]) / 1e3
            if args.duty < 1.0 and copies == 0:
                # One copy of 256 MiB reads and writes 512 MiB: about 0.12 ms on an H200.
                one = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                one[0].record()
                target.copy_(source)
                one[1].record()
                one[1].synchronize()
                copy_one = one[0].elapsed_time(one[1]) / 1e3
                copies = max(1, round(gemm_s * (1.0 - args.duty) / args.duty / copy_one))
        window = {"t_s": round(time.perf_counter() - start, 2), "products": count,
                  "tflops": round(count * flops / gemm_s / 1e12, 1),
                  "duty": round(gemm_s / (gemm_s + copy_s), 3)}
        window.update(smi() or {})
        windows.append(window)
        print(json.dumps(window), flush=True)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "size": n,
              "dtype": "bf16", "data": "random normal", "duty": args.duty,
              "copies_per_batch": copies, "windows": windows}
    with open(f"{args.json}.tmp", "w") as f:
        json.dump(result, f, indent=1)
    os.replace(f"{args.json}.tmp", args.json)


if __name__ == "__main__":
    main()
