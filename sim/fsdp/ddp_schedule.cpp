// PyTorch DistributedDataParallel as the baseline FSDP is compared with, after
// torch/nn/parallel/distributed.py and torch/csrc/distributed/c10d/reducer.cpp:
// - Full replicas: fp32 parameters, fp32 gradients, AdamW states, and the Reducer's flat bucket
//   buffers (gradient_as_bucket_view=False, the default: gradients are copied into them).
// - gradient_as_bucket_view=True: mark_variable_ready_dense copies a gradient into its bucket
//   and then points .grad at the bucket view, so the gradient it copied goes and nothing is
//   copied back (finalize_bucket_dense); a later gradient of the step is added by AccumulateGrad
//   straight into the view, which the Reducer divides in place. zero_grad(set_to_none=True)
//   drops the views, so each step's first gradient is copied again.
// - Gradients become ready parameter by parameter: a linear's weight (and bias) once its
//   gradient kernels have run, a layer's other parameters (norms, embedding tables) at the end
//   of its backward. Each one's AccumulateGrad runs, then the Reducer's autograd hook copies it
//   into its bucket, dividing by the world size on the way (mark_variable_ready_dense's mul_out:
//   8 B per element).
// - Buckets: the steady state after the first iteration, when the Reducer has rebuilt them in
//   the order the gradients became ready (Reducer::rebuild_buckets; the first iteration runs with
//   one bucket), each closed once it reaches its limit (compute_bucket_assignment_by_size):
//   bucket_cap_mb, or by default (None) 1 MiB for the first (dist._DEFAULT_FIRST_BUCKET_BYTES)
//   and 25 MiB after.
// - When every gradient of a bucket is in it, it is all-reduced on the process group's NCCL
//   stream, which first waits for the compute stream; buckets are reduced in order.
//   finalize_backward walks the buckets in order: the compute stream waits for each one's
//   all-reduce and copies it back into .grad, so the copies of the earlier buckets overlap the
//   last all-reduce (Reducer::finalize_backward).
// - Mixed precision is torch.autocast: each forward casts the fp32 weights that its
//   lower-precision ops read (the linears', and for a layer without linears its GEMM-class
//   work's, e.g. convolutions) to param_dtype once (the autocast weight cache). Autograd keeps
//   those copies for backward, and the gradients flow back through the cast (ToCopyBackward0)
//   into fp32 .grad. A block under whole-layer checkpointing saves nothing in its forward: its
//   copies live in the cache until the forward leaves autocast, and its recompute casts again,
//   which autograd keeps this time. Norms and an untied embedding's lookup are not on
//   autocast's lower-precision list (autocast_mode.h): they run on the fp32 weights, with no cast
//   either way; a tied table is cast where the LM head's linear reads it, and that linear's
//   share of its gradient is held, in fp32, until the lookup's is added in and AccumulateGrad
//   takes the sum. reduce_dtype below fp32 is the bf16/fp16_compress_hook: cast and divide the
//   bucket on the compute stream, all-reduce half the bytes, copy back (the future's callback,
//   on a stream of the pool that waits for the all-reduce: ivalue_inl.h,
//   Future::invokeCallback).
// - AccumulateGrad: the first micro-batch's gradient becomes .grad as it is; a later one is
//   added into it (accumulate_grad.h).
// - Module buffers (broadcast_buffers, the default): pre_forward runs _sync_buffers when the
//   forward before it synced gradients (require_forward_param_sync, set by post_forward outside
//   no_sync), so every forward but those following a no_sync one. c10d's broadcast_coalesced
//   (torch/csrc/distributed/c10d/comm.cpp) packs the buffers into buckets of
//   broadcast_bucket_size (250 MiB), each flattened by a cat on the compute stream (a bucket of
//   one buffer is a view of it: no copy either way) and broadcast from rank 0 on the NCCL stream,
//   two in flight at most; finishing one makes the compute stream wait for it, copies each
//   buffer back out of it (one copy_ per tensor), and lets it go.
#include <algorithm>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/linear_modules.hpp"
#include "sim/fsdp/schedule_flavours.hpp"
#include "sim/fsdp/step_builder.hpp"

