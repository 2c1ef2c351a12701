#!/usr/bin/env python3
"""Derives the `custom` model presets for the FSDP paper's non-language models (Zhao et al.,
VLDB 2023, Sec. 5: RegNet 9B, DeepViT 8B, DHEN 550M dense parameters). The paper gives only
parameter counts and batch sizes; the shapes below are assumptions stated in each preset's
`source`, the formulas are the published architectures'. Run it from anywhere; it rewrites
regnet-9b.json, deepvit-8b.json and dhen-dense-550m.json next to itself.

Conventions (configs/models/README.md, "custom"): per sample; FLOPs count 2 per multiply-add of
GEMM-class ops (convolutions, matmuls); bytes in bf16 (2 per element); saved activations are
what autograd keeps (conv/linear inputs, BatchNorm/LayerNorm inputs, ReLU outputs, softmax
outputs), a tensor two ops keep counted once, by the layer that made it; memory bytes are the reads + writes of the memory-bound ops (norms, activations,
residual adds, pooling, softmax).
"""
import json
import math
import pathlib

E = 2  # bf16 bytes
HERE = pathlib.Path(__file__).resolve().parent


def write(name, source, layers):
    doc = {"schema_version": 1, "name": name, "family": "custom", "source": source,
           "layers": layers}
    (HERE / f"{name}.json").write_text(json.dumps(doc, indent=2) + "\n")
    params = sum(l["params"] * l.get("count", 1) for l in layers)
    print(f"{name}: {params:,} parameters")


def regnet_widths(w0, wa, wm, depth, group):
    """Radosavovic et al. 2020, "Designing Network Design Spaces", Sec. 3.3: u_j = w0 + wa*j,
    quantized to w0 * wm^round(log(u_j / w0) / log(wm)), multiples of 8, then of the group
    width (pycls/models/regnet.py generate_regnet, adjust_block_compatibility)."""
    stages = []
    for j in range(depth):
        u = w0 + wa * j
        w = int(round(w0 * wm ** round(math.log(u / w0) / math.log(wm)) / 8) * 8)
        if stages and stages[-1][0] == w:
            stages[-1][1] += 1
        else:
            stages.append([w, 1])
    return [(int(round(w / min(group, w)) * min(group, w)), d, min(group, w)) for w, d in stages]


def regnet_block(w_in, w, g, hw_in, hw_out, first):
    """RegNetY block (pycls ResBottleneckBlock, bottleneck 1, SE ratio 0.25 of w_in): 1x1 conv,
    BN, ReLU; 3x3 group conv (stride in the first block of a stage), BN, ReLU; SE; 1x1 conv, BN;
    projection shortcut (1x1 conv + BN) in the first block; add, ReLU."""
    se = int(round(0.25 * w_in))
    params = (w_in * w + 2 * w) + (9 * w * g + 2 * w) + (w * se + se + se * w + w) + (w * w + 2 * w)
    macs = hw_in * w_in * w + hw_out * 9 * w * g + (w * se + se * w) + hw_out * w * w
    # The block's input, which conv_a (and the projection) keep, is the tensor the previous
    # layer's final ReLU saved: counted there, by its producer, whose backward frees it last.
    saved = 2 * w * hw_in + 4 * w * hw_out + w * hw_out
    memory = 4 * w * hw_in + 4 * w * hw_out + 4 * w * hw_out + (w * hw_out + 3 * w * hw_out) \
        + 3 * w * hw_out + 2 * w * hw_out
    tensors, kernels = 13, 16
    if first:
        params += w_in * w + 2 * w
        macs += hw_out * w_in * w
        saved += w * hw_out
        memory += 4 * w * hw_out
        tensors, kernels = 16, 18
    return {"params": params, "parameter_tensors": tensors, "forward_flops_per_sample": 2 * macs,
            "saved_activation_bytes_per_sample": E * saved, "output_bytes_per_sample": E * w * hw_out,
            "memory_bytes_per_sample": E * memory, "transient_bytes_per_sample": E * w * hw_in,
            "kernels": kernels}


