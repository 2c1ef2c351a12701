#!/usr/bin/env python3
"""Measure FSDP2 training steps on this machine's GPUs and write them as validation rows.

The calibration harness (fsdpsim-calibrate) measures the parts a step is made of: GEMMs, NCCL
collectives, copies. This script measures whole steps, so that `fsdpsim validate` can compare its
prediction with what the cluster really does (README "Calibrating a new cluster", step 5). It
trains decoder models written here the way torchtitan writes them (eager PyTorch, nn.Linear,
F.scaled_dot_product_attention, fp32 cross-entropy), wrapped per block with FSDP2 `fully_shard`
(bf16 parameters, fp32 gradient reduction, torch.distributed.fsdp.MixedPrecisionPolicy), with
AdamW (PyTorch's default foreach implementation), optional full activation checkpointing per
block (checkpoint_wrapper, as torchtitan's `ac.mode = "full"`) and optional torch.compile of each
block (a run's "compiled": true; torchtitan's apply_compile: after checkpointing, before
fully_shard). A run's "memory_fraction" caps the caching allocator for that run with
torch.cuda.set_per_process_memory_fraction, to measure steps that fit only after cudaMalloc
retries (h200_runs_retries.json). A run's "trace_allocations" records one more step's allocation
history, its "profile_kernels" one more step's GPU kernels (torch.profiler) and when that step
left the GPU idle, waiting for which CPU work (gpu_idle.py), both in --json.

Each run of --runs is trained for --warmup untimed steps, then --steps timed steps. A step is
timed with CUDA events around forward, backward and the optimizer step; the median of the steps
and of each phase is kept. Peak memory is torch.cuda.max_memory_allocated / max_memory_reserved over the timed steps.
A run out of memory is recorded and the next one runs, on one GPU; with several ranks it ends the
job after writing the runs before it (its peers may be left in the failed step's collectives).

Output: rows in fsdpsim's validation CSV format (configs/validation/README.md; peak memory is
max_memory_allocated, measured_peak_reserved_gib max_memory_reserved) on --csv, and
every measured figure (step times, reserved memory, versions) on --json. One process per GPU:
    python3 measure_fsdp_steps.py --runs runs.json --csv out.csv --json out.json        # 1 GPU
    torchrun --nproc-per-node 8 measure_fsdp_steps.py --runs runs.json --csv out.csv    # a node
"""
import argparse
import contextlib
import csv
import datetime
import gc
import json
import math
import os
import re
import statistics
import sys
import tempfile

from gpu_idle import idle_report
from torch_required import exit_without_torch

exit_without_torch(__doc__, "measure_fsdp_steps.py",
                   "PyTorch with FSDP2 (torch.distributed.fsdp.fully_shard, torch 2.6 or later)")

import torch  # noqa: E402 (after the check above)
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper  # noqa: E402
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard  # noqa: E402
from torch.profiler import ProfilerActivity, profile, record_function  # noqa: E402

CSV_COLUMNS = (
    "case_id,source,source_detail,model_family,model,n_layers,d_model,n_heads,n_kv_heads,ffn_dim,"
    "vocab,seq_len,params_b,gpu,gpus,gpus_per_node,inter_node_gbps_per_node,inter_node_assumed,"
    "fsdp_version,sharding,shard_group_size,act_ckpt,param_dtype,reduce_dtype,matmul_dtype,"
    "attention,loss,compiled,cpu_offload,optimizer,micro_batch,global_batch,grad_accum,"
    "measured_tokens_per_s_per_gpu,measured_model_tflops_per_gpu,measured_hardware_tflops_per_gpu,"
    "measured_mfu,measured_hfu,measured_peak_mem_gib,mfu_definition,notes,no_sync,"
    "param_storage_dtype,memory_fraction,measured_peak_reserved_gib").split(",")


# --- models (torchtitan's Llama 3; an MPT-like GPT with learned positions and tied embeddings) ---

