// PyTorch DistributedDataParallel as the baseline FSDP is compared with, after
// torch/nn/parallel/distributed.py and torch/csrc/distributed/c10d/reducer.cpp:
// - Full replicas: fp32 parameters, fp32 gradients, AdamW states, and the Reducer's flat bucket
//   buffers (gradient_as_bucket_view=False, the default: gradients are copied into them).
// - Buckets: parameters in reverse registration order, closed when they reach bucket_cap_mb
//   (25 MiB; the first bucket 1 MiB, dist._DEFAULT_FIRST_BUCKET_BYTES). We bucket whole layers,
//   so a layer larger than the cap is one bucket (DDP would split it at parameter boundaries:
//   the same bytes in more, smaller all-reduces).
// - When every gradient of a bucket is ready (autograd hook), it is copied into the bucket and
//   all-reduced on the process group's NCCL stream, which first waits for the compute stream;
//   buckets are reduced in order. finalize_backward walks the buckets in order: the compute
//   stream waits for each one's all-reduce and copies it back into .grad, so the copies of the
//   earlier buckets overlap the last all-reduce (Reducer::finalize_backward).
// - Mixed precision is torch.autocast: each forward casts the fp32 weights to param_dtype once
//   (the autocast weight cache), autograd keeps those copies for backward, and the gradients
//   flow back through the cast (ToCopyBackward0) into fp32 .grad. An untied embedding's lookup
//   is not on autocast's lower-precision list (autocast_mode.h): it runs on the fp32 weight,
//   with no cast either way. reduce_dtype below fp32 is the bf16/fp16_compress_hook: cast and
//   divide the bucket on the compute stream, all-reduce half the bytes, copy back.
// - AccumulateGrad: the first micro-batch's gradient becomes .grad as it is; a later one is
//   added into it (accumulate_grad.h).
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

struct Bucket {
  std::vector<std::size_t> layers;  // reverse order, as they become ready
  std::int64_t numel = 0;
};

