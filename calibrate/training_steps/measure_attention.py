#!/usr/bin/env python3
"""Time causal attention (F.scaled_dot_product_attention) forward and backward on this GPU.

fsdpsim prices attention from the flash kernels' published rates (hardware/kernel_time.cpp);
this measures what PyTorch's own kernels do here, per backend (the default dispatch, FLASH and
CUDNN forced), for bf16 q, k, v of shape (batch, heads, seq, head_dim) with 65,536 tokens per
call, or the shapes given with --shape (a training step's own, or a sweep of head dims). Each
figure is the median of --repeats CUDA-event timings after --warmup untimed calls;
backward is the forward+backward time minus the forward time. Achieved TFLOP/s count the causal
half of the 4*b*h*s^2*d forward FLOPs (FlashAttention-2 paper, Sec. 4.1) and 2.5 times that for
backward (five matmuls against two).

    python3 measure_attention.py --json attention.json
    python3 measure_attention.py --json mine.json --backend cudnn --shape 1,12,16384,128
"""
import argparse
import contextlib
import json
import os

from torch_required import exit_without_torch

exit_without_torch(__doc__, "measure_attention.py",
                   "PyTorch with torch.nn.attention.sdpa_kernel (torch 2.3 or later)")

import torch  # noqa: E402 (after the check above)
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

from cuda_timing import timed  # noqa: E402

SHAPES = [(32, 128, s) for s in (1024, 2048, 4096, 8192, 16384, 32768, 65536)] + [
    (16, 64, 2048), (16, 64, 8192)]
BACKENDS = {"default": None, "flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
TOKENS = 65536


def shape(text):
    """--shape BATCH,HEADS,SEQ,HEAD_DIM"""
    try:
        batch, heads, seq, head_dim = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected BATCH,HEADS,SEQ,HEAD_DIM, found {text!r}")
    if min(batch, heads, seq, head_dim) <= 0:
        raise argparse.ArgumentTypeError(f"expected positive sizes, found {text!r}")
    return batch, heads, seq, head_dim


def measure(batch, heads, head_dim, seq, backend, warmup, repeats):
    q, k, v = (torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=torch.bfloat16,
                           requires_grad=True) for _ in range(3))
    grad = torch.randn_like(q)

    def forward():
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def forward_backward():
        forward().backward(grad)

    with sdpa_kernel(backend) if backend is not None else contextlib.nullcontext():
        forward_s = timed(forward, warmup, repeats)
        total_s = timed(forward_backward, warmup, repeats)
    flops = 4 * batch * heads * seq * seq * head_dim / 2
    return {"batch": batch, "heads": heads, "head_dim": head_dim, "seq": seq,
            "forward_s": forward_s, "backward_s": total_s - forward_s,
            "forward_tflops": flops / forward_s / 1e12,
            "backward_tflops": 2.5 * flops / (total_s - forward_s) / 1e12}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", required=True)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--backend", action="append", choices=sorted(BACKENDS),
                        help="a backend to time (repeatable; default: all three)")
    parser.add_argument("--shape", action="append", type=shape,
                        help="BATCH,HEADS,SEQ,HEAD_DIM to time (repeatable; default: head dim "
                             "128 at 1,024-65,536 tokens and two head-dim-64 shapes, 65,536 "
                             "tokens per call)")
    args = parser.parse_args()
    shapes = args.shape or [(TOKENS // seq, heads, seq, head_dim) for heads, head_dim, seq in SHAPES]
    results = []
    for name in args.backend or list(BACKENDS):
        backend = BACKENDS[name]
        for batch, heads, seq, head_dim in shapes:
            try:
                r = measure(batch, heads, head_dim, seq, backend, args.warmup, args.repeats)
            except RuntimeError as e:  # a backend that refuses the shape
                r = {"batch": batch, "heads": heads, "head_dim": head_dim, "seq": seq,
                     "error": str(e).splitlines()[0]}
            r["backend"] = name
            results.append(r)
            print(json.dumps(r), flush=True)
            with open(f"{args.json}.tmp", "w") as f:  # after every shape: a run cut short keeps them
                json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                           "results": results}, f, indent=1)
            os.replace(f"{args.json}.tmp", args.json)


if __name__ == "__main__":
    main()
