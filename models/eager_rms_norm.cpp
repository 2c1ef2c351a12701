// Eager RMSNorm kernels, bytes and saved tensors (see eager_rms_norm.hpp for the code each form
// mirrors). Bytes follow kernel_factory.hpp's convention: what the kernel reads plus what it
// writes. Backward runs autograd's formulas (tools/autograd/derivatives.yaml,
// torch/csrc/autograd/FunctionsManual.cpp) kernel by kernel: in bf16, 36 bytes per element of the
// input forward in 8 kernels, 92 backward in 16, against the fused kernel's 4 and 10.
#include "models/eager_rms_norm.hpp"

namespace fsdpsim::models::detail {
namespace {

struct NormSizes {
  std::int64_t x = 0;    // T*width in the compute dtype
  std::int64_t x32 = 0;  // T*width in fp32
  std::int64_t row = 0;  // T fp32 values (variance, rsqrt)
  std::int64_t weight = 0;
  bool casts = false;  // half-precision compute: the casts to and from fp32 run
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

// The Llama form multiplies the fp32 copy; T5's multiplies the input itself.
bool multiplies_fp32_copy(NormKind kind) { return kind == NormKind::kEagerRmsNorm; }

}  // namespace

std::int64_t append_eager_rms_norm_forward(LayerDraft& draft, const std::string& name,
                                           NormKind kind, std::int64_t width,
                                           const BuildContext& ctx) {
  const NormSizes s = sizes(width, ctx);
  const bool copy_multiplied = multiplies_fp32_copy(kind);
  TransientTracker& temps = draft.forward_temps();
  if (s.casts) draft.forward(memory_bound_kernel(name + "_to_fp32", s.x + s.x32, ctx));
  // pow saves its input (and the Llama form's multiply the same tensor); in fp32 that is x, which
  // T5's multiply saves below.
  if (s.casts || copy_multiplied) draft.save(s.x32);
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
  // The multiply saves its operands: rsqrt's result, and T5's the input.
  if (!copy_multiplied) draft.save(s.x);
  draft.save(s.row);
  draft.forward(
      memory_bound_kernel(name + "_mul", (copy_multiplied ? s.x32 : s.x) + s.row + s.x32, ctx));
  temps.allocate(s.x32);
  if (s.casts) {
    draft.forward(memory_bound_kernel(name + (copy_multiplied ? "_type_as" : "_to_weight_dtype"),
                                      s.x32 + s.x, ctx));
    temps.release(s.x32);
    draft.save(s.x);  // the weight multiply saves the normalized input
  } else {
    temps.release(s.x32);
    draft.save(s.x32);
  }
  draft.forward(memory_bound_kernel(name + "_weight", 2 * s.x + s.weight, ctx));
  // The input itself is saved by T5's multiply, or, already fp32, by the Llama form's pow (its
  // .to(torch.float32) returns it); a narrower input is saved only as its fp32 copy.
  if (!copy_multiplied) return s.x;
  return s.casts ? 0 : s.x32;
}

void append_eager_rms_norm_backward(LayerDraft& draft, const std::string& name, NormKind kind,
                                    std::int64_t width, const BuildContext& ctx) {
  const NormSizes s = sizes(width, ctx);
  const bool copy_multiplied = multiplies_fp32_copy(kind);
  TransientTracker& temps = draft.backward_temps();
  const auto kernel = [&](const std::string& suffix, std::int64_t bytes) {
    draft.backward(memory_bound_kernel(name + suffix, bytes, ctx));
  };
  // weight * y (MulBackward0): the weight's gradient is dy * y over every token, summed to the
  // weight's shape afterwards (the engine's sum_to, validate_outputs); y's is dy * weight.
  kernel("_weight_wgrad_mul", 3 * s.x);
  temps.allocate(s.x);
  kernel("_weight_dgrad", 2 * s.x + s.weight);
  temps.allocate(s.x);
  kernel("_weight_wgrad_sum", s.x + s.weight);
  temps.release(s.x);       // the product, reduced
  std::int64_t grad = s.x;  // the live gradient of the current intermediate
  if (s.casts) {
    kernel(copy_multiplied ? "_type_as_bwd" : "_to_weight_dtype_bwd", s.x + s.x32);
    temps.allocate(s.x32);
    temps.release(grad);
    grad = s.x32;
  }
  // The multiply operand * r: g * r for the operand (fp32; cast to x's dtype at once when the
  // operand is T5's x, as mul_tensor_backward does), and for r, g * operand over every element,
  // summed over the row.
  kernel("_mul_dgrad_x", grad + s.row + s.x32);
  temps.allocate(s.x32);
  if (!copy_multiplied && s.casts) {
    kernel("_mul_dgrad_x_cast", s.x32 + s.x);
    temps.allocate(s.x);
    temps.release(s.x32);
  }
  kernel("_mul_dgrad_rsqrt_mul", grad + (copy_multiplied ? s.x32 : s.x) + s.x32);
  temps.allocate(s.x32);
  kernel("_mul_dgrad_rsqrt_sum", s.x32 + s.row);
  temps.allocate(s.row);
  temps.release(s.x32);  // the product, reduced
  temps.release(grad);
  // rsqrt: -0.5 * grad * result.pow(3) (derivatives.yaml), three kernels over the row.
  kernel("_rsqrt_bwd_scale", 2 * s.row);
  kernel("_rsqrt_bwd_pow", 2 * s.row);
  kernel("_rsqrt_bwd_mul", 3 * s.row);
  // mean: the row gradient expanded over the row and divided by its length (one kernel).
  kernel("_mean_bwd", s.row + s.x32);
  temps.allocate(s.x32);
  temps.release(s.row);
  // pow(2): grad * (2 * x32.pow(1)) (pow_backward; pow by 1 is a copy), three kernels.
  kernel("_pow_bwd_copy", 2 * s.x32);
  temps.allocate(s.x32);
  kernel("_pow_bwd_scale", 2 * s.x32);
  temps.allocate(s.x32);
  temps.release(s.x32);  // the copy
  kernel("_pow_bwd_mul", 3 * s.x32);
  temps.allocate(s.x32);
  temps.release(s.x32);  // 2 * x32
  temps.release(s.x32);  // the mean's gradient
  if (copy_multiplied) {
    // Both gradients reach the fp32 copy, where autograd sums them in place
    // (torch/csrc/autograd/input_buffer.cpp); the copy's backward casts the sum to x's dtype.
    kernel("_grad_sum", 3 * s.x32);
    temps.release(s.x32);
    if (s.casts) {
      kernel("_to_fp32_bwd", s.x32 + s.x);
      temps.allocate(s.x);
      temps.release(s.x32);
      temps.release(s.x);  // the input gradient: the caller's
    } else {
      temps.release(s.x32);  // the input gradient: the caller's
    }
    return;
  }
  // T5: the variance's gradient reaches x through the fp32 copy's cast, the multiply's directly;
  // autograd sums the two in x's dtype.
  if (s.casts) {
    kernel("_to_fp32_bwd", s.x32 + s.x);
    temps.allocate(s.x);
    temps.release(s.x32);
  }
  draft.backward(add_kernel(name + "_grad_sum", width, ctx));
  temps.release(s.x);
  temps.release(s.x);  // the input gradient: the caller's
}

}  // namespace fsdpsim::models::detail
