#include "models/kernel_factory.hpp"

#include <utility>

#include "models/eager_rms_norm.hpp"

namespace fsdpsim::models::detail {
namespace {

// The kinds models/eager_rms_norm.cpp runs op by op.
bool runs_eagerly(NormKind kind) {
  return kind == NormKind::kEagerRmsNorm || kind == NormKind::kEagerT5RmsNorm;
}

std::int64_t norm_param_vectors(NormKind kind) { return kind == NormKind::kLayerNorm ? 2 : 1; }
std::int64_t norm_stats_per_token(NormKind kind) { return kind == NormKind::kLayerNorm ? 2 : 1; }

}  // namespace

NamedKernel gemm_kernel(std::string name, GemmShape shape, const BuildContext& ctx) {
  return {std::move(name), fsdpsim::gemm_kernel(shape, ctx.gemm_dtype)};
}

NamedKernel causal_attention_gemm(std::string name, GemmShape shape, const BuildContext& ctx) {
  constexpr double kCausalFraction = 0.5;
  NamedKernel k = gemm_kernel(std::move(name), shape, ctx);
  k.model_flops_fraction = kCausalFraction;
  return k;
}

NamedKernel memory_bound_kernel(std::string name, std::int64_t bytes, const BuildContext& ctx) {
  Kernel k;
  k.kind = KernelKind::kMemoryBound;
  k.dtype = ctx.dtype;
  k.flops = Flops(0.0);
  k.bytes = Bytes(bytes);
  return {std::move(name), k};
}

NamedKernel opaque_compute_kernel(std::string name, double flops, const BuildContext& ctx) {
  Kernel k;
  k.kind = KernelKind::kGemm;
  k.dtype = ctx.gemm_dtype;
  k.gemm = GemmShape{0, 0, 0, 1};
  k.flops = Flops(flops);
  k.bytes = Bytes(0);
  return {std::move(name), k};
}

NamedKernel linear_forward(std::string name, LinearDims dims, const BuildContext& ctx) {
  NamedKernel k = gemm_kernel(name, GemmShape{ctx.tokens, dims.out, dims.in, 1}, ctx);
  k.linear_module = std::move(name);
  k.linear = LinearPass::kForward;
  k.linear_bias = dims.bias;
  k.output_bytes = ctx.tokens * dims.out * ctx.element_bytes;
  return k;
}

void append_linear_backward(LayerDraft& draft, const std::string& name, LinearDims dims,
                            const BuildContext& ctx) {
  // dX[T,in] = dY[T,out] W[out,in]; dW[in,out] = X^T[in,T] dY[T,out] (stored transposed in
  // PyTorch, same product).
  NamedKernel dgrad =
      gemm_kernel(name + "_dgrad", GemmShape{ctx.tokens, dims.in, dims.out, 1}, ctx);
  dgrad.linear = LinearPass::kInputGrad;
  dgrad.linear_module = name;
  draft.backward(std::move(dgrad));
  NamedKernel wgrad =
      gemm_kernel(name + "_wgrad", GemmShape{dims.in, dims.out, ctx.tokens, 1}, ctx);
  wgrad.linear = LinearPass::kWeightGrad;
  wgrad.linear_module = name;
  draft.backward(std::move(wgrad));
  if (dims.bias) {
    NamedKernel bgrad = memory_bound_kernel(
        name + "_bgrad", (ctx.tokens * dims.out + dims.out) * ctx.element_bytes, ctx);
    // The next kernel (the previous op's backward) reads dX, not dY: no common read to fuse on.
    bgrad.ends_fusion = true;
    bgrad.linear_module = name;
    draft.backward(std::move(bgrad));
  }
}

std::int64_t append_norm_forward(LayerDraft& draft, const std::string& name, NormKind kind,
                                 std::int64_t width, const BuildContext& ctx) {
  if (runs_eagerly(kind)) return append_eager_rms_norm_forward(draft, name, kind, width, ctx);
  const std::int64_t act = ctx.tokens * width * ctx.element_bytes;
  const std::int64_t stats = ctx.tokens * norm_stats_per_token(kind) * kStatBytes;
  const std::int64_t params = norm_param_vectors(kind) * width * ctx.element_bytes;
  // Reads x and the affine parameters, writes y and the statistics.
  NamedKernel forward = memory_bound_kernel(name, act + params + act + stats, ctx);
  forward.kernel.norm =
      kind == NormKind::kLayerNorm ? NormPass::kLayerNormForward : NormPass::kRmsNormForward;
  draft.forward(std::move(forward));
  // Autograd saves the input and the statistics (native_layer_norm saves input, mean, rstd).
  draft.save(act);
  for (std::int64_t i = 0; i < norm_stats_per_token(kind); ++i) draft.save(ctx.tokens * kStatBytes);
  return act;
}

void append_norm_backward(LayerDraft& draft, const std::string& name, NormKind kind,
                          std::int64_t width, const BuildContext& ctx, std::int64_t dx_handoff) {
  if (runs_eagerly(kind)) {
    append_eager_rms_norm_backward(draft, name, kind, width, ctx);
    return;
  }
  const std::int64_t act = ctx.tokens * width * ctx.element_bytes;
  const std::int64_t stats = ctx.tokens * norm_stats_per_token(kind) * kStatBytes;
  const std::int64_t params = norm_param_vectors(kind) * width * ctx.element_bytes;
  const std::int64_t weight = width * ctx.element_bytes;
  // Reads dy, x, the statistics and the weight; writes dx.
  NamedKernel input_grad = memory_bound_kernel(name + "_bwd", 2 * act + stats + weight + act, ctx);
  input_grad.kernel.norm = NormPass::kInputGrad;
  input_grad.handoff_bytes = dx_handoff;
  draft.backward(std::move(input_grad));
  // Reads dy and x again; writes the parameter gradients.
  NamedKernel weight_grad = memory_bound_kernel(name + "_bwd_weight", 2 * act + params, ctx);
  weight_grad.kernel.norm =
      kind == NormKind::kLayerNorm ? NormPass::kLayerNormWeightGrad : NormPass::kRmsNormWeightGrad;
  draft.backward(std::move(weight_grad));
}

NamedKernel handed_off(NamedKernel kernel, std::int64_t output_bytes) {
  kernel.handoff_bytes = output_bytes;
  return kernel;
}

BuildContext residual_context(const BuildContext& ctx) {
  BuildContext wide = ctx;
  wide.element_bytes = ctx.residual_bytes;
  return wide;
}

NamedKernel cast_kernel(std::string name, std::int64_t width, std::int64_t from_bytes,
                        std::int64_t to_bytes, const BuildContext& ctx) {
  return memory_bound_kernel(std::move(name), ctx.tokens * width * (from_bytes + to_bytes), ctx);
}

NamedKernel residual_add_kernel(std::string name, std::int64_t width, const BuildContext& ctx) {
  return memory_bound_kernel(
      std::move(name), ctx.tokens * width * (2 * ctx.residual_bytes + ctx.element_bytes), ctx);
}

NamedKernel add_kernel(std::string name, std::int64_t width, const BuildContext& ctx) {
  return memory_bound_kernel(std::move(name), 3 * ctx.tokens * width * ctx.element_bytes, ctx);
}

NamedKernel dropout_forward(std::string name, std::int64_t width, const BuildContext& ctx) {
  const std::int64_t n = ctx.tokens * width;
  return memory_bound_kernel(std::move(name), 2 * n * ctx.element_bytes + n * kMaskBytes, ctx);
}

NamedKernel dropout_backward(std::string name, std::int64_t width, const BuildContext& ctx) {
  const std::int64_t n = ctx.tokens * width;
  return memory_bound_kernel(std::move(name), 2 * n * ctx.element_bytes + n * kMaskBytes, ctx);
}

NamedKernel unary_forward(std::string name, std::int64_t width, const BuildContext& ctx) {
  return memory_bound_kernel(std::move(name), 2 * ctx.tokens * width * ctx.element_bytes, ctx);
}

NamedKernel unary_backward(std::string name, std::int64_t width, const BuildContext& ctx) {
  return memory_bound_kernel(std::move(name), 3 * ctx.tokens * width * ctx.element_bytes, ctx);
}

void append_embedding_backward(LayerDraft& draft, const std::string& name, std::int64_t rows,
                               std::int64_t width, std::int64_t lookups,
                               bool adds_to_earlier_gradient, const BuildContext& ctx) {
  const std::int64_t table = rows * width * ctx.element_bytes;
  draft.backward(memory_bound_kernel(name + "_grad_zero", table, ctx));
  // The partial sums are in acc_type<scalar_t>: float for bf16, fp16 and fp32 gradients.
  constexpr std::int64_t kPartialBytes = 4;
  const std::int64_t partials = lookups * width * kPartialBytes;
  const std::int64_t gradient_rows = lookups * width * ctx.element_bytes;
  draft.backward_temps().allocate(partials);
  draft.backward(memory_bound_kernel(
      name + "_bwd", 2 * lookups * kIndexBytes + 2 * gradient_rows + 2 * partials, ctx));
  draft.backward_temps().release(partials);
  if (adds_to_earlier_gradient) {
    draft.backward(memory_bound_kernel(name + "_grad_accumulate", 3 * table, ctx));
  }
}

}  // namespace fsdpsim::models::detail