namespace fsdpsim::fsdp {
namespace {

using engine::StreamId;
using engine::TensorId;
using hardware::Collective;
using memory::MemoryCategory;

// dist._DEFAULT_FIRST_BUCKET_BYTES.
constexpr std::int64_t kFirstBucketBytes = std::int64_t{1} << 20;
// DistributedDataParallel.broadcast_bucket_size: int(250 * 1024 * 1024).
constexpr std::int64_t kBroadcastBucketBytes = std::int64_t{250} << 20;
// broadcast_coalesced's max_in_flight.
constexpr std::size_t kMaxBroadcastsInFlight = 2;
constexpr std::size_t kNone = static_cast<std::size_t>(-1);

// Parameters whose gradients become ready together: a linear's weight and bias, or a layer's
// other parameters (a tied table apart from the rest of its layer's).
struct GradPiece {
  std::string name;  // "blocks.0.mlp_up", the layer's name for its other parameters
  std::size_t layer = 0;
  std::int64_t numel = 0;
  bool cast = false;  // autocast keeps a param_dtype copy of it
  std::size_t bucket = 0;
};

struct Bucket {
  std::vector<std::size_t> pieces;  // in the order their gradients become ready
  std::int64_t numel = 0;
};

// Module buffers broadcast together: their elements, in module order, and the first's layer.
struct BufferBucket {
  std::vector<std::int64_t> tensors;
  std::int64_t numel = 0;
  std::size_t layer = 0;
};

// Per layer: which pieces become ready after which of its backward kernels, which at its end,
// and which autocast casts when the layer's forward (or recompute) starts.
struct LayerPieces {
  std::vector<std::size_t> ready_after_kernel;  // per backward kernel: a piece, or kNone
  std::vector<std::size_t> ready_at_end;
  std::vector<std::size_t> cast_at_start;
  // In the layer whose linear reads a tied table: the backward kernel after which that linear's
  // share of the table's gradient exists.
  std::size_t tied_share_after_kernel = kNone;
};

class DdpStep final : private KernelHooks {
 public:
  explicit DdpStep(const ScheduleInput& input)
      : in_(input),
        f_(input.fsdp),
        s_(input),
        nccl_(s_.add_stream("nccl:world")),
        callback_(input.fsdp.reduce_dtype == Dtype::kFp32
                      ? std::nullopt
                      : std::optional<StreamId>(s_.add_stream("future_callback"))),
        world_(s_.add_process_group("nccl:world", input.cluster.world_size(), 1)),
        autocast_(input.fsdp.param_dtype != Dtype::kFp32) {
    make_pieces();
    make_buckets();
    if (f_.ddp_broadcast_buffers) make_buffer_buckets();
    grads_.resize(pieces_.size());
    has_grad_.assign(pieces_.size(), false);
    grad_is_bucket_view_.assign(pieces_.size(), false);
    cast_copies_.resize(pieces_.size());
    reduced_.resize(buckets_.size());
    s_.set_kernel_hooks(this);
  }

  Schedule build() {
    Schedule out;
    s_.run_steps(
        out, [this](bool sync) { micro_batch(sync); }, [this] { optimizer_step(); });
    const std::int64_t numel = total_numel();
    // Full replicas: fp32 parameters and optimizer state, and the Reducer's bucket buffers.
    out.baseline[static_cast<std::size_t>(MemoryCategory::kParameters)] = Bytes(4 * numel);
    out.baseline[static_cast<std::size_t>(MemoryCategory::kOptimizerState)] =
        Bytes(optimizer_state_bytes_per_parameter(in_.training.optimizer, Dtype::kFp32) * numel);
    out.baseline[static_cast<std::size_t>(MemoryCategory::kCommunication)] = Bytes(4 * numel);
    s_.finish(out);
    return out;
  }

