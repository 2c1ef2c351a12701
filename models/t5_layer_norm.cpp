// T5LayerNorm kernels, bytes and saved tensors (see t5_layer_norm.hpp for the code it mirrors).
// Bytes follow kernel_factory.hpp's convention: what the kernel reads plus what it writes.
#include "models/t5_layer_norm.hpp"

#include "models/kernel_factory.hpp"

namespace fsdpsim::models::detail {
namespace {

struct NormSizes {
  std::int64_t x = 0;    // T*width in the compute dtype
  std::int64_t x32 = 0;  // T*width in fp32
  std::int64_t row = 0;  // T fp32 values (variance, rsqrt)
  std::int64_t weight = 0;
  bool casts = false;  // half-precision compute: the to(float32) and to(weight.dtype) run
};

NormSizes sizes(std::int64_t width, const BuildContext& ctx) {
  NormSizes s;
  s.x = ctx.tokens * width * ctx.element_bytes;
  s.x32 = ctx.tokens * width * kStatBytes;
  s.row = ctx.tokens * kStatBytes;
  s.weight = width * ctx.element_bytes;
  s.casts = ctx.element_bytes < kStatBytes;
  return s;
}

}  // namespace

void append_t5_norm_forward(LayerDraft& draft, const std::string& name, std::int64_t width,
                            const BuildContext& ctx) {
  const NormSizes s = sizes(width, ctx);
  TransientTracker& temps = draft.forward_temps();
  if (s.casts) {
    draft.forward(memory_bound_kernel(name + "_to_fp32", s.x + s.x32, ctx));
    draft.save(s.x32);  // pow saves its input
  }
  draft.forward(memory_bound_kernel(name + "_pow", 2 * s.x32, ctx));
  temps.allocate(s.x32);
  draft.forward(memory_bound_kernel(name + "_mean", s.x32 + s.row, ctx));
  temps.allocate(s.row);
  temps.release(s.x32);
  draft.forward(memory_bound_kernel(name + "_add_eps", 2 * s.row, ctx));
  temps.allocate(s.row);
  temps.release(s.row);
  draft.forward(memory_bound_kernel(name + "_rsqrt", 2 * s.row, ctx));
  temps.release(s.row);
  draft.save(s.x + s.row);  // mul saves x and rsqrt (x is the block's residual input)
  draft.forward(memory_bound_kernel(name + "_mul", s.x + s.row + s.x32, ctx));
  temps.allocate(s.x32);
  if (s.casts) {
    draft.forward(memory_bound_kernel(name + "_to_weight_dtype", s.x32 + s.x, ctx));
    temps.release(s.x32);
    draft.save(s.x);  // the weight multiply saves the normalized input
  } else {
    temps.release(s.x32);
    draft.save(s.x32);
  }
  draft.forward(memory_bound_kernel(name + "_weight", 2 * s.x + s.weight, ctx));
}

void append_t5_norm_backward(LayerDraft& draft, const std::string& name, std::int64_t width,
                             const BuildContext& ctx) {
  const NormSizes s = sizes(width, ctx);
  TransientTracker& temps = draft.backward_temps();
  // weight * y: dy * weight for y, sum over tokens of dy * y for the weight.
  draft.backward(memory_bound_kernel(name + "_weight_dgrad", 2 * s.x + s.weight, ctx));
  temps.allocate(s.x);
  draft.backward(memory_bound_kernel(name + "_weight_wgrad", 2 * s.x + s.weight, ctx));
  std::int64_t grad = s.x;  // the live gradient of the current intermediate
  if (s.casts) {
    draft.backward(memory_bound_kernel(name + "_to_weight_dtype_bwd", s.x + s.x32, ctx));
    temps.allocate(s.x32);
    temps.release(grad);
    grad = s.x32;
  }
  // x * r: g * r for x (then cast to x's dtype), sum(g * x) over the row for r.
  draft.backward(memory_bound_kernel(name + "_mul_dgrad_x", grad + s.row + s.x32, ctx));
  temps.allocate(s.x32);
  draft.backward(memory_bound_kernel(name + "_mul_dgrad_rsqrt", grad + s.x + s.row, ctx));
  temps.allocate(s.row);
  temps.release(grad);
  draft.backward(memory_bound_kernel(name + "_rsqrt_bwd", 3 * s.row, ctx));
  // mean backward expands the row gradient; pow backward multiplies by 2 * x (fp32 copy).
  draft.backward(memory_bound_kernel(name + "_mean_bwd", s.row + s.x32, ctx));
  temps.allocate(s.x32);
  temps.release(s.row);
  draft.backward(memory_bound_kernel(name + "_pow_bwd", 3 * s.x32, ctx));
  if (s.casts) {
    draft.backward(memory_bound_kernel(name + "_to_fp32_bwd", s.x32 + s.x, ctx));
    draft.backward(memory_bound_kernel(name + "_mul_dgrad_x_cast", s.x32 + s.x, ctx));
  }
  temps.allocate(s.x);  // the input gradient, left for the caller ...
  temps.release(2 * s.x32);
  // ... once the two paths to x are summed (autograd input_buffer.cpp accumulates in place).
  draft.backward(add_kernel(name + "_grad_sum", width, ctx));
}

}  // namespace fsdpsim::models::detail