def regnet_9b():
    w0, wa, wm, depth, group = 1744, 620.83, 2.52, 27, 1010
    stem_w, res = 32, 112
    layers = [{"name": "stem", "params": 27 * stem_w + 2 * stem_w, "parameter_tensors": 3,
               "forward_flops_per_sample": 2 * res * res * 27 * stem_w,
               "saved_activation_bytes_per_sample": E * (3 * 224 * 224 + 2 * stem_w * res * res),
               "output_bytes_per_sample": E * stem_w * res * res,
               "memory_bytes_per_sample": E * 4 * stem_w * res * res, "kernels": 3,
               "fsdp_unit": False}]
    w_in = stem_w
    for i, (w, d, g) in enumerate(regnet_widths(w0, wa, wm, depth, group), start=1):
        hw_in, hw_out = res * res, (res // 2) ** 2
        layers.append({"name": f"stage{i}.block0", **regnet_block(w_in, w, g, hw_in, hw_out, True)})
        if d > 1:
            layers.append({"name": f"stage{i}.blocks", "count": d - 1,
                           **regnet_block(w, w, g, hw_out, hw_out, False)})
        w_in, res = w, res // 2
    layers.append({"name": "head", "params": w_in * 1000 + 1000, "parameter_tensors": 2,
                   "forward_flops_per_sample": 2 * w_in * 1000,
                   # The pooling's input is the last block's ReLU output, counted there.
                   "saved_activation_bytes_per_sample": E * w_in,
                   "output_bytes_per_sample": E * 1000,
                   "memory_bytes_per_sample": E * (w_in * res * res + w_in), "kernels": 3,
                   "fsdp_unit": False})
    write("regnet-9b", "FSDP paper (Zhao et al. 2023) Sec. 5: RegNet 9B, batch 48 and 72 per GPU. "
          "Assumed shape: RegNetY (Radosavovic et al. 2020, Sec. 3.3 width rule; SE ratio 0.25, "
          "bottleneck 1) with w0=1744, wa=620.83, wm=2.52, depth 27 as SEER's RegNetY-10B "
          "(Goyal et al. 2021), group width 1010 chosen to land near 9B: stage widths "
          "2020/4040/11110/28280, depths 2/7/17/1, 224x224 input, 1000 classes; stem and head "
          "left to the root FSDP unit, one unit per block. Derived by "
          "configs/models/derive_custom_presets.py", layers)


def deepvit_8b():
    """DeepViT (Zhou et al. 2021, "DeepViT: Towards Deeper Vision Transformer"): ViT blocks whose
    attention maps are mixed across heads by a learnable heads x heads matrix, then normalized
    (Re-attention, Sec. 4.2), as in lucidrains/vit-pytorch deepvit.py: PreNorm attention with
    bias-free qkv, re-attention weights + LayerNorm over heads, output projection with bias;
    PreNorm GELU MLP with biases."""
    d, heads, head_dim, mlp, depth, patch, img, classes = 4096, 32, 128, 16384, 40, 14, 224, 1000
    inner = heads * head_dim
    n = (img // patch) ** 2 + 1  # patches + class token
    patch_dim = 3 * patch * patch
    block_params = (2 * d + 3 * d * inner + heads * heads + 2 * heads + inner * d + d
                    + 2 * d + d * mlp + mlp + mlp * d + d)
    block_macs = n * (3 * d * inner + inner * d + 2 * d * mlp) + 2 * n * n * inner + n * n * heads * heads
    # Attention maps (heads x n x n, bf16): the softmax output, einsum's permuted copy of it that
    # its bmm keeps for the re-attention weights' gradient, the LayerNorm's input, and the copy
    # the P@V bmm keeps of the LayerNorm output; plus that LayerNorm's fp32 mean and rstd over
    # its n x n rows.
    saved = 8 * n * d + 8 * n * inner + 4 * n * mlp + 8 * heads * n * n + 8 * n * n
    memory = 36 * n * d + 12 * heads * n * n
    layers = [
        {"name": "patch_embedding", "params": patch_dim * d + d + n * d + d, "parameter_tensors": 4,
         "forward_flops_per_sample": 2 * (n - 1) * patch_dim * d,
         "saved_activation_bytes_per_sample": E * (n - 1) * patch_dim,
         "output_bytes_per_sample": E * n * d, "memory_bytes_per_sample": E * 4 * n * d,
         "kernels": 4, "fsdp_unit": False},
        {"name": "blocks", "count": depth, "params": block_params, "parameter_tensors": 13,
         "forward_flops_per_sample": 2 * block_macs,
         "saved_activation_bytes_per_sample": saved,
         "output_bytes_per_sample": E * n * d, "memory_bytes_per_sample": memory,
         "transient_bytes_per_sample": E * 2 * heads * n * n, "kernels": 20},
        {"name": "head", "params": 2 * d + d * classes + classes, "parameter_tensors": 4,
         "forward_flops_per_sample": 2 * d * classes,
         "saved_activation_bytes_per_sample": E * 2 * d, "output_bytes_per_sample": E * classes,
         "memory_bytes_per_sample": E * 4 * d, "kernels": 3, "fsdp_unit": False},
    ]
    write("deepvit-8b", "FSDP paper (Zhao et al. 2023) Sec. 5: DeepViT 8B, batch 105 and 120 per "
          "GPU. Assumed shape: DeepViT re-attention blocks (Zhou et al. 2021, Sec. 4.2; "
          "lucidrains/vit-pytorch deepvit.py layout) with dim 4096, 32 heads of 128, MLP 16384, "
          "depth 40, patch 14 at 224x224 (257 tokens), 1000 classes, no dropout; per block "
          "~201M parameters, 2*params*tokens + attention + re-attention FLOPs; saved activations "
          "after Korthikanti et al. 2022 Sec. 4.1 plus the re-attention map and its norm. "
          "Derived by configs/models/derive_custom_presets.py", layers)


def dhen_dense_550m():
    """DHEN (Zhang et al. 2022, "DHEN: A Deep and Hierarchical Ensemble Network for Large-Scale
    Click-Through Rate Prediction"): stacked layers, each an ensemble of interaction modules
    (self-attention, DCN, MLP, convolution) over the feature embeddings, with a residual. The
    sparse embedding tables are sharded by TorchRec, not FSDP: only the dense part is modelled."""
    features, width, layers_n, hidden = 128, 256, 8, 2048
    flat = features * width  # 32768 inputs per sample
    per_layer = 550_000_000 // layers_n
    layers = [
        {"name": "feature_interface", "params": 0, "forward_flops_per_sample": 0,
         "saved_activation_bytes_per_sample": 0, "output_bytes_per_sample": E * flat,
         "memory_bytes_per_sample": E * 2 * flat, "kernels": 2, "fsdp_unit": False},
        {"name": "dhen_layers", "count": layers_n, "params": per_layer, "parameter_tensors": 24,
         "forward_flops_per_sample": 2 * per_layer,
         "saved_activation_bytes_per_sample": E * (4 * flat + 4 * hidden),
         "output_bytes_per_sample": E * flat, "memory_bytes_per_sample": E * 12 * flat,
         "transient_bytes_per_sample": E * 2 * flat, "kernels": 40},
        {"name": "over_arch", "params": flat * 1 + 1, "parameter_tensors": 2,
         "forward_flops_per_sample": 2 * flat, "saved_activation_bytes_per_sample": E * flat,
         "output_bytes_per_sample": E, "memory_bytes_per_sample": E * 2 * flat, "kernels": 4,
         "fsdp_unit": False},
    ]
    write("dhen-dense-550m", "FSDP paper (Zhao et al. 2023) Sec. 5: DHEN with 550M dense "
          "parameters (the sparse tables are TorchRec's, not FSDP's). Assumed shape: 8 stacked "
          "DHEN layers (Zhang et al. 2022) of 68.75M parameters each over 128 feature embeddings "
          "of width 256 (32768 inputs per sample), every weight used once per sample (forward "
          "FLOPs = 2 x params: MLP/DCN-like modules on the flattened features), saved activations "
          "of 4 copies of the layer input plus the hidden width 2048; a logit over-arch. "
          "Derived by configs/models/derive_custom_presets.py", layers)


if __name__ == "__main__":
    regnet_9b()
    deepvit_8b()
    dhen_dense_550m()
