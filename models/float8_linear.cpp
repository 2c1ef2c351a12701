// Bytes of the float8 kernels. Sources:
//  * torchao/float8/float8_scaling_utils.py hp_tensor_to_float8_dynamic: amax = max(abs(x))
//    over the whole tensor (tensorwise), scale = fp8_max / amax (amax_to_scale), then
//    to_fp8_saturated(x * scale). A full reduction must finish before the cast can scale, so each
//    cast is two kernels even when compiled: the amax pass reads the tensor and writes one fp32
//    scalar; the cast reads the tensor and the scale and writes one byte per element.
//  * torchtitan documents torch.compile as required with float8 ("fuses float8 scaling/casting
//    kernels"; TransformerEngine ships the same casts as fused kernels), so each pass is priced as
//    one kernel, not as eager PyTorch's abs, max, mul, clamp and to() launches.
//  * torch._scaled_mm takes A row-major and B column-major: the forward operands X and W^T already
//    are; backward needs dY^T, W^T and X^T in the other layout, which the cast writes directly
//    (the transpose fuses into the cast kernel). torchao casts dY twice with the same tensorwise
//    scale (grad_output dim0 and dim1); AOTAutograd's CSE (torch._functorch.config.cse) merges the
//    two identical amax reductions and Inductor the two casts of one tensor into one kernel that
//    writes both layouts.
//  * The weight's amax is recomputed in backward (torchao: "we need pytorch#136267 ... to reuse
//    max(abs(weight)) from the forward"), and so is the input's (autograd saved input_hp).
//  * GEMMs read fp8 operands and write the high-precision output (the linear's output dtype).
#include "models/float8_linear.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "models/forward_rewrite.hpp"