 private:
  std::int64_t total_numel() const {
    std::int64_t n = 0;
    for (const models::Layer& l : s_.workload().layers) n += l.numel;
    return n;
  }

  std::size_t add_piece(std::string name, std::size_t layer, std::int64_t numel, bool cast) {
    pieces_.push_back({std::move(name), layer, numel, autocast_ && cast, 0});
    return pieces_.size() - 1;
  }

  // A linear owns its weight and bias unless its weight is a tied table another layer holds
  // (models::linear_modules); that table is cast where the linear runs.
  void make_pieces() {
    const auto& layers = s_.workload().layers;
    const std::int64_t tied = models::tied_weight_numel(s_.workload());
    layer_pieces_.resize(layers.size());
    std::optional<std::size_t> tied_reader;
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const models::Layer& l = layers[i];
      LayerPieces& lp = layer_pieces_[i];
      lp.ready_after_kernel.assign(l.backward.size(), kNone);
      std::int64_t rest = l.numel;
      const std::vector<models::LinearModule> linears = models::linear_modules(l);
      bool owns_linear = false;
      for (const models::LinearModule& m : linears) {
        const std::int64_t numel = m.weight_numel + m.bias_numel;
        std::size_t last = kNone;
        for (std::size_t k = 0; k < l.backward.size(); ++k) {
          if (l.backward[k].linear_module == m.name) last = k;
        }
        if (numel > l.numel) {
          tied_reader = i;
          if (last == kNone) throw std::logic_error("ddp: the tied " + m.name + " has no backward");
          lp.tied_share_after_kernel = last;
          continue;
        }
        owns_linear = true;
        rest -= numel;
        const std::size_t p = add_piece(l.name + "." + m.name, i, numel, true);
        lp.cast_at_start.push_back(p);
        if (last == kNone) {
          lp.ready_at_end.push_back(p);
        } else if (lp.ready_after_kernel[last] != kNone) {
          throw std::logic_error("ddp: " + l.name + " has two linears named " + m.name);
        } else {
          lp.ready_after_kernel[last] = p;
        }
      }
      // The table is one parameter, held by the layer whose numel counts it: T5's decoder
      // lookup reads the encoder's table and holds none of its own.
      if (l.kind == models::LayerKind::kEmbedding && tied > 0 && l.numel >= tied) {
        if (tied_piece_) throw std::logic_error("ddp: two layers hold the tied table");
        tied_piece_ = add_piece(l.name + ".tied", i, tied, true);
        lp.ready_at_end.push_back(*tied_piece_);
        rest -= tied;
      }
      // GEMM-class work outside any nn.Linear (a custom layer's convolutions): its weights are
      // what autocast casts for a layer without linears of its own.
      const bool gemm_work =
          std::any_of(l.forward.begin(), l.forward.end(), [](const models::NamedKernel& k) {
            return k.kernel.kind == KernelKind::kGemm && k.linear_module.empty();
          });
      if (rest > 0) {
        const bool cast = !owns_linear && gemm_work && l.kind != models::LayerKind::kEmbedding;
        const std::size_t p = add_piece(l.name, i, rest, cast);
        lp.ready_at_end.push_back(p);
        if (cast) lp.cast_at_start.push_back(p);
      }
    }
    if (tied_piece_ && tied_reader)
      layer_pieces_[*tied_reader].cast_at_start.push_back(*tied_piece_);
  }

