#!/usr/bin/env python3
"""Run one kind of compute kernel back to back for a minute and report its rate over time.

fsdpsim slows GEMM and attention kernels by the GPU preset's `sustained_compute_fraction`
(fitted on published multi-GPU runs), in part for the SM clock a GPU holds under its power cap
over a long run, which a short benchmark does not see. This measures that part on one GPU, per
kind of kernel (--kernel): `gemm`, --size cubed bf16 products; `gemm_fp8`, the same in float8
as torchao's Float8Linear runs them (torch._scaled_mm of e4m3 operands with tensorwise scales,
bf16 out), whose rate and power draw at the limit the bf16 run does not tell; `flash` or
`cudnn`, causal F.scaled_dot_product_attention forward and backward of bf16 q, k, v of --shape on
that SDPA backend. It reports the achieved TFLOP/s per --window, with the SM clock, power draw, power
limit, temperature and whether the software power cap is holding the clock down, as nvidia-smi
reports them at the end of each window. Attention counts the causal half of the 4*b*h*s^2*d
forward FLOPs and 2.5 times that for backward (FlashAttention-2 paper, Sec. 4.1). With --duty D
below 1 each batch of 10 calls is followed by device-to-device copies that take about
(1 - D) / D of its time, as a training step mixes compute with memory-bound kernels; the
TFLOP/s are then those of the compute calls alone (CUDA events around each batch), to see how
much of the clock a lighter load keeps.

    python3 measure_sustained_compute.py --json sustained_gemm.json
    python3 measure_sustained_compute.py --kernel gemm_fp8 --json sustained_gemm_fp8.json
    python3 measure_sustained_compute.py --duty 0.6 --seconds 30 --json duty60.json
    python3 measure_sustained_compute.py --kernel flash --shape 4,32,8192,128 --json flash.json
"""
import argparse
import json
import os
import subprocess
import time

from torch_required import exit_without_torch

exit_without_torch(__doc__, "measure_sustained_compute.py",
                   "PyTorch with CUDA (and torch.nn.attention.sdpa_kernel for attention)")

import torch  # noqa: E402 (after the check above)
import torch.nn.functional as F  # noqa: E402

from measure_attention import BACKENDS, shape  # noqa: E402

SMI_FIELDS = {"clocks.sm": "sm_clock_mhz", "power.draw": "power_w", "power.limit": "power_limit_w",
              "temperature.gpu": "temperature_c"}
# The software power cap's clock-event flag; drivers before 535 spell it clocks_throttle_reasons.
POWER_CAP_FIELDS = ("clocks_event_reasons.sw_power_cap", "clocks_throttle_reasons.sw_power_cap")


def query(fields):
    """nvidia-smi's values of `fields` for GPU 0, or None where nvidia-smi fails."""
    try:
        return subprocess.run(
            ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits",
             "-i", "0"], capture_output=True, text=True, check=True,
            timeout=10).stdout.strip().split(", ")
    except (OSError, subprocess.SubprocessError):
        return None


def smi():
    """SM clock (MHz), power draw and limit (W), temperature (C) and the power-cap flag."""
    out = {}
    values = query(list(SMI_FIELDS))
    try:
        out.update({name: float(v) for name, v in zip(SMI_FIELDS.values(), values or [])})
    except ValueError:
        pass
    for field in POWER_CAP_FIELDS:
        flag = query([field])
        if flag:
            out["sw_power_cap"] = flag[0] == "Active"
            break
    return out


def compute_call(args):
    """(the call to repeat, its FLOPs, a description) for --kernel."""
    if args.kernel == "gemm":
        n = args.size
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
        return (lambda: torch.matmul(a, b, out=c)), 2.0 * n ** 3, {"size": n}
    if args.kernel == "gemm_fp8":
        n = args.size
        a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
        # cuBLASLt's float8 GEMM takes its second operand column-major.
        b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()
        scale = torch.ones((), device="cuda")

        def scaled_mm():
            return torch._scaled_mm(a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)
        return scaled_mm, 2.0 * n ** 3, {"size": n}
    from torch.nn.attention import sdpa_kernel  # noqa: E402 (torch 2.3 or later)
    batch, heads, seq, head_dim = args.shape
    q, k, v = (torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=torch.bfloat16,
                           requires_grad=True) for _ in range(3))
    grad = torch.randn_like(q)

    def forward_backward():
        with sdpa_kernel(BACKENDS[args.kernel]):
            F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(grad)

    flops = 3.5 * 4 * batch * heads * seq * seq * head_dim / 2
    return forward_backward, flops, {"shape": [batch, heads, seq, head_dim], "causal": True}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", required=True)
    parser.add_argument("--kernel", choices=["gemm", "gemm_fp8", "flash", "cudnn"], default="gemm")
    parser.add_argument("--size", type=int, default=8192, help="gemm: the products' size")
    parser.add_argument("--shape", type=shape, default=(4, 32, 8192, 128),
                        help="flash, cudnn: BATCH,HEADS,SEQ,HEAD_DIM")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--window", type=float, default=5.0)
    parser.add_argument("--duty", type=float, default=1.0,
                        help="share of the GPU's time in the compute calls (0 < D <= 1)")
    args = parser.parse_args()
    if not 0.0 < args.duty <= 1.0:
        parser.error(f"--duty: expected a number in (0, 1], found {args.duty}")
    call, flops, what = compute_call(args)
    source = torch.empty(256 * 2**20, device="cuda", dtype=torch.uint8)  # 256 MiB per copy
    target = torch.empty_like(source)
    for _ in range(3):
        call()
        target.copy_(source)
    torch.cuda.synchronize()
    copies = 0  # per batch of 10 calls, set from the first batch's time
    windows = []
    start = time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        count, compute_s, copy_s = 0, 0.0, 0.0
        window_start = time.perf_counter()
        while time.perf_counter() - window_start < args.window:
            marks = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
            marks[0].record()
            for _ in range(10):
                call()
            marks[1].record()
            for _ in range(copies):
                target.copy_(source)
            marks[2].record()
            marks[2].synchronize()  # keeps the host's clock and the GPU's work together
            count += 10
            compute_s += marks[0].elapsed_time(marks[1]) / 1e3
            copy_s += marks[1].elapsed_time(marks[2]) / 1e3
            if args.duty < 1.0 and copies == 0:
                # One copy of 256 MiB reads and writes 512 MiB: about 0.12 ms on an H200.
                one = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                one[0].record()
                target.copy_(source)
                one[1].record()
                one[1].synchronize()
                copy_one = one[0].elapsed_time(one[1]) / 1e3
                copies = max(1, round(compute_s * (1.0 - args.duty) / args.duty / copy_one))
        window = {"t_s": round(time.perf_counter() - start, 2), "calls": count,
                  "tflops": round(count * flops / compute_s / 1e12, 1),
                  "duty": round(compute_s / (compute_s + copy_s), 3)}
        window.update(smi())
        windows.append(window)
        print(json.dumps(window), flush=True)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "kernel": args.kernel, **what,
              "dtype": "fp8" if args.kernel == "gemm_fp8" else "bf16", "data": "random normal",
              "duty": args.duty, "copies_per_batch": copies, "windows": windows}
    with open(f"{args.json}.tmp", "w") as f:
        json.dump(result, f, indent=1)
    os.replace(f"{args.json}.tmp", args.json)


if __name__ == "__main__":
    main()
