#include "sim/app/run_command.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <numeric>
#include <optional>
#include <set>

#include "sim/app/cli_validators.hpp"
#include "sim/app/json_file.hpp"
#include "sim/app/result_json.hpp"
#include "sim/app/retries_text.hpp"
#include "sim/app/scenario.hpp"
#include "sim/app/simulate_scenario.hpp"
#include "sim/app/size_bounds.hpp"
#include "sim/app/summary_text.hpp"
#include "sim/app/sweep_command.hpp"
#include "sim/app/trace_json.hpp"

namespace fsdpsim::app {
namespace {

constexpr const char* kRunFooter = R"(
Scenario keys (JSON sections; any of them can be overridden with --set SECTION.KEY=VALUE).
Defaults are PyTorch's, except param_dtype (bf16, where PyTorch without a mixed-precision policy
trains in fp32); the PyTorch name of each knob is in brackets. A key the rest of the scenario
makes do nothing (checkpoint_every_n_blocks without selective or past the model's blocks,
checkpoint_early_stop without full, selective or selective_op, or with compiled,
blocks_per_unit without every_n_blocks, max_inflight_all_gathers without the limiter, allocator
keys with enabled false, garbage_collection_threshold without memory_fraction or with
expandable_segments, attention and linear knobs on a custom model, buffer_dtype and
broadcast_buffers on a model without buffers) is refused rather than ignored; so is a --set that
a later override would wipe out.
allow_tf32 is the exception: a backend switch, as in PyTorch, that only fp32 GEMMs read (a sweep
over param_dtype keeps it on every point).
  parallelism               fsdp | ddp (DistributedDataParallel baseline) |
                            deepspeed_zero3 (DeepSpeed 0.3's ZeRO-3, 2021)          default fsdp
  model                     preset name (configs/models), {"preset": NAME, ...overrides} or a full
                            spec: family gpt|mpt|llama, n_layers, d_model, n_heads, n_kv_heads,
                            ffn_dim, vocab, max_seq_len, tied_embeddings, causal_mask_buffer
                            (gpt: minGPT's per-block mask buffer); family t5 (HF T5Config:
                            n_decoder_layers, d_kv, feed_forward_proj, dropout_rate, ...); family
                            custom with a "layers" list (configs/models/README.md)
  hardware.preset           GPU + node preset (configs/hardware): a100-sxm-40gb, a100-sxm-80gb,
                            h100-sxm-80gb, h200-sxm-141gb
  hardware.nodes            number of nodes                                         default 1
  hardware.gpu.* / .node.*  override any preset value, e.g. hardware.node.nic_Gbps_per_node=2000
  hardware.stragglers       slower ranks: [{"ranks": [5] or "nodes": [1], "compute_speed": 0.9,
                            "host_speed": 0.5}] (GPU kernels / CPU at that fraction of the
                            preset; every rank simulated, one per class of alike ranks)  default []
  hardware.node_speed_spread
                            what-if: the nodes' GPU speeds spread normally by this
                            fraction; the job runs at its slowest node's pace       default 0
training:
  global_batch              sequences per optimizer step, all GPUs                  required
  micro_batch               sequences per GPU per forward/backward                  default 1
  seq_len                   tokens per sequence (t5: encoder; custom: tokens per    required
                            sample, 1 for non-sequence models)
  decoder_seq_len           t5 decoder tokens per sequence                          default seq_len
  activation_checkpointing  none | full | selective | selective_op | attention      default none
                            [checkpoint_wrapper on every block | on every n-th block |
                            on every block under torchtitan's op policy: keep every
                            other mm's output and SDPA's, recompute the rest |
                            recompute only the attention core (selective recomputation)]
  checkpoint_every_n_blocks n for selective                                         default 2
  checkpoint_early_stop     a whole block's recompute stops after the last tensor its
                            backward reads (its last linear and residual add skipped)
                            [non-reentrant torch.utils.checkpoint, PyTorch >= 2.1:
                            set_checkpoint_early_stop; false: use_reentrant=True,
                            PyTorch < 2.1, torchtitan since pytorch/torchtitan#1580
                            (Aug 2025); refused with compiled, whose blocks are compiled
                            around their checkpoint (torchtitan's order) and stop early
                            anyway]                                  default true (deepspeed: false)
  no_sync                   accumulate gradients unreduced until the last micro-batch
                            (2+ micro-batches per step)
                            [FSDP.no_sync() / set_requires_gradient_sync(False)]    default false
  offload_activations       keep each block's saved activations in pinned host memory
                            [offload_wrapper / save_on_cpu(pin_memory=True)]        default false
  unpad_attention           flash-attn's bert_padding unpad_input / pad_input around the
                            attention kernel, as its FlashAttention module runs when
                            given a key_padding_mask                                default false
  clip_grad_norm            clip gradients by their total norm before the optimizer
                            step [FSDP.clip_grad_norm_ /
                            torch.nn.utils.clip_grad_norm_]                         default false
  param_storage_dtype       fp32 | bf16 | fp16: dtype of the sharded parameters, their gradients
                            and AdamW states (FSDP only) [model.to(dtype) before
                            wrapping; FSDPParam.orig_dtype, FSDP1's FlatParameter]  default fp32
  optimizer_state_dtype     bf16 | fp32: AdamW's states in bf16 beside fp32 parameters, with
                            optimizer_impl fused (FSDP) [torchtitan fused_opt_states_bf16]
                                                                       default param_storage_dtype
  optimizer                 adamw [torch.optim.AdamW] | sgd [torch.optim.SGD, no
                            momentum: no state]                                     default adamw
  optimizer_impl            foreach | fused | for_loop: the optimizer's loop       default foreach
                            [foreach=None (the CUDA default) | fused=True | foreach=False];
                            SGD's fused and foreach kernels make the same single pass;
                            with cpu_offload the host steps: fused is torch's CPU fused
                            AdamW (PyTorch >= 2.4), the others per-tensor kernels
  flash_attention           fused attention kernel [scaled_dot_product_attention]   default true
  flash_kernel              flash2 [flash-attn 2, SDPA flash] | flash1 [flash-attn 1.x] |
                            triton [flash_attn_triton; llm-foundry attn_impl triton] |
                            cudnn [SDPA's cuDNN backend, its default on Hopper]   default flash2
  loss                      cross_entropy [F.cross_entropy: fp32 log_softmax + nll_loss] |
                            cross_entropy_no_upcast [F.cross_entropy on the compute-dtype
                            logits, no .float() or autocast] |
                            fused_cross_entropy [flash_attn.losses.cross_entropy, llm-foundry's
                            default loss_fn] |
                            compiled_cross_entropy [cross_entropy under torch.compile,
                            torchtitan's compiled loss]                             default cross_entropy
  rms_norm                  llama, t5: fused [one kernel a pass: nn.RMSNorm since its fused
                            CUDA kernel (2025), apex FusedRMSNorm, torchtitan's fused_rmsnorm]
                            | eager [the reference code op by op in fp32: HF LlamaRMSNorm and
                            T5LayerNorm, torchtitan's and fms's RMSNorm, nn.RMSNorm before
                            that kernel]; compiled blocks fuse their norms either way
                                                                default llama fused, t5 eager
  logits_kept_by_loop       none | compute_dtype | fp32: the training loop holds the logits until
                            its next forward [Composer's state.outputs; `pred = model(x)`
                            without `del pred`; fp32: the model returns .float()]  default none
  host_sync                 step | micro_batch | none: where the loop's host waits for the GPU,
                            which bounds how far the CPU (and the caching allocator) runs
                            ahead [step: loss.item() or a blocking batch copy each step,
                            PyTorch's FSDP example, Composer; micro_batch: a blocking copy
                            before each micro-batch's forward, torchtitan; none: non_blocking
                            copies, the loss read at log steps only, nanoGPT]    default step
  loss_chunks               n: the LM head and the loss run after the model's forward on n
                            equal chunks of the micro-batch's tokens, each chunk's backward at
                            once, with FSDP2 and wrap_embedding_and_head [torchtitan's
                            ChunkedLossWrapper, num_chunks 8]                       default none
  autocast_dtype            bf16 | fp16 | fp32: GEMM/activation dtype under torch.autocast, narrower
                            than fsdp.param_dtype's weights (fp32 under bf16 or fp16), or equal
                            [torch.autocast(dtype)]                                default param_dtype
  matmul_dtype              fp8: float8 linears, tensorwise dynamic scaling, every eligible linear
                            but the LM head (needs an fp8 peak: H100/H200, not A100)
                            [torchao Float8Linear / convert_to_float8_training]   default compute dtype
  float8_linear             torchao: its casts fused in compiled blocks, its Python op by op
                            without compile | transformer_engine: te.Linear's fused casts
                            (llm-foundry's fp8; otherwise simulated as torchao's, no
                            float8_all_gather)                                      default torchao
  compiled                  each transformer block compiled: memory-bound chains fused, fewer
                            launches [torch.compile(block)]                         default false
  allow_tf32                fp32 GEMMs on TF32 tensor cores, MFU against the TF32 peak; no
                            effect on bf16/fp16 [torch.backends.cuda.matmul.allow_tf32]
                                                                                    default false
fsdp:
  version                   1 [FullyShardedDataParallel] | 2 [fully_shard]          default 1
  sharding_strategy         FULL_SHARD | SHARD_GRAD_OP | NO_SHARD | HYBRID_SHARD | _HYBRID_SHARD_ZERO2
                            [ShardingStrategy]                                      default FULL_SHARD
  shard_group_size          ranks per shard group for hybrid strategies (the sharding factor F;
                            any divisor of the world that tiles nodes) [device_mesh] default GPUs/node
  backward_prefetch         BACKWARD_PRE | BACKWARD_POST | none [BackwardPrefetch]  default BACKWARD_PRE
  forward_prefetch          true | false [forward_prefetch; FSDP2:
                            set_modules_to_forward_prefetch]                         default false
  forward_prefetch_modules  FSDP2: units each pre-forward prefetches, with forward_prefetch
                            [set_modules_to_forward_prefetch(next n modules)]       default 1
  backward_prefetch_modules FSDP2: units each pre-backward prefetches
                            [set_modules_to_backward_prefetch(previous n modules)]  default 1
  limit_all_gathers         rate limiter [limit_all_gathers]; FSDP1 only            default true
  max_inflight_all_gathers  limiter depth [_FreeEventQueue._max_num_inflight_all_gathers] default 2
  reshard_after_forward     FSDP2: true | false | k (reshard to k ranks) [reshard_after_forward]
                                                                                    default true
  last_unit_reshard_after_forward
                            FSDP2: the same for the last unit before the root (torchtitan's
                            default policy: false for its last block until July 2025, for
                            [norm, output] with wrap_embedding_and_head since)
                                                                       default reshard_after_forward
  root_reshard_after_forward
                            FSDP2: the same for the root, given explicitly [fully_shard(model,
                            reshard_after_forward=...), honoured since pytorch#155319] default false
  param_dtype               bf16 | fp16 | fp32 [MixedPrecision(Policy).param_dtype] default bf16
  reduce_dtype              bf16 | fp16 | fp32 [MixedPrecision(Policy).reduce_dtype] default param_dtype
  buffer_dtype              FSDP1: bf16 | fp16 | fp32, the model buffers' dtype
                            [MixedPrecision.buffer_dtype]  default the module's (param_storage_dtype)
  cpu_offload               parameters and gradients on the host, optimizer on the CPU
                            [CPUOffload(offload_params=True) / CPUOffloadPolicy]     default false
  float8_all_gather         FSDP2 with matmul_dtype fp8: the float8 linears' weights cast to
                            float8 before the all-gather, gathered at one byte per element
                            [torchao enable_fsdp_float8_all_gather]                 default false
  precompute_float8_scale   with float8_all_gather: one amax all-reduce after each optimizer
                            step instead of one per weight per all-gather
                            [torchao precompute_float8_dynamic_scale_for_fsdp]      default false
  wrap_policy               transformer_block | every_n_blocks | whole_model | block_and_linear
                            [transformer_auto_wrap_policy / which modules fully_shard;
                            block_and_linear: ModuleWrapPolicy({Block, nn.Linear}), FSDP1 only]
                            default transformer_block
  blocks_per_unit           blocks per unit for every_n_blocks                      default 2
  wrap_embedding_and_head   FSDP2, untied gpt | mpt | llama: the embedding layer (gpt's position
                            table with the tokens') and the final norm with the LM head in
                            units of their own, the root holding none
                            [torchtitan: fully_shard(tok_embeddings), fully_shard([norm, output])]
                                                                                    default false
ddp (with parallelism ddp; fsdp.param_dtype is the autocast dtype, default bf16; fsdp.reduce_dtype
is fp32 by default, DDP all-reducing the fp32 gradients, and bf16/fp16 selects that compress hook):
  bucket_cap_mb             [DistributedDataParallel(bucket_cap_mb)]; caps every bucket, the
                            first too; absent: PyTorch's None, 25 MiB after a first of 1 MiB
  broadcast_buffers         broadcast the model's buffers from rank 0 before a forward
                            [DistributedDataParallel(broadcast_buffers)]            default true
  gradient_as_bucket_view   .grad views the buckets: no separate gradients, no copy back
                            [DistributedDataParallel(gradient_as_bucket_view)]      default false
deepspeed (with parallelism deepspeed_zero3, DeepSpeed 0.3.12-0.4.0's zero_optimization keys;
fsdp.param_dtype fp16 | bf16 is the modules' dtype, default fp16):
  version                   0.3                                                     default 0.3
  stage3_param_persistence_threshold                                               default 100000
  stage3_prefetch_bucket_size                                                      default 50000000
  stage3_max_live_parameters                                                       default 1e9
  stage3_max_reuse_distance                                                        default 1e9
  reduce_bucket_size                                                               default 500000000
  contiguous_gradients      copy each gradient into a bucket buffer and reduce-scatter it
                            parameter by parameter, else all-reduce each bucket     default false
  register_external_embedding  the model registers its tied token embedding as an external
                            parameter of the whole model [deepspeed.zero.register_external_parameter;
                            Megatron-LM-v1.1.5-ZeRO3, 2021-03]: gathered all step   default false
allocator (the CUDA caching allocator; PYTORCH_CUDA_ALLOC_CONF's names):
  enabled                   false: allocated and active memory only, no reserved    default true
  max_split_size_mb         cached blocks this large are never split                default none
  expandable_segments       one growing segment per stream and pool                 default false
  garbage_collection_threshold  free old cached blocks past this fraction of the memory
                            fraction's maximum (only with memory_fraction and without
                            expandable_segments, as PyTorch)                      default off
  roundup_power2_divisions  round request sizes to 1/N steps between powers of two: N, or per
                            interval as PyTorch lists them, "[256:1,512:2,>:4]" (MiB:N)
                                                                                    default off
  memory_fraction           hold at most this fraction of the device's memory
                            [torch.cuda.set_per_process_memory_fraction]            default 1

Exit codes: 0 ok (an out-of-memory prediction is a result), 1 internal error, 2 bad input.)";

// The measured step's memory (the warm-up step before it only fills the cache): the state at its
// start, then every change, on the trace's clock. Memory changes when the CPU issues an op, so
// the step's memory begins at its first allocation on the CPU's clock, which runs ahead of the
// GPU's measured_start.
std::string memory_timeline_csv(const fsdp::SimulationOutput& output) {
  std::string csv = "time_s,allocated_gib,active_gib,reserved_gib\n";
  const bool modelled = output.result.models_reserved;
  const auto row = [&csv, modelled](SimTime time, const memory::MemorySample& m) {
    csv += fmt::format("{:.9f},{:.6f},{:.6f},{:.6f}\n", time.seconds(), to_gib(m.allocated),
                       to_gib(m.active), to_gib(m.shown_reserved(modelled)));
  };
  const std::vector<memory::MemorySample>& samples = output.memory_samples;
  const auto first = std::find_if(
      samples.begin(), samples.end(),
      [&](const memory::MemorySample& m) { return m.time > output.memory_measured_start; });
  if (first != samples.begin()) row(output.memory_measured_start, *std::prev(first));
  for (auto it = first; it != samples.end(); ++it) row(it->time, *it);
  return csv;
}

// Every tensor the measured step allocates and frees, in the order the CPU does it, from the first
// allocation of the step on: what torch.cuda.memory._record_memory_history logs of a step as
// "alloc" and "free_requested" (sizes as requested, before the allocator rounds them).
std::string allocations_csv(const fsdp::SimulationOutput& output) {
  const engine::Program& program = output.schedule.program;
  std::string csv = "time_s,action,bytes,stream,category,tensor\n";
  const std::vector<memory::TensorEvent>& events = output.tensor_events;
  const auto first = std::find_if(events.begin(), events.end(), [&](const memory::TensorEvent& e) {
    return e.allocated && e.tensor >= output.schedule.measured_first_tensor;
  });
  for (auto e = first; e != events.end(); ++e) {
    const engine::TensorInfo& t = program.tensors[e->tensor];
    csv +=
        fmt::format("{:.9f},{},{},{},{},{}\n", e->time.seconds(), e->allocated ? "alloc" : "free",
                    t.size.value(), program.stream_names[t.stream],
                    memory::category_name(static_cast<memory::MemoryCategory>(t.category)),
                    program.names[t.name]);
  }
  return csv;
}

// Columns of --max-micro-batch's progress line (which a shorter one overwrites).
constexpr std::size_t kProgressWidth = 78;

// The largest micro-batch that fits, keeping the number of gradient-accumulation steps:
// doubling until out of memory (or 4096), then bisection. Under a chunked loss only micro-batches
// whose tokens split into its chunks are tried: multiples of the smallest such.
int max_micro_batch_command(const RunOptions& options, const PresetLocator& presets,
                            const Scenario& base) {
  const std::int64_t world = base.hardware.cluster.world_size();
  const std::int64_t accumulation =
      base.training.global_batch / (base.training.micro_batch * world);
  const std::int64_t chunks = base.training.loss_chunks;
  const std::int64_t step = chunks > 0 ? chunks / std::gcd(base.training.seq_len, chunks) : 1;
  // The search runs over n, the micro-batch n x step.
  const auto micro = [step](std::int64_t n) { return n * step; };
  // Each probe is a whole simulation, seconds for a large one: on a terminal, as sweep does, a
  // line says which is running, cleared before the answer is printed.
  const bool show_progress = ::isatty(::fileno(stderr)) != 0;
  const auto search_start = std::chrono::steady_clock::now();
  std::int64_t probes = 0;
  const auto clear_progress = [show_progress] {
    if (show_progress) std::cerr << "\r" << std::string(kProgressWidth, ' ') << "\r" << std::flush;
  };
  const auto fits = [&](std::int64_t n, fsdp::StepResult& result) {
    if (show_progress) {
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - search_start).count();
      std::cerr << fmt::format("\r{:<{}}",
                               fmt::format("max-micro-batch: simulating micro_batch {} "
                                           "(probe {}, {:.1f} s so far)",
                                           micro(n), ++probes, elapsed),
                               kProgressWidth)
                << std::flush;
    }
    std::vector<std::string> overrides = options.overrides;
    overrides.push_back(fmt::format("training.micro_batch={}", micro(n)));
    overrides.push_back(fmt::format("training.global_batch={}", micro(n) * world * accumulation));
    result = simulate_scenario(load_scenario(options.scenario, overrides, presets), false).result;
    return !result.out_of_memory;
  };
  // The search tries micro-batches up to 4096 sequences, and no more tokens than a scenario may
  // have (size_bounds.hpp): beyond either it says where it stopped rather than fail or guess.
  constexpr std::int64_t kLargestTried = 4096;
  const std::int64_t token_limit = size_bounds::kTokens / base.training.seq_len;
  const std::int64_t limit = std::min(kLargestTried, token_limit) / step;
  fsdp::StepResult best_result;
  fsdp::StepResult probe;
  std::int64_t good = 0;
  std::int64_t bad = 1;
  while (bad <= limit && fits(bad, probe)) {
    good = bad;
    best_result = probe;
    bad *= 2;
  }
  if (good == 0) {
    clear_progress();
    std::cout << fmt::format("no micro-batch fits: micro_batch {} is out of memory ({})\n",
                             micro(1), probe.oom_reason);
    return 0;
  }
  fsdp::StepResult oom_result = probe;
  // Narrows [good, bad) by one simulation of `n`.
  const auto try_micro = [&](std::int64_t n) {
    if (fits(n, probe)) {
      good = n;
      best_result = probe;
    } else {
      bad = n;
      oom_result = probe;
    }
  };
  // Every power of two up to the limit fits: try the limit itself.
  if (bad > limit && good < limit) try_micro(limit);
  const bool stopped = good == limit;
  while (bad - good > 1 && !stopped) try_micro(good + (bad - good) / 2);
  const auto describe = [&](const fsdp::StepResult& r) {
    return fmt::format("{:.1f} tokens/s/GPU, peak reserved {:.2f} GiB of {:.2f} usable",
                       r.tokens_per_s_per_gpu, to_gib(r.reported_peak_reserved()),
                       to_gib(r.usable_memory));
  };
  const std::int64_t retries = best_result.reserved.alloc_retries;
  clear_progress();
  std::cout << fmt::format("largest micro-batch that fits: {} ({} accumulation step{}): {}{}{}\n",
                           micro(good), accumulation, accumulation == 1 ? "" : "s",
                           describe(best_result),
                           retries == 0 ? "" : ", " + cuda_malloc_retries(retries) + " per step",
                           step == 1 ? ""
                                     : fmt::format(" (multiples of {} tried: their tokens split "
                                                   "into the loss's {} chunks)",
                                                   step, chunks));
  if (stopped) {
    std::cout << fmt::format(
        "the search stops at micro_batch {} ({}); larger ones may fit too\n", micro(limit),
        micro(limit + 1) > token_limit
            ? fmt::format("micro_batch x seq_len is at most {} tokens", size_bounds::kTokens)
            : fmt::format("the largest it tries"));
  } else {
    std::cout << fmt::format("micro_batch {} is out of memory: {}\n", micro(bad),
                             oom_result.oom_reason);
  }
  if (retries > 0) {
    // A step that fits only by flushing the allocator's cache is the least certain prediction
    // (each retry synchronizes the device), so the largest micro-batch that needs none is worth
    // knowing too. Retries do not grow steadily with the micro-batch (how the cache fragments
    // depends on the sizes: GPT-175B on 128 GPUs retries at 2 and 4 but not 3), so the smaller
    // ones are tried one by one, down from the largest, at most kRetryFreeTries of them.
    constexpr std::int64_t kRetryFreeTries = 64;
    std::int64_t clean = 0;
    fsdp::StepResult clean_result;
    const std::int64_t lowest = std::max<std::int64_t>(1, good - kRetryFreeTries);
    for (std::int64_t n = good - 1; n >= lowest && clean == 0; --n) {
      if (fits(n, probe) && probe.reserved.alloc_retries == 0) {
        clean = n;
        clean_result = probe;
      }
    }
    clear_progress();
    if (clean > 0) {
      std::cout << fmt::format("largest without cudaMalloc retries: {}: {}\n", micro(clean),
                               describe(clean_result));
    } else if (lowest == 1) {
      std::cout << "every micro-batch that fits retries cudaMalloc\n";
    } else {
      std::cout << fmt::format(
          "micro-batches {} to {} all retry cudaMalloc; smaller ones were not tried\n",
          micro(lowest), micro(good));
    }
  }
  return 0;
}

double elapsed_ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since)
      .count();
}

}  // namespace

CLI::App* add_run_command(CLI::App& app, RunOptions& options) {
  CLI::App* run =
      app.add_subcommand("run", "Simulate one training step of a scenario and report it");
  run->add_option("scenario", options.scenario, "Scenario JSON file")
      ->required()
      ->check(non_empty());
  run->add_option("--set", options.overrides,
                  "Override a scenario key, e.g. --set training.micro_batch=2")
      ->type_name("KEY=VALUE");
  CLI::Option* json =
      run->add_option("--json", options.json_path, "Write the result JSON to PATH ('-' for stdout)")
          ->type_name("PATH|-")
          ->check(non_empty());
  CLI::Option* trace = run->add_option("--trace", options.trace_path,
                                       "Write a Chrome/Perfetto trace of the step to PATH")
                           ->type_name("PATH")
                           ->check(non_empty());
  CLI::Option* timeline =
      run->add_option(
             "--memory-timeline", options.memory_timeline_path,
             "Write allocated, active and reserved memory over the measured step as CSV to PATH")
          ->type_name("PATH")
          ->check(non_empty());
  CLI::Option* allocations =
      run->add_option("--allocations", options.allocations_path,
                      "Write every tensor the measured step allocates and frees, in order, as CSV "
                      "to PATH")
          ->type_name("PATH")
          ->check(non_empty());
  // The search prints its answer; the outputs of one step are the scenario's at that micro-batch
  // (`fsdpsim run --set training.micro_batch=N`), so asking for them here is refused, not ignored.
  CLI::Option* max_micro_batch =
      run->add_flag("--max-micro-batch", options.max_micro_batch,
                    "Find the largest training.micro_batch that fits (same gradient accumulation)")
          ->excludes(json)
          ->excludes(trace)
          ->excludes(timeline)
          ->excludes(allocations);
  run->add_option(
         "--configs", options.configs_dir,
         "Folder of presets (default: $FSDPSIM_CONFIGS_DIR, else the source tree's configs/)")
      ->type_name("DIR")
      ->check(non_empty());
  max_micro_batch->excludes(
      run->add_flag("--timing", options.timing,
                    "Print wall-clock time of loading, simulating and writing on stderr"));
  run->footer(kRunFooter);
  return run;
}

int run_command(const RunOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  // Every file the scenario names (presets, a calibration profile) is an input an output must
  // not overwrite, as the scenario is.
  std::set<std::filesystem::path> inputs{options.scenario};
  PresetLocator presets{default_configs_dir(options.configs_dir)};
  presets.files_resolved = &inputs;
  const Scenario scenario = load_scenario(options.scenario, options.overrides, presets);
  check_sweep_block(options.scenario, options.overrides, presets);
  const std::vector<std::filesystem::path> input_files(inputs.begin(), inputs.end());
  check_outputs({options.json_path, options.trace_path, options.memory_timeline_path,
                 options.allocations_path},
                input_files);
  const double load_ms = elapsed_ms(start);

  const auto simulate_start = std::chrono::steady_clock::now();
  if (options.max_micro_batch) return max_micro_batch_command(options, presets, scenario);
  const bool record_memory = !options.trace_path.empty() || !options.memory_timeline_path.empty() ||
                             !options.allocations_path.empty();
  const fsdp::SimulationOutput output = simulate_scenario(scenario, record_memory);
  const double simulate_ms = elapsed_ms(simulate_start);

  const auto write_start = std::chrono::steady_clock::now();
  // run does not judge the expect block (check does), but a key no result has is a typo that
  // check would refuse: refused here too rather than accepted in silence.
  std::optional<nlohmann::json> result;
  if (scenario.expectations || !options.json_path.empty())
    result = result_to_json(scenario, output);
  if (scenario.expectations) (void)evaluate_expectations(*scenario.expectations, *result);
  std::vector<OutputFile> outputs;  // written together: all or none
  if (!options.json_path.empty()) outputs.push_back({options.json_path, result->dump(2) + "\n"});
  if (!options.trace_path.empty()) {
    // Streamed as it is written: a trace of thousands of micro-batches is gigabytes of text.
    outputs.push_back({options.trace_path, "",
                       [&output](const TextSink& sink) { write_trace_json(output, sink); }});
  }
  if (!options.memory_timeline_path.empty())
    outputs.push_back({options.memory_timeline_path, memory_timeline_csv(output)});
  if (!options.allocations_path.empty())
    outputs.push_back({options.allocations_path, allocations_csv(output)});
  write_outputs(outputs, input_files);
  // The summary is for a person: with the result JSON on stdout there is none, and with a trace,
  // a memory timeline or the allocations there it goes to stderr, so that stdout stays that file.
  if (!writes_stdout(options.json_path)) {
    const bool stdout_taken = writes_stdout(options.trace_path) ||
                              writes_stdout(options.memory_timeline_path) ||
                              writes_stdout(options.allocations_path);
    (stdout_taken ? std::cerr : std::cout) << summary_text(scenario, output);
  }
  if (options.timing) {
    std::cerr << fmt::format(
        "timing: load {:.2f} ms, simulate {:.2f} ms ({} ops), write {:.2f} ms, total {:.2f} ms\n",
        load_ms, simulate_ms, output.result.op_count, elapsed_ms(write_start), elapsed_ms(start));
  }
  return 0;
}

}  // namespace fsdpsim::app