  void make_buckets() {
    const auto& layers = s_.workload().layers;
    // DistributedDataParallel's default bucket_cap_mb (None): 25 MiB.
    constexpr double kDefaultCapMib = 25.0;
    const auto cap = static_cast<std::int64_t>(f_.ddp_bucket_cap_mb.value_or(kDefaultCapMib) *
                                               static_cast<double>(kBytesPerMiB));
    std::int64_t limit = f_.ddp_bucket_cap_mb ? cap : kFirstBucketBytes;
    const auto add = [&](std::size_t p) {
      if (buckets_.empty() || 4 * buckets_.back().numel >= limit) {
        if (!buckets_.empty()) limit = cap;
        buckets_.emplace_back();
      }
      buckets_.back().pieces.push_back(p);
      buckets_.back().numel += pieces_[p].numel;
      pieces_[p].bucket = buckets_.size() - 1;
    };
    for (std::size_t i = layers.size(); i-- > 0;) {
      for (const std::size_t p : layer_pieces_[i].ready_after_kernel) {
        if (p != kNone) add(p);
      }
      for (const std::size_t p : layer_pieces_[i].ready_at_end) add(p);
    }
  }

  // compute_bucket_assignment_by_size with the one limit: a bucket closes once it reaches it.
  void make_buffer_buckets() {
    const auto& layers = s_.workload().layers;
    for (std::size_t i = 0; i < layers.size(); ++i) {
      for (const std::int64_t n : layers[i].buffers) {
        if (buffer_buckets_.empty() ||
            elements(buffer_buckets_.back().numel, s_.buffer_dtype()).value() >=
                kBroadcastBucketBytes) {
          buffer_buckets_.push_back({{}, 0, i});
        }
        buffer_buckets_.back().tensors.push_back(n);
        buffer_buckets_.back().numel += n;
      }
    }
  }

  // _sync_buffers: broadcast_coalesced from rank 0 (see the file's comment).
  void broadcast_buffers() {
    struct InFlight {
      std::size_t bucket;
      std::optional<TensorId> flat;  // none for a bucket of one buffer, broadcast in place
      engine::EventRef done;
    };
    std::vector<InFlight> in_flight;  // oldest first, at most kMaxBroadcastsInFlight
    const auto finish = [&] {
      const InFlight w = in_flight.front();
      in_flight.erase(in_flight.begin());
      const BufferBucket& bucket = buffer_buckets_[w.bucket];
      s_.program().wait_event(s_.compute(), w.done);  // work->wait()
      if (!w.flat) return;  // unflatten gives the buffer itself: copy_ of a tensor onto itself
      for (const std::int64_t n : bucket.tensors) {
        s_.copy("buffers." + std::to_string(w.bucket) + ".copy_back", s_.compute(),
                2 * elements(n, s_.buffer_dtype()), Phase::kForward,
                static_cast<std::int32_t>(bucket.layer));
      }
      s_.free(*w.flat, w.done);  // record_stream by ProcessGroupNCCL, as the compress hook's
    };
    for (std::size_t b = 0; b < buffer_buckets_.size(); ++b) {
      if (in_flight.size() >= kMaxBroadcastsInFlight) finish();
      const BufferBucket& bucket = buffer_buckets_[b];
      const std::string name = "buffers." + std::to_string(b);
      const auto g = static_cast<std::int32_t>(bucket.layer);
      const Bytes bytes = elements(bucket.numel, s_.buffer_dtype());
      // flatten_dense_tensors of one tensor is a view of it (at::native::flatten_dense_tensors).
      std::optional<TensorId> flat;
      if (bucket.tensors.size() > 1) {
        flat = s_.allocate(name + ".flat", bytes, s_.compute(), MemoryCategory::kCommunication);
        s_.copy(name + ".flatten", s_.compute(), 2 * bytes, Phase::kForward, g);
      }
      s_.program().wait_stream(nccl_, s_.compute());
      s_.collective(name + ".broadcast", Collective::kBroadcast, nccl_, world_, bytes,
                    Phase::kForward, g);
      in_flight.push_back({b, flat, s_.program().record_event(nccl_)});
    }
    while (!in_flight.empty()) finish();
  }

