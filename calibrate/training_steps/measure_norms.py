#!/usr/bin/env python3
"""Time PyTorch's LayerNorm and RMSNorm, fused and eager, forward and backward across widths.

fsdpsim prices a normalization as one memory-bound kernel per pass: bytes over the HBM
bandwidth (models/kernel_factory.cpp). PyTorch runs its native kernels
(aten/src/ATen/native/cuda/layer_norm_kernel.cu): a forward that reads x and writes y, and a
backward of two kernels, the input gradient (reads dy and x, writes dx) and the weight (and
bias) gradient, a column reduction over the rows that reads dy and x again. The reference
RMSNorm that HF's LlamaRMSNorm, torchtitan's and fms's modules run instead, op by op in fp32
(fsdpsim's training.rms_norm eager, models/eager_rms_norm.cpp), is timed as kind
eager_rms_norm. This times them for bf16 inputs of --rows rows at each width: each figure is
the median of --repeats CUDA-event timings after --warmup untimed calls; backward is the
forward+backward time minus the forward time; effective bandwidth counts the bytes fsdpsim
counts, in passes of the bf16 input: 2 forward and 5 backward for the fused kernels, 18 and 46
for the eager RMSNorm.

    python3 measure_norms.py --json norms.json
"""
import argparse
import json
import os

from torch_required import exit_without_torch

exit_without_torch(__doc__, "measure_norms.py", "PyTorch with torch.nn.RMSNorm (torch 2.4 or later)")

import torch  # noqa: E402 (after the check above)

from cuda_timing import timed  # noqa: E402

WIDTHS = (768, 1024, 1536, 2048, 2560, 3072, 4096, 5120, 7168, 8192)


class EagerRMSNorm(torch.nn.Module):
    """The reference RMSNorm: torchtitan's norms.RMSNorm, as HF's LlamaRMSNorm computes it."""

    def __init__(self, width, device, dtype):
        super().__init__()
        self.eps = 1e-6
        self.weight = torch.nn.Parameter(torch.ones(width, device=device, dtype=dtype))

    def forward(self, x):
        x32 = x.float()
        normalized = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return normalized.type_as(x) * self.weight


MODULES = {"layer_norm": torch.nn.LayerNorm, "rms_norm": torch.nn.RMSNorm,
           "eager_rms_norm": EagerRMSNorm}
# Bytes fsdpsim counts per element, in passes of the bf16 input (forward, backward).
PASSES = {"layer_norm": (2, 5), "rms_norm": (2, 5), "eager_rms_norm": (18, 46)}


def measure(kind, rows, width, warmup, repeats):
    norm = MODULES[kind](width, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(rows, width, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn_like(x)

    def forward():
        return norm(x)

    def forward_backward():
        norm(x).backward(grad)

    forward_s = timed(forward, warmup, repeats)
    backward_s = timed(forward_backward, warmup, repeats) - forward_s
    tensor = rows * width * 2
    forward_passes, backward_passes = PASSES[kind]
    return {"kind": kind, "rows": rows, "width": width, "forward_s": forward_s,
            "backward_s": backward_s, "forward_GBps": forward_passes * tensor / forward_s / 1e9,
            "backward_GBps": backward_passes * tensor / backward_s / 1e9}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", required=True)
    parser.add_argument("--rows", type=int, default=16384)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    results = []
    for kind in MODULES:
        for width in WIDTHS:
            r = measure(kind, args.rows, width, args.warmup, args.repeats)
            results.append(r)
            print(json.dumps(r), flush=True)
    with open(f"{args.json}.tmp", "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "dtype": "bf16", "results": results}, f, indent=1)
    os.replace(f"{args.json}.tmp", args.json)


if __name__ == "__main__":
    main()