class DdpStep {
 public:
  explicit DdpStep(const ScheduleInput& input)
      : in_(input),
        f_(input.fsdp),
        s_(input),
        nccl_(s_.add_stream("nccl:world")),
        world_(s_.add_process_group("nccl:world", input.cluster.world_size(), 1)),
        grads_(s_.workload().layers.size()),
        has_grad_(s_.workload().layers.size(), false) {
    make_buckets();
    reduced_.resize(buckets_.size());
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

  void make_buckets() {
    const auto& layers = s_.workload().layers;
    const auto cap =
        static_cast<std::int64_t>(f_.ddp_bucket_cap_mb * static_cast<double>(kBytesPerMiB));
    std::int64_t limit = kFirstBucketBytes;
    bucket_of_layer_.resize(layers.size());
    for (std::size_t i = layers.size(); i-- > 0;) {
      if (buckets_.empty() || 4 * buckets_.back().numel >= limit) {
        if (!buckets_.empty()) limit = cap;
        buckets_.emplace_back();
      }
      buckets_.back().layers.push_back(i);
      buckets_.back().numel += layers[i].numel;
      bucket_of_layer_[i] = buckets_.size() - 1;
    }
  }

  // Whether autocast casts this layer's weights: every layer's under a lower-precision autocast
  // but an untied embedding's (its lookup runs in fp32; a tied one is cast where the LM head's
  // linear uses it, priced here with the embedding layer).
  bool autocast_casts(std::size_t i) const {
    return f_.param_dtype != Dtype::kFp32 &&
           (s_.workload().layers[i].kind != models::LayerKind::kEmbedding || tied_numel_ > 0);
  }

  void micro_batch(bool sync) {
    const auto& layers = s_.workload().layers;
    std::vector<TensorId> saved(layers.size());
    std::vector<TensorId> weights(layers.size());
    for (std::size_t i = 0; i < layers.size(); ++i) {
      if (autocast_casts(i)) {
        weights[i] = s_.allocate(layers[i].name + ".autocast_weights",
                                 elements(layers[i].numel, f_.param_dtype), s_.compute(),
                                 MemoryCategory::kParameters);
        s_.copy(layers[i].name + ".autocast_cast", s_.compute(),
                elements(layers[i].numel, Dtype::kFp32) + elements(layers[i].numel, f_.param_dtype),
                Phase::kForward, static_cast<std::int32_t>(i));
      }
      saved[i] = s_.forward_layer(i, static_cast<std::int32_t>(i));
    }
    std::vector<std::size_t> ready(buckets_.size(), 0);
    for (std::size_t i = layers.size(); i-- > 0;) {
      const auto g = static_cast<std::int32_t>(i);
      s_.backward_layer(i, g, saved[i]);
      // The fp32 gradient (ToCopyBackward0's cast under autocast) is .grad on the first
      // micro-batch (AccumulateGrad steals it) and added into .grad after.
      const Bytes grad_bytes = elements(layers[i].numel, Dtype::kFp32);
      const bool first = !has_grad_[i];
      const TensorId grad = s_.allocate(layers[i].name + (first ? ".grad" : ".new_grad"),
                                        grad_bytes, s_.compute(), MemoryCategory::kGradients);
      if (autocast_casts(i)) {
        s_.copy(layers[i].name + ".grad_to_fp32", s_.compute(),
                elements(layers[i].numel, f_.param_dtype) + grad_bytes, Phase::kBackward, g);
        s_.free(weights[i]);
      }
      if (first) {
        grads_[i] = grad;
        has_grad_[i] = true;
      } else {
        s_.copy(layers[i].name + ".accumulate_grad", s_.compute(), 3 * grad_bytes, Phase::kBackward,
                g);
        s_.free(grad);
      }
      const std::size_t b = bucket_of_layer_[i];
      if (sync && ++ready[b] == buckets_[b].layers.size()) all_reduce(b);
    }
    if (sync) {
      // finalize_backward: each bucket's wait, then its copy back into .grad.
      for (std::size_t b = 0; b < buckets_.size(); ++b) {
        s_.program().wait_event(s_.compute(), reduced_[b]);
        s_.copy("bucket." + std::to_string(b) + ".copy_to_grads", s_.compute(),
                Bytes(8 * buckets_[b].numel), Phase::kBackward,
                static_cast<std::int32_t>(buckets_[b].layers.front()));
      }
    }
  }

  void all_reduce(std::size_t b) {
    const std::int64_t n = buckets_[b].numel;
    const auto g = static_cast<std::int32_t>(buckets_[b].layers.front());
    const std::string name = "bucket." + std::to_string(b);
    s_.copy(name + ".copy_grads_in", s_.compute(), Bytes(8 * n), Phase::kBackward, g);
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
    // (decompress, priced on the NCCL stream).
    const TensorId compressed = s_.allocate(name + ".compressed", elements(n, rd), s_.compute(),
                                            MemoryCategory::kCommunication);
    s_.copy(name + ".compress", s_.compute(), elements(n, Dtype::kFp32) + 3 * elements(n, rd),
            Phase::kBackward, g);
    s_.program().wait_stream(nccl_, s_.compute());
    s_.collective(name + ".all_reduce", Collective::kAllReduce, nccl_, world_, elements(n, rd),
                  Phase::kBackward, g);
    s_.copy(name + ".decompress", nccl_, elements(n, Dtype::kFp32) + elements(n, rd),
            Phase::kBackward, g);
    s_.free(compressed, s_.program().record_event(nccl_));  // record_stream by ProcessGroupNCCL
    reduced_[b] = s_.program().record_event(nccl_);
  }

  void optimizer_step() {
    std::vector<std::pair<std::string, std::int64_t>> tensors;
    for (const models::Layer& l : s_.workload().layers) tensors.emplace_back(l.name, l.numel);
    // The all-reduced gradients are identical on every rank: the local norm is the total.
    if (in_.training.clip_grad_norm) {
      s_.clip_gradients(tensors, GradientClipping{{}, /*foreach=*/true}, /*on_host=*/false);
    }
    s_.gpu_optimizer(tensors);
    for (std::size_t i = 0; i < grads_.size(); ++i) {
      if (has_grad_[i]) s_.free(grads_[i]);  // made and read on the compute stream
      has_grad_[i] = false;
    }
  }

  const ScheduleInput& in_;
  const FsdpConfig& f_;
  StepBuilder s_;
  StreamId nccl_;
  ProcessGroup world_;
  std::vector<Bucket> buckets_;
  std::vector<std::size_t> bucket_of_layer_;
  std::vector<TensorId> grads_;
  std::vector<bool> has_grad_;
  std::vector<engine::EventRef> reduced_;  // per bucket: its all-reduce done, on the NCCL stream
  std::int64_t tied_numel_ = models::tied_weight_numel(s_.workload());
};

}  // namespace

Schedule build_ddp_schedule(const ScheduleInput& input) { return DdpStep(input).build(); }

}  // namespace fsdpsim::fsdp