  // The autocast copies of the pieces cast when `layer` starts: one per tensor, one cast kernel.
  void cast(std::size_t layer, Phase phase) {
    std::int64_t numel = 0;
    for (const std::size_t p : layer_pieces_[layer].cast_at_start) {
      if (!pieces_[p].cast) continue;
      cast_copies_[p] = s_.allocate(pieces_[p].name + ".autocast_weights",
                                    elements(pieces_[p].numel, f_.param_dtype), s_.compute(),
                                    MemoryCategory::kParameters);
      numel += pieces_[p].numel;
    }
    if (numel == 0) return;
    s_.copy(s_.workload().layers[layer].name + ".autocast_cast", s_.compute(),
            elements(numel, Dtype::kFp32) + elements(numel, f_.param_dtype), phase,
            static_cast<std::int32_t>(layer));
  }

  void micro_batch(bool sync) {
    // pre_forward reads require_forward_param_sync as the previous forward's post_forward left
    // it; the step before the first ended with a synced micro-batch.
    if (buffers_need_sync_) broadcast_buffers();
    buffers_need_sync_ = sync;
    sync_ = sync;
    const auto& layers = s_.workload().layers;
    std::vector<StepBuilder::SavedIds> saved(layers.size());
    for (std::size_t i = 0; i < layers.size(); ++i) {
      cast(i, Phase::kForward);
      saved[i] = s_.forward_layer(i, static_cast<std::int32_t>(i));
    }
    // Leaving autocast clears its cache: the copies nothing saved (checkpointed blocks') go.
    for (std::size_t p = 0; p < pieces_.size(); ++p) {
      if (pieces_[p].cast && recomputes(pieces_[p].layer)) s_.free(cast_copies_[p]);
    }
    ready_.assign(buckets_.size(), 0);
    for (std::size_t i = layers.size(); i-- > 0;) {
      recast_pending_ = recomputes(i);
      s_.backward_layer(i, static_cast<std::int32_t>(i), saved[i]);
      for (const std::size_t p : layer_pieces_[i].ready_at_end) gradient_ready(p);
    }
    if (sync) {
      // finalize_backward: each bucket's wait, then its copy back into .grad.
      for (std::size_t b = 0; b < buckets_.size(); ++b) {
        s_.program().wait_event(s_.compute(), reduced_[b]);
        if (f_.ddp_gradient_as_bucket_view) continue;  // .grad is the bucket
        s_.copy("bucket." + std::to_string(b) + ".copy_to_grads", s_.compute(),
                Bytes(8 * buckets_[b].numel), Phase::kBackward, group(b));
      }
    }
  }

  bool recomputes(std::size_t layer) const { return reruns_forward(s_.checkpoint_mode(layer)); }

  std::int32_t group(std::size_t bucket) const {
    return static_cast<std::int32_t>(pieces_[buckets_[bucket].pieces.front()].layer);
  }

  // KernelHooks: a recompute casts its layer's weights again before its first kernel.
  void before_kernel(std::size_t layer, const models::NamedKernel& /*kernel*/,
                     Phase phase) override {
    if (phase != Phase::kRecompute || !recast_pending_) return;
    recast_pending_ = false;
    cast(layer, Phase::kRecompute);
  }

  // KernelHooks: a linear's gradient is ready after its last gradient kernel.
  void after_kernel(std::size_t layer, const models::NamedKernel& kernel, Phase phase) override {
    if (phase != Phase::kBackward) return;
    const std::vector<models::NamedKernel>& backward = s_.workload().layers[layer].backward;
    const std::less<const models::NamedKernel*> before;
    if (before(&kernel, backward.data()) || !before(&kernel, backward.data() + backward.size())) {
      return;
    }
    const auto k = static_cast<std::size_t>(&kernel - backward.data());
    if (const std::size_t p = layer_pieces_[layer].ready_after_kernel[k]; p != kNone) {
      gradient_ready(p);
    }
    if (k == layer_pieces_[layer].tied_share_after_kernel) tied_share_ready();
  }

