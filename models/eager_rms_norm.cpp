// Eager RMSNorm kernels, bytes and saved tensors (see eager_rms_norm.hpp for the code each form
// mirrors). Bytes follow kernel_factory.hpp's convention: what the kernel reads plus what it
// writes. The weight gradient (MulBackward0 of weight * y, then sum_to_size over the tokens) and
// the rsqrt gradient (the multiply's, summed over the row) are each counted as one kernel
// reading the two operands.
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

void append_eager_rms_norm_forward(LayerDraft& draft, const std::string& name, NormKind kind,
                                   std::int64_t width, const BuildContext& ctx) {
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
  draft.save(copy_multiplied ? s.row : s.x + s.row);
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
}

void append_eager_rms_norm_backward(LayerDraft& draft, const std::string& name, NormKind kind,
                                    std::int64_t width, const BuildContext& ctx) {
  const NormSizes s = sizes(width, ctx);
  const bool copy_multiplied = multiplies_fp32_copy(kind);
  TransientTracker& temps = draft.backward_temps();
  // weight * y: dy * weight for y, sum over tokens of dy * y for the weight.
  draft.backward(memory_bound_kernel(name + "_weight_dgrad", 2 * s.x + s.weight, ctx));
  temps.allocate(s.x);
  draft.backward(memory_bound_kernel(name + "_weight_wgrad", 2 * s.x + s.weight, ctx));
  std::int64_t grad = s.x;  // the live gradient of the current intermediate
  if (s.casts) {
    draft.backward(memory_bound_kernel(
        name + (copy_multiplied ? "_type_as_bwd" : "_to_weight_dtype_bwd"), s.x + s.x32, ctx));
    temps.allocate(s.x32);
    temps.release(grad);
    grad = s.x32;
  }
  // The multiply: g * r for its tensor operand, sum(g * operand) over the row for r.
  draft.backward(memory_bound_kernel(name + "_mul_dgrad_x", grad + s.row + s.x32, ctx));
  temps.allocate(s.x32);
  draft.backward(memory_bound_kernel(name + "_mul_dgrad_rsqrt",
                                     grad + (copy_multiplied ? s.x32 : s.x) + s.row, ctx));
  temps.allocate(s.row);
  temps.release(grad);
  draft.backward(memory_bound_kernel(name + "_rsqrt_bwd", 3 * s.row, ctx));
  // mean backward expands the row gradient; pow backward multiplies by 2 * x (fp32 copy).
  draft.backward(memory_bound_kernel(name + "_mean_bwd", s.row + s.x32, ctx));
  temps.allocate(s.x32);
  temps.release(s.row);
  draft.backward(memory_bound_kernel(name + "_pow_bwd", 3 * s.x32, ctx));
  if (copy_multiplied) {
    // Both gradients reach the fp32 copy, where autograd sums them in place
    // (torch/csrc/autograd/input_buffer.cpp); the copy's backward casts the sum to x's dtype.
    draft.backward(memory_bound_kernel(name + "_grad_sum", 3 * s.x32, ctx));
    temps.release(s.x32);
    if (s.casts) {
      draft.backward(memory_bound_kernel(name + "_to_fp32_bwd", s.x32 + s.x, ctx));
      temps.allocate(s.x);
      temps.release(s.x32);
      temps.release(s.x);  // the input gradient: the caller's
    } else {
      temps.release(s.x32);  // the input gradient: the caller's
    }
    return;
  }
  // T5: the variance's gradient reaches x through the fp32 copy's cast, the multiply's directly
  // (cast from the promoted fp32); autograd sums the two in x's dtype.
  if (s.casts) {
    draft.backward(memory_bound_kernel(name + "_to_fp32_bwd", s.x32 + s.x, ctx));
    draft.backward(memory_bound_kernel(name + "_mul_dgrad_x_cast", s.x32 + s.x, ctx));
  }
  temps.allocate(s.x);
  temps.release(2 * s.x32);
  draft.backward(add_kernel(name + "_grad_sum", width, ctx));
  temps.release(s.x);  // the input gradient: the caller's
}

}  // namespace fsdpsim::models::detail