namespace fsdpsim::models {
namespace {

constexpr std::int64_t kScaleBytes = 4;  // one fp32 scale per tensor
constexpr std::int64_t kFp8Bytes = dtype_bytes(Dtype::kFp8);

// The linear Y[tokens, out] = X[tokens, in] W[out, in]^T behind one of its GEMMs.
struct LinearShape {
  std::int64_t tokens = 0;
  std::int64_t in = 0;
  std::int64_t out = 0;
};

// kernel_factory.hpp: forward {m=T, n=out, k=in}, dgrad {m=T, n=in, k=out}, wgrad {m=in, n=out,
// k=T}.
std::optional<LinearShape> linear_shape(const NamedKernel& k) {
  const GemmShape& g = k.kernel.gemm;
  switch (k.linear) {
    case LinearPass::kNone:
      return std::nullopt;
    case LinearPass::kForward:
      return LinearShape{g.m, g.k, g.n};
    case LinearPass::kInputGrad:
      return LinearShape{g.m, g.n, g.k};
    case LinearPass::kWeightGrad:
      return LinearShape{g.k, g.m, g.n};
  }
  return std::nullopt;
}

NamedKernel memory_bound(std::string name, std::int64_t bytes, Dtype dtype, bool ends_fusion) {
  NamedKernel k;
  k.name = std::move(name);
  k.kernel.kind = KernelKind::kMemoryBound;
  k.kernel.dtype = dtype;
  k.kernel.bytes = Bytes(bytes);
  k.ends_fusion = ends_fusion;
  return k;
}

// The amax reduction and the cast of one high-precision tensor of `elements` elements, the cast
// writing `layouts` fp8 copies. Both end a fused kernel: the cast needs the finished reduction,
// and what follows a cast (another tensor's amax, a GEMM) shares no read with it (Inductor fuses
// only nodes with common reads unless config.aggressive_fusion, torch/_inductor/config.py).
void append_cast(std::vector<NamedKernel>& out, const std::string& prefix, const char* tensor,
                 std::int64_t elements, std::int64_t layouts, Dtype hp, std::int64_t e) {
  out.push_back(memory_bound(prefix + "_amax_" + tensor, e * elements + kScaleBytes, hp, true));
  out.push_back(memory_bound(prefix + "_cast_" + tensor,
                             e * elements + kScaleBytes + layouts * elements * kFp8Bytes, hp,
                             true));
}

NamedKernel fp8_gemm(NamedKernel k, std::int64_t a_elements, std::int64_t b_elements,
                     std::int64_t c_elements) {
  const std::int64_t e = dtype_bytes(k.kernel.dtype);
  k.kernel.dtype = Dtype::kFp8;
  k.kernel.bytes = Bytes((a_elements + b_elements) * kFp8Bytes + c_elements * e);
  return k;
}

// Appends the float8 version of `k` to `out`; returns the fp8 operand bytes alive at its GEMM
// that it made (an all-gathered float8 weight is the unsharded parameter, FSDP's).
std::int64_t append_float8_kernels(std::vector<NamedKernel>& out, const NamedKernel& k,
                                   const LinearShape& s, Float8Weight weight,
                                   std::int64_t weight_bytes) {
  const Dtype hp = k.kernel.dtype;
  const std::int64_t e = dtype_bytes(hp);
  const std::int64_t x = s.tokens * s.in;
  const std::int64_t w = s.out * s.in;
  const std::int64_t dy = s.tokens * s.out;
  const bool cast_weight = weight == Float8Weight::kCastAtEachUse;
  const std::int64_t cast_w = cast_weight ? w : 0;
  switch (k.linear) {
    case LinearPass::kForward: {
      append_cast(out, k.name, "input", x, 1, hp, e);
      if (cast_weight) append_cast(out, k.name, "weight", w, 1, hp, weight_bytes);
      out.push_back(fp8_gemm(k, x, w, dy));
      if (k.linear_bias) {
        // torch._scaled_mm without the bias, then output + bias.to(output.dtype): reads Y and
        // the bias, writes Y.
        out.push_back(
            memory_bound(k.name + "_bias", (2 * dy + s.out) * dtype_bytes(hp), hp, false));
      }
      return x + cast_w;
    }
    case LinearPass::kInputGrad: {
      append_cast(out, k.linear_module, "grad_output", dy, 2, hp, e);
      if (cast_weight) append_cast(out, k.linear_module, "weight_bwd", w, 1, hp, weight_bytes);
      out.push_back(fp8_gemm(k, dy, w, x));
      return 2 * dy + cast_w;
    }
    case LinearPass::kWeightGrad: {
      append_cast(out, k.linear_module, "input_bwd", x, 1, hp, e);
      out.push_back(fp8_gemm(k, dy, x, w));
      return dy + x;  // the transposed dY copy and X^T
    }
    case LinearPass::kNone:
      break;
  }
  out.push_back(k);
  return 0;
}

// append_float8_kernels, with every kernel it adds (casts, bias) run inside k's linear module.
std::int64_t append_float8(std::vector<NamedKernel>& out, const NamedKernel& k,
                           const LinearShape& s, Float8Weight weight,
                           std::optional<Dtype> weight_dtype) {
  const std::size_t first = out.size();
  const std::int64_t operands =
      append_float8_kernels(out, k, s, weight, dtype_bytes(weight_dtype.value_or(k.kernel.dtype)));
  for (std::size_t i = first; i < out.size(); ++i) out[i].linear_module = k.linear_module;
  return operands;
}

bool convertible(const NamedKernel& k, std::optional<LinearShape>& shape) {
  shape = linear_shape(k);
  return shape && k.kernel.dtype != Dtype::kFp8 && float8_eligible(shape->in, shape->out);
}

}  // namespace

bool float8_eligible(std::int64_t in_features, std::int64_t out_features) {
  return in_features % 16 == 0 && out_features % 16 == 0;
}

bool becomes_float8(const NamedKernel& k) {
  std::optional<LinearShape> shape;
  return convertible(k, shape);
}

void convert_linears_to_float8(Layer& layer, Float8Weight weight,
                               std::optional<Dtype> weight_dtype) {
  std::int64_t forward_operands = 0;
  detail::rewrite_forward(layer, [&](const NamedKernel& k, std::vector<NamedKernel>& out) {
    std::optional<LinearShape> shape;
    if (convertible(k, shape)) {
      forward_operands =
          std::max(forward_operands, append_float8(out, k, *shape, weight, weight_dtype));
    } else {
      out.push_back(k);
    }
  });
  std::vector<NamedKernel> backward;
  std::int64_t backward_operands = 0;
  for (const NamedKernel& k : layer.backward) {
    std::optional<LinearShape> shape;
    if (convertible(k, shape)) {
      backward_operands =
          std::max(backward_operands, append_float8(backward, k, *shape, weight, weight_dtype));
    } else {
      backward.push_back(k);
    }
  }
  layer.backward = std::move(backward);
  add_transient(layer, Pass::kForward, Bytes(forward_operands));
  add_transient(layer, Pass::kBackward, Bytes(backward_operands));
}

}  // namespace fsdpsim::models