  // A tied table's gradient from the linear that reads it: fp32 at once (ToCopyBackward0 under
  // autocast, whose cast copy the linear's backward releases), then held in autograd's input
  // buffer until the lookup's gradient is added into it (the embedding layer's
  // *_grad_accumulate kernel), when AccumulateGrad takes the sum.
  void tied_share_ready() {
    const std::size_t p = *tied_piece_;
    const GradPiece& piece = pieces_[p];
    const Bytes grad_bytes = elements(piece.numel, Dtype::kFp32);
    tied_share_ = s_.allocate(piece.name + ".head_grad", grad_bytes, s_.compute(),
                              MemoryCategory::kGradients);
    if (piece.cast) gradient_to_fp32(p);
  }

  // ToCopyBackward0 of the autocast cast: the param_dtype gradient made fp32, after which the
  // linear's backward no longer holds the cast copy.
  void gradient_to_fp32(std::size_t p) {
    const GradPiece& piece = pieces_[p];
    s_.copy(piece.name + ".grad_to_fp32", s_.compute(),
            elements(piece.numel, f_.param_dtype) + elements(piece.numel, Dtype::kFp32),
            Phase::kBackward, static_cast<std::int32_t>(piece.layer));
    s_.free(cast_copies_[p]);
  }

  // AccumulateGrad, then the Reducer's hook.
  void gradient_ready(std::size_t p) {
    const GradPiece& piece = pieces_[p];
    const auto g = static_cast<std::int32_t>(piece.layer);
    // The fp32 gradient (ToCopyBackward0's cast under autocast) is .grad on the first
    // micro-batch (AccumulateGrad steals it) and added into .grad after.
    const Bytes grad_bytes = elements(piece.numel, Dtype::kFp32);
    const bool first = !has_grad_[p];
    const bool tied = tied_piece_ == p;
    if (grad_is_bucket_view_[p]) {
      // AccumulateGrad adds into .grad, the bucket view; the Reducer divides it in place (a
      // compress hook divides the whole bucket instead).
      const TensorId added = tied ? tied_share_
                                  : s_.allocate(piece.name + ".new_grad", grad_bytes, s_.compute(),
                                                MemoryCategory::kGradients);
      if (piece.cast && !tied) gradient_to_fp32(p);
      s_.copy(piece.name + ".accumulate_grad", s_.compute(), 3 * grad_bytes, Phase::kBackward, g);
      s_.free(added);
      if (!sync_) return;
      if (f_.reduce_dtype == Dtype::kFp32) {
        s_.copy(piece.name + ".divide_in_bucket", s_.compute(), 2 * grad_bytes, Phase::kBackward,
                g);
      }
      if (++ready_[piece.bucket] == buckets_[piece.bucket].pieces.size()) all_reduce(piece.bucket);
      return;
    }
    const TensorId grad = tied ? tied_share_
                               : s_.allocate(piece.name + (first ? ".grad" : ".new_grad"),
                                             grad_bytes, s_.compute(), MemoryCategory::kGradients);
    if (piece.cast && !tied) gradient_to_fp32(p);
    if (first) {
      grads_[p] = grad;
      has_grad_[p] = true;
    } else {
      s_.copy(piece.name + ".accumulate_grad", s_.compute(), 3 * grad_bytes, Phase::kBackward, g);
      s_.free(grad);
    }
    if (!sync_) return;
    s_.copy(piece.name + ".copy_to_bucket", s_.compute(), 2 * grad_bytes, Phase::kBackward, g);
    if (f_.ddp_gradient_as_bucket_view) {  // grad = bucket_view: the copied gradient goes
      s_.free(grads_[p]);
      has_grad_[p] = false;
      grad_is_bucket_view_[p] = true;
    }
    if (++ready_[piece.bucket] == buckets_[piece.bucket].pieces.size()) all_reduce(piece.bucket);
  }

