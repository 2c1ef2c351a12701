#!/usr/bin/env python3
"""Time bf16 matrix products back to back for a minute and report their rate over time.

fsdpsim slows every GEMM and attention kernel of a training step by the GPU preset's
`sustained_compute_fraction` (0.83, fitted on published multi-GPU runs), in part for the SM
clock a GPU holds under its power cap over a long run, which a short benchmark does not see.
This measures that part on one GPU: --seconds of --size cubed products on random data, the
achieved TFLOP/s per --window, with the SM clock, power draw and temperature that nvidia-smi
reports at the end of each window.

    python3 measure_sustained_gemm.py --json sustained_gemm.json
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
    args = parser.parse_args()
    n = args.size
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    flops = 2.0 * n ** 3
    windows = []
    start = time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        count = 0
        begin.record()
        window_start = time.perf_counter()
        while time.perf_counter() - window_start < args.window:
            for _ in range(10):
                torch.matmul(a, b, out=c)
            count += 10
            torch.cuda.synchronize()  # keeps the host's clock and the GPU's work together
        end.record()
        end.synchronize()
        seconds = begin.elapsed_time(end) / 1e3
        window = {"t_s": round(time.perf_counter() - start, 2), "products": count,
                  "tflops": round(count * flops / seconds / 1e12, 1)}
        window.update(smi() or {})
        windows.append(window)
        print(json.dumps(window), flush=True)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "size": n,
              "dtype": "bf16", "data": "random normal", "windows": windows}
    with open(f"{args.json}.tmp", "w") as f:
        json.dump(result, f, indent=1)
    os.replace(f"{args.json}.tmp", args.json)


if __name__ == "__main__":
    main()