def rope_table(head_dim, seq, theta=500000.0):
    """Complex rotations, as torchtitan's precompute_freqs_cis (Llama 3 rope_theta 500000)."""
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2).float() / head_dim))
    angles = torch.outer(torch.arange(seq).float(), freqs)
    return torch.polar(torch.ones_like(angles), angles)


def apply_rope(x, table):
    rotated = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    rotated = rotated * table.view(1, x.shape[1], 1, rotated.shape[-1])
    return torch.view_as_real(rotated).flatten(3).type_as(x)


class LlamaBlock(nn.Module):
    def __init__(self, d, heads, kv_heads, ffn):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, d // heads
        self.attention_norm = nn.RMSNorm(d, eps=1e-5)
        self.wq = nn.Linear(d, d, bias=False)
        self.wk = nn.Linear(d, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(d, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(d, d, bias=False)
        self.ffn_norm = nn.RMSNorm(d, eps=1e-5)
        self.w1 = nn.Linear(d, ffn, bias=False)
        self.w3 = nn.Linear(d, ffn, bias=False)
        self.w2 = nn.Linear(ffn, d, bias=False)

    def forward(self, x, table):
        b, s, d = x.shape
        n = self.attention_norm(x)
        q = apply_rope(self.wq(n).view(b, s, self.heads, self.head_dim), table)
        k = apply_rope(self.wk(n).view(b, s, self.kv_heads, self.head_dim), table)
        v = self.wv(n).view(b, s, self.kv_heads, self.head_dim)
        repeat = self.heads // self.kv_heads  # torchtitan's repeat_kv
        k = k.repeat_interleave(repeat, dim=2) if repeat > 1 else k
        v = v.repeat_interleave(repeat, dim=2) if repeat > 1 else v
        a = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        h = x + self.wo(a.transpose(1, 2).reshape(b, s, d))
        n = self.ffn_norm(h)
        return h + self.w2(F.silu(self.w1(n)) * self.w3(n))


class Llama(nn.Module):
    def __init__(self, run):
        super().__init__()
        d = run["d_model"]
        self.tok_embeddings = nn.Embedding(run["vocab"], d)
        self.layers = nn.ModuleList(
            LlamaBlock(d, run["n_heads"], run["n_kv_heads"], run["ffn_dim"])
            for _ in range(run["n_layers"]))
        self.norm = nn.RMSNorm(d, eps=1e-5)
        self.output = nn.Linear(d, run["vocab"], bias=False)
        self.register_buffer("table", rope_table(d // run["n_heads"], run["seq_len"]),
                             persistent=False)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h, self.table)
        return self.output(self.norm(h))


class MptBlock(nn.Module):
    def __init__(self, d, heads, ffn):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.up = nn.Linear(d, ffn)
        self.down = nn.Linear(ffn, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).view(b, s, 3, self.heads, d // self.heads).unbind(2)
        a = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        h = x + self.c_proj(a.transpose(1, 2).reshape(b, s, d))
        return h + self.down(F.gelu(self.up(self.ln_2(h)), approximate="tanh"))


class Mpt(nn.Module):
    def __init__(self, run):
        super().__init__()
        d = run["d_model"]
        self.wte = nn.Embedding(run["vocab"], d)
        self.wpe = nn.Embedding(run["seq_len"], d)
        self.layers = nn.ModuleList(
            MptBlock(d, run["n_heads"], run["ffn_dim"]) for _ in range(run["n_layers"]))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        h = self.wte(tokens) + self.wpe(positions)
        for layer in self.layers:
            h = layer(h)
        return F.linear(self.ln_f(h), self.wte.weight)  # tied LM head


FAMILIES = {"llama": Llama, "mpt": Mpt}
RUN_KEYS = ("name", "model_family", "n_layers", "d_model", "n_heads", "n_kv_heads", "ffn_dim",
            "vocab", "seq_len", "micro_batch", "act_ckpt")


# --- one run ---

def build(run, device):
    with torch.device(device):
        model = FAMILIES[run["model_family"]](run)
    params = sum(p.numel() for p in model.parameters())
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for i, block in enumerate(model.layers):
        if run["act_ckpt"] == "full":
            block = checkpoint_wrapper(block, preserve_rng_state=False)
        if run.get("compiled", False):
            block = torch.compile(block, fullgraph=True)
        model.layers[i] = block
        fully_shard(block, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    return model, params


def measure(run, args, device, rank):
    # The cap of this run only: measure() of the next run sets it again (1.0 = the whole device).
    torch.cuda.set_per_process_memory_fraction(run.get("memory_fraction", 1.0), device)
    torch.manual_seed(1234 + rank)
    model, params = build(run, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    shape = (run["micro_batch"], run["seq_len"])
    tokens = torch.randint(0, run["vocab"], shape, device=device)
    labels = torch.randint(0, run["vocab"], shape, device=device)

    def step(marks, phase=lambda name: contextlib.nullcontext()):
        marks[0].record()
        with phase("forward"):
            logits = model(tokens)
            loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(0, 1))
            del logits
        marks[1].record()
        with phase("backward"):
            loss.backward()
        marks[2].record()
        with phase("optimizer"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        marks[3].record()
        return loss

    def events():
        return [torch.cuda.Event(enable_timing=True) for _ in range(4)]

    for _ in range(args.warmup):
        step(events())
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.reset_accumulated_memory_stats()  # num_alloc_retries: the timed steps' only
    times, phases, retries = [], [], []
    for _ in range(args.steps):
        marks = events()
        loss = step(marks)
        marks[3].synchronize()
        times.append(marks[0].elapsed_time(marks[3]) / 1e3)
        phases.append([marks[i].elapsed_time(marks[i + 1]) / 1e3 for i in range(3)])
        retries.append(torch.cuda.memory_stats().get("num_alloc_retries", 0) - sum(retries))
    stats = torch.cuda.memory_stats()
    if not math.isfinite(loss.item()):
        raise RuntimeError(f"{run['name']}: loss is {loss.item()}")
    result = {
        "params": params,
        "step_s": times,
        "median_step_s": statistics.median(times),
        # Forward (with the loss), backward, optimizer step (with zero_grad): the medians of each
        # phase, timed by events on the compute stream (a phase ends when its last kernel does).
        "median_phase_s": {name: statistics.median(p[i] for p in phases)
                           for i, name in enumerate(("forward", "backward", "optimizer"))},
        "max_allocated_gib": torch.cuda.max_memory_allocated() / 2**30,
        "max_reserved_gib": torch.cuda.max_memory_reserved() / 2**30,
        "num_alloc_retries": stats.get("num_alloc_retries", 0),  # over the timed steps
        "alloc_retries_per_step": retries,
        # The caching allocator's cudaMalloc and cudaFree calls over the timed steps.
        "num_device_alloc": stats.get("num_device_alloc", 0),
        "num_device_free": stats.get("num_device_free", 0),
        "loss": loss.item(),
    }
    if run.get("trace_allocations", False):
        result["allocation_trace"] = trace_one_step(lambda: step(events()), device)
    if run.get("profile_kernels", False):
        # The phases annotated (record_function) for gpu_idle.idle_report, in this step only.
        result["kernel_profile"] = profile_one_step(
            lambda: step(events(), lambda name: record_function(f"fsdpsim.{name}")))
    del model, optimizer, tokens, labels, loss
    gc.collect()
    torch.cuda.empty_cache()
    return result


def trace_one_step(step, device):
    """The caching allocator's events over one more (untimed) step, from its memory history
    (torch.cuda.memory._record_memory_history, python stacks): each event as [action, bytes,
    stream, frame, address], where frame indexes "frames": the stack's frames in this file (the
    model lines that asked for the memory; none for the autograd engine's thread, which runs
    backward without a Python stack) and its first frame, joined by " | ". It is the order in
    which PyTorch allocates and frees a step's tensors, to check fsdpsim's allocation points
    against; the block addresses pair each free with its allocation and show the cache's
    layout (which segment a block was cut from)."""
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(max_entries=1_000_000, stacks="python")
    step()
    torch.cuda.synchronize()
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    frames, frame_ids, events = [], {}, []
    here = os.path.basename(__file__)
    for event in snapshot["device_traces"][torch.device(device).index or 0]:
        stack = event.get("frames") or []
        shown = [f for f in stack if os.path.basename(f["filename"]) == here] + stack[:1]
        key = " | ".join(f"{os.path.basename(f['filename'])}:{f['line']}:{f['name']}"
                         for f in shown)
        if key not in frame_ids:
            frame_ids[key] = len(frames)
            frames.append(key)
        events.append([event["action"], event["size"], event.get("stream", 0), frame_ids[key],
                       event.get("addr", 0)])
    return {"frames": frames, "events": events}


def profile_one_step(step):
    """The GPU kernels of one more (untimed) step, from torch.profiler: per kernel name, the
    number of launches and their total time in microseconds, heaviest first; and the step's
    kernel time in all. It splits a step's time among GEMMs, attention and the rest, to check
    fsdpsim's price of each against. Under "idle", when the GPU ran nothing and which CPU work
    it waited for (gpu_idle.py)."""
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as scratch:  # the Chrome trace: a stable format
        trace = os.path.join(scratch, "trace.json")
        prof.export_chrome_trace(trace)
        with open(trace) as f:
            events = json.load(f)["traceEvents"]
    kernels = {}
    for event in events:
        if event.get("cat") == "kernel" and "dur" in event:
            count, total = kernels.get(event["name"], (0, 0.0))
            kernels[event["name"]] = (count + 1, total + float(event["dur"]))
    ranked = sorted(kernels.items(), key=lambda kv: -kv[1][1])
    return {"kernel_us": sum(total for _, (_, total) in ranked),
            "kernels": [[name, count, round(total, 1)] for name, (count, total) in ranked],
            "idle": idle_report(events)}


def sdpa_default_backend(device):
    """What F.scaled_dot_product_attention dispatches to here, for the rows' attention column:
    cuDNN on sm90/sm100 with cuDNN 9.15 or newer (PyTorch's check_prefer_cudnn_attention in
    aten/src/ATen/native/transformers/cuda/sdp_utils.cpp, torch 2.10+), else FlashAttention-2."""
    major = torch.cuda.get_device_capability(device)[0]
    cudnn = torch.backends.cudnn.version() or 0
    prefers_cudnn = torch.backends.cuda.cudnn_sdp_enabled() and major in (9, 10) and cudnn >= 91500
    return "cudnn" if prefers_cudnn else "flash2"


def csv_row(run, result, world, local_world, gpu, software, attention, inter_node_gbps):
    tokens_per_s = run["micro_batch"] * run["seq_len"] / result["median_step_s"]
    ac = {"none": "0", "full": "1"}[run["act_ckpt"]] + ("-tc" if run.get("compiled") else "")
    if "memory_fraction" in run:
        ac += f"-mf{round(run['memory_fraction'] * 1000):03d}"
    row = dict.fromkeys(CSV_COLUMNS, "")
    row.update({
        "case_id": f"own-{gpu}-{run['name']}-s{run['seq_len']}-g{world}-mb{run['micro_batch']}-ac{ac}-1",
        "source": "fsdpsim-measured",
        "source_detail": f"calibrate/training_steps/measure_fsdp_steps.py {software}",
        "model_family": run["model_family"], "model": run["name"],
        "n_layers": run["n_layers"], "d_model": run["d_model"], "n_heads": run["n_heads"],
        "n_kv_heads": run["n_kv_heads"], "ffn_dim": run["ffn_dim"], "vocab": run["vocab"],
        "seq_len": run["seq_len"], "params_b": f"{result['params'] / 1e9:.6f}",
        "gpu": gpu, "gpus": world, "gpus_per_node": local_world,
        # One node needs no network; across nodes the bandwidth is the user's to state
        # (--inter-node-gbps-per-node), and a row without it says it was not stated.
        "inter_node_gbps_per_node": inter_node_gbps if world > local_world else "",
        "inter_node_assumed": str(world > local_world and not inter_node_gbps).lower(),
        "fsdp_version": 2, "sharding": "FULL_SHARD",
        "shard_group_size": world, "act_ckpt": run["act_ckpt"], "param_dtype": "bf16",
        "reduce_dtype": "fp32", "matmul_dtype": "bf16", "attention": attention,
        "loss": "cross_entropy", "compiled": str(run.get("compiled", False)).lower(),
        "cpu_offload": "false",
        "optimizer": "adamw", "micro_batch": run["micro_batch"],
        "global_batch": run["micro_batch"] * world, "grad_accum": 1,
        "measured_tokens_per_s_per_gpu": f"{tokens_per_s:.1f}",
        "measured_peak_mem_gib": f"{result['max_allocated_gib']:.2f}",
        "memory_fraction": run.get("memory_fraction", ""),
        "measured_peak_reserved_gib": f"{result['max_reserved_gib']:.2f}",
        "notes": (f"median of {len(result['step_s'])} steps {result['median_step_s']:.4f} s; "
                  f"peak mem = max_memory_allocated; max_memory_reserved "
                  f"{result['max_reserved_gib']:.2f} GiB; alloc retries "
                  f"{result['num_alloc_retries']} in {len(result['step_s'])} steps; eager, SDPA, "
                  f"fp32 cross-entropy, "
                  f"foreach AdamW"),
    })
    return row


def write_atomically(path, write):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", newline="") as f:
        write(f)
    os.replace(tmp, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", required=True, help="JSON list of runs (see h200_runs.json)")
    parser.add_argument("--csv", required=True, help="validation rows to write")
    parser.add_argument("--json", help="every measured figure, to write")
    parser.add_argument("--gpu", required=True,
                        help="fsdpsim hardware preset of this machine's GPUs, the rows' gpu column "
                             "(e.g. h200-sxm-141gb); checked against the device name")
    parser.add_argument("--attention", choices=("cudnn", "flash2"),
                        help="the rows' attention column (default: what SDPA dispatches to here)")
    parser.add_argument("--inter-node-gbps-per-node", default="",
                        help="the network bandwidth of one node in Gbit/s, all its NICs together "
                             "(e.g. 3200 for 8 x 400G), for the rows of a run over several nodes; "
                             "without it they are marked inter_node_assumed and simulated at the "
                             "preset's")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    if args.inter_node_gbps_per_node:
        try:
            gbps = float(args.inter_node_gbps_per_node)
            ok = math.isfinite(gbps) and gbps > 0.0
        except ValueError:
            ok = False
        if not ok:
            sys.exit(f"--inter-node-gbps-per-node: expected a positive number of Gbit/s, found "
                     f"{args.inter_node_gbps_per_node!r}")

    with open(args.runs) as f:
        runs = json.load(f)
    for i, run in enumerate(runs):
        missing = [k for k in RUN_KEYS if k not in run]
        if missing or run["model_family"] not in FAMILIES or run["act_ckpt"] not in ("none", "full"):
            sys.exit(f"{args.runs}: runs[{i}]: expected keys {', '.join(RUN_KEYS)} with "
                     f"model_family in {sorted(FAMILIES)} and act_ckpt none|full; "
                     f"missing {missing}")
        fraction = run.get("memory_fraction", 1.0)
        if not isinstance(fraction, (int, float)) or not 0.0 < fraction <= 1.0:
            sys.exit(f"{args.runs}: runs[{i}].memory_fraction: expected a number in (0, 1], "
                     f"found {fraction!r}")

    rank = int(os.environ.get("RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29512")
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    # The preset names its GPU first ("h200-sxm-141gb"); rows labelled with another GPU would be
    # simulated on the wrong hardware by `fsdpsim validate`.
    # The presets describe SXM parts: a PCIe, NVL or Grace-Hopper part of the same family has
    # other clocks, power and links.
    family = args.gpu.split("-")[0].upper()
    name = torch.cuda.get_device_name(device).upper()
    other_part = any(tag in name for tag in ("PCIE", "NVL", "GH200")) and "-sxm-" in args.gpu
    if not re.search(rf"(^|[^A-Z0-9]){family}([^0-9]|$)", name) or other_part:
        sys.exit(f"--gpu {args.gpu}: this machine's GPU is {torch.cuda.get_device_name(device)}, "
                 f"not the SXM {family} of {args.gpu}; pass the fsdpsim hardware preset of this "
                 "GPU")
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=device)
    software = (f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
                f"NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, "
                f"cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name(device)}")
    attention = args.attention or sdpa_default_backend(device)
    rows, results = [], []

    def write_outputs():
        write_atomically(args.csv, lambda f: csv.DictWriter(
            f, CSV_COLUMNS, lineterminator="\n").writerows([dict(zip(CSV_COLUMNS, CSV_COLUMNS))] + rows))
        if args.json:
            write_atomically(args.json, lambda f: json.dump({
                "created": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                "software": software, "world_size": world, "warmup": args.warmup,
                "steps": args.steps, "results": results}, f, indent=1))

    for run in runs:
        try:
            result = measure(run, args, device, rank)
        except torch.OutOfMemoryError as e:
            result = {"error": f"out of memory: {str(e).splitlines()[0]}"}
            if world > 1:
                # The other ranks may be blocked in this step's collectives, or may not have run
                # out of memory at all: no collective can line the ranks up again (NCCL matches
                # them by order). The runs so far are kept; torchrun stops the other ranks.
                results.append({"run": run, **result})
                if rank == 0:
                    write_outputs()
                print(f"rank {rank}: {run['name']}: {result['error']}. With {world} ranks the "
                      "others may be waiting in that step's collectives: stopping the job. The "
                      f"runs before it are in {args.csv}; launch the rest again without this one "
                      "(or with a smaller micro batch)", file=sys.stderr, flush=True)
                os._exit(1)
        if "error" in result:  # the failed step's tensors went with the exception
            gc.collect()
            torch.cuda.empty_cache()
        results.append({"run": run, **result})
        if rank == 0:
            line = (f"{run['name']:>10} s{run['seq_len']:<6} mb{run['micro_batch']:<3} "
                    f"ac {run['act_ckpt']:<4}{' compiled' if run.get('compiled') else ''}"
                    f"{' fraction ' + str(run['memory_fraction']) if 'memory_fraction' in run else ''}: ")
            if "error" in result:
                print(line + result["error"], flush=True)
            else:
                rows.append(csv_row(run, result, world, local_world, args.gpu, software, attention,
                                    args.inter_node_gbps_per_node))
                ph = result["median_phase_s"]
                print(line + f"{result['median_step_s'] * 1e3:9.1f} ms/step (fwd "
                      f"{ph['forward'] * 1e3:.1f}, bwd {ph['backward'] * 1e3:.1f}, opt "
                      f"{ph['optimizer'] * 1e3:.1f})  "
                      f"{rows[-1]['measured_tokens_per_s_per_gpu']:>9} tok/s/GPU  "
                      f"alloc {result['max_allocated_gib']:6.2f} GiB  "
                      f"reserved {result['max_reserved_gib']:6.2f} GiB  "
                      f"retries {result['num_alloc_retries']}", flush=True)
            write_outputs()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