  void all_reduce(std::size_t b) {
    const std::int64_t n = buckets_[b].numel;
    const std::int32_t g = group(b);
    const std::string name = "bucket." + std::to_string(b);
    const Dtype rd = f_.reduce_dtype;
    if (rd == Dtype::kFp32) {
      s_.program().wait_stream(nccl_, s_.compute());
      s_.collective(name + ".all_reduce", Collective::kAllReduce, nccl_, world_, elements(n, rd),
                    Phase::kBackward, g);
      reduced_[b] = s_.program().record_event(nccl_);
      return;
    }
    // _compress_hook (torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py), called from
    // the autograd hook on the compute stream: buffer.to(dtype).div_(world_size), a cast and an
    // in-place divide; the all-reduce's future then copies the result back into the bucket
    // (decompress) in its callback, on a stream of the pool that first waits for the
    // all-reduce, so the next bucket's all-reduce does not queue behind it.
    const TensorId compressed = s_.allocate(name + ".compressed", elements(n, rd), s_.compute(),
                                            MemoryCategory::kCommunication);
    s_.copy(name + ".compress", s_.compute(), elements(n, Dtype::kFp32) + 3 * elements(n, rd),
            Phase::kBackward, g);
    s_.program().wait_stream(nccl_, s_.compute());
    s_.collective(name + ".all_reduce", Collective::kAllReduce, nccl_, world_, elements(n, rd),
                  Phase::kBackward, g);
    s_.program().wait_stream(*callback_, nccl_);
    s_.copy(name + ".decompress", *callback_, elements(n, Dtype::kFp32) + elements(n, rd),
            Phase::kBackward, g);
    reduced_[b] = s_.program().record_event(*callback_);
    s_.free(compressed, reduced_[b]);  // record_stream by ProcessGroupNCCL and the callback
  }

  void optimizer_step() {
    std::vector<std::pair<std::string, std::int64_t>> tensors;
    std::vector<std::vector<std::int64_t>> parameters;
    for (const models::Layer& l : s_.workload().layers) {
      tensors.emplace_back(l.name, l.numel);
      parameters.push_back(l.parameter_numels);
    }
    // The all-reduced gradients are identical on every rank: the local norm is the total.
    if (in_.training.clip_grad_norm) {
      s_.clip_gradients(tensors, GradientClipping{{}, /*foreach=*/true}, /*on_host=*/false);
    }
    s_.gpu_optimizer(tensors, parameters);
    for (std::size_t p = 0; p < grads_.size(); ++p) {
      if (has_grad_[p]) s_.free(grads_[p]);  // made and read on the compute stream
      has_grad_[p] = false;
      grad_is_bucket_view_[p] = false;  // zero_grad(set_to_none=True) drops the views too
    }
  }

  const ScheduleInput& in_;
  const FsdpConfig& f_;
  StepBuilder s_;
  StreamId nccl_;
  std::optional<StreamId> callback_;  // the compress hook's future callbacks (a pool stream)
  ProcessGroup world_;
  bool autocast_;
  std::vector<GradPiece> pieces_;
  std::vector<LayerPieces> layer_pieces_;
  std::optional<std::size_t> tied_piece_;
  std::vector<Bucket> buckets_;
  std::vector<BufferBucket> buffer_buckets_;  // empty without buffers or broadcast_buffers
  std::vector<TensorId> grads_;               // per piece: its .grad
  std::vector<bool> has_grad_;                // per piece
  std::vector<bool> grad_is_bucket_view_;     // per piece: .grad is its bucket's view
  std::vector<TensorId> cast_copies_;         // per cast piece: its autocast copy
  std::vector<std::size_t> ready_;            // per bucket: gradients in it this micro-batch
  std::vector<engine::EventRef> reduced_;     // per bucket: its all-reduce done, on the NCCL stream
  TensorId tied_share_ = 0;  // the tied table's gradient from its reader, until AccumulateGrad
  bool sync_ = true;
  bool buffers_need_sync_ = true;  // require_forward_param_sync
  bool recast_pending_ = false;
};

}  // namespace

Schedule build_ddp_schedule(const ScheduleInput& input) { return DdpStep(input).build(); }

}  // namespace fsdpsim::fsdp
