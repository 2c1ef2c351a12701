// Bytes of the float8 kernels. Sources:
//  * torchao/float8/float8_scaling_utils.py hp_tensor_to_float8_dynamic: amax = max(abs(x))
//    over the whole tensor (tensorwise), scale = fp8_max / amax (amax_to_scale), then
//    to_fp8_saturated(x * scale). A full reduction must finish before the cast can scale, so each
//    cast is two kernels even when compiled: the amax pass reads the tensor and writes one fp32
//    scalar; the cast reads the tensor and the scale and writes one byte per element.
//  * torchtitan documents torch.compile as required with float8 ("fuses float8 scaling/casting
//    kernels"; TransformerEngine ships the same casts as fused kernels): in a compiled block each
//    pass is priced as one kernel. Elsewhere (no compile, or a layer outside the blocks) the casts
//    run as eager torchao runs them, abs, max, five scalar kernels for the scale, then to(fp32),
//    mul, clamp and to(fp8), each its own launch and tensor (append_cast below).
//  * torch._scaled_mm takes A row-major and B column-major: the forward operands X and W^T already
//    are; backward needs dY^T, W^T and X^T in the other layout, which a compiled cast writes
//    directly (the transpose fuses into the cast kernel) and eager torchao copies
//    (preprocess_addmm's .contiguous()). torchao casts dY twice with the same tensorwise
//    scale (grad_output dim0 and dim1); compiled, AOTAutograd's CSE (torch._functorch.config.cse)
//    merges the two identical amax reductions and Inductor the two casts of one tensor into one
//    kernel that writes both layouts.
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

// How one Float8Linear's kernels are made: its weight's source and dtype, and whether its casts
// are torch.compile's fused kernels or eager torchao's.
struct Float8Conversion {
  Float8Weight weight = Float8Weight::kCastAtEachUse;
  std::optional<Dtype> weight_dtype;  // the weights' own, where wider than the GEMMs'
  Float8Casts casts = Float8Casts::kFused;
};

// What one linear's rewrite makes alive: the fp8 operands at its GEMM and, eager, the fp32
// temporaries of its largest cast. Their sum bounds its peak from above (a cast's temporaries are
// alive beside the operands made before it, not those after).
struct Float8Transients {
  std::int64_t operands = 0;
  std::int64_t cast_temporaries = 0;
  [[nodiscard]] std::int64_t peak() const { return operands + cast_temporaries; }
};

// The amax reduction and the cast of one high-precision tensor of `elements` elements of `e`
// bytes, the cast writing `layouts` fp8 copies. Compiled, both end a fused kernel: the cast needs
// the finished reduction, and what follows a cast (another tensor's amax, a GEMM) shares no read
// with it (Inductor fuses only nodes with common reads unless config.aggressive_fusion,
// torch/_inductor/config.py). Eager (torchao/float8/float8_utils.py, float8_training_tensor.py):
// tensor_to_amax is torch.max(torch.abs(x)); amax_to_scale is amax.to(float64),
// clamp(min=EPS), fp8_max / amax (Tensor.__rtruediv__: reciprocal, then mul) and .to(float32),
// five kernels on one scalar; _ToFloat8ConstrFunc is x.to(float32) * scale, then
// to_fp8_saturated's clamp and .to(float8) -- each its own kernel and tensor, and each layout a
// cast of its own, amax included (no CSE outside torch.compile). Returns the largest fp32
// temporaries alive in it (the scaled tensor and its clamped copy).
std::int64_t append_cast(std::vector<NamedKernel>& out, const std::string& prefix,
                         const char* tensor, std::int64_t elements, std::int64_t layouts, Dtype hp,
                         std::int64_t e, Float8Casts casts) {
  const std::string name = std::string("_") + tensor;
  if (casts == Float8Casts::kFused) {
    out.push_back(memory_bound(prefix + "_amax" + name, e * elements + kScaleBytes, hp, true));
    out.push_back(memory_bound(prefix + "_cast" + name,
                               e * elements + kScaleBytes + layouts * elements * kFp8Bytes, hp,
                               true));
    return 0;
  }
  constexpr std::int64_t kFp32 = 4;
  constexpr std::int64_t kFp64 = 8;
  for (std::int64_t layout = 0; layout < layouts; ++layout) {
    const std::string cast = layout == 0 ? name : name + "_t";
    out.push_back(memory_bound(prefix + "_abs" + cast, 2 * e * elements, hp, true));
    out.push_back(memory_bound(prefix + "_amax" + cast, e * elements + e, hp, true));
    out.push_back(memory_bound(prefix + "_amax_to_fp64" + cast, e + kFp64, hp, true));
    out.push_back(memory_bound(prefix + "_amax_clamp" + cast, 2 * kFp64, hp, true));
    out.push_back(memory_bound(prefix + "_amax_reciprocal" + cast, 2 * kFp64, hp, true));
    out.push_back(memory_bound(prefix + "_scale_mul" + cast, 2 * kFp64, hp, true));
    out.push_back(memory_bound(prefix + "_scale_to_fp32" + cast, kFp64 + kScaleBytes, hp, true));
    if (e != kFp32) {
      out.push_back(memory_bound(prefix + "_to_fp32" + cast, (e + kFp32) * elements, hp, true));
    }
    out.push_back(
        memory_bound(prefix + "_scale" + cast, 2 * kFp32 * elements + kScaleBytes, hp, true));
    out.push_back(memory_bound(prefix + "_clamp" + cast, 2 * kFp32 * elements, hp, true));
    out.push_back(
        memory_bound(prefix + "_to_float8" + cast, (kFp32 + kFp8Bytes) * elements, hp, true));
  }
  return 2 * kFp32 * elements;
}

// Eager torchao's preprocess_addmm (float8_ops.py): torch._scaled_mm takes A row-major and B
// column-major, and an fp8 operand in the other layout is copied first (.contiguous()). Compiled,
// the casts write the layouts the GEMMs read.
void append_layout_copy(std::vector<NamedKernel>& out, const std::string& prefix,
                        const char* operand, std::int64_t elements, Dtype hp) {
  out.push_back(
      memory_bound(prefix + "_contiguous_" + operand, 2 * elements * kFp8Bytes, hp, true));
}

NamedKernel fp8_gemm(NamedKernel k, std::int64_t a_elements, std::int64_t b_elements,
                     std::int64_t c_elements) {
  const std::int64_t e = dtype_bytes(k.kernel.dtype);
  k.kernel.dtype = Dtype::kFp8;
  k.kernel.bytes = Bytes((a_elements + b_elements) * kFp8Bytes + c_elements * e);
  return k;
}

// Appends the float8 version of `k` to `out`; returns the fp8 operand bytes alive at its GEMM
// that it made (an all-gathered float8 weight is the unsharded parameter, FSDP's), and the fp32
// temporaries of its largest eager cast.
Float8Transients append_float8_kernels(std::vector<NamedKernel>& out, const NamedKernel& k,
                                       const LinearShape& s, const Float8Conversion& c) {
  const Dtype hp = k.kernel.dtype;
  const std::int64_t e = dtype_bytes(hp);
  const std::int64_t e_weight = dtype_bytes(c.weight_dtype.value_or(hp));
  const bool eager = c.casts == Float8Casts::kEager;
  const std::int64_t x = s.tokens * s.in;
  const std::int64_t w = s.out * s.in;
  const std::int64_t dy = s.tokens * s.out;
  const bool cast_weight = c.weight == Float8Weight::kCastAtEachUse;
  const std::int64_t cast_w = cast_weight ? w : 0;
  Float8Transients t;
  const auto cast = [&](const std::string& prefix, const char* tensor, std::int64_t elements,
                        std::int64_t layouts, std::int64_t bytes) {
    t.cast_temporaries = std::max(t.cast_temporaries, append_cast(out, prefix, tensor, elements,
                                                                  layouts, hp, bytes, c.casts));
  };
  switch (k.linear) {
    case LinearPass::kForward: {
      cast(k.name, "input", x, 1, e);
      if (cast_weight) cast(k.name, "weight", w, 1, e_weight);
      out.push_back(fp8_gemm(k, x, w, dy));
      if (k.linear_bias) {
        // torch._scaled_mm without the bias, then output + bias.to(output.dtype): reads Y and
        // the bias, writes Y.
        out.push_back(
            memory_bound(k.name + "_bias", (2 * dy + s.out) * dtype_bytes(hp), hp, false));
      }
      t.operands = x + cast_w;
      return t;
    }
    case LinearPass::kInputGrad: {
      cast(k.linear_module, "grad_output", dy, 2, e);
      if (cast_weight) cast(k.linear_module, "weight_bwd", w, 1, e_weight);
      // W [out, in] is row-major where the GEMM reads it as B. A compiled cast writes it
      // transposed; a weight all-gathered in float8 has no cast to fold the transpose into, so
      // it is copied, compiled or not (preprocess_addmm).
      const bool copy_weight = eager || !cast_weight;
      if (copy_weight) append_layout_copy(out, k.linear_module, "weight", w, hp);
      out.push_back(fp8_gemm(k, dy, w, x));
      t.operands = 2 * dy + cast_w + (copy_weight ? w : 0);
      return t;
    }
    case LinearPass::kWeightGrad: {
      cast(k.linear_module, "input_bwd", x, 1, e);
      // dY^T is column-major where the GEMM reads it as A, X row-major where it reads it as B.
      if (eager) {
        append_layout_copy(out, k.linear_module, "grad_output_t", dy, hp);
        append_layout_copy(out, k.linear_module, "input", x, hp);
      }
      out.push_back(fp8_gemm(k, dy, x, w));
      t.operands = (eager ? 2 : 1) * (dy + x);  // the transposed dY copy and X^T
      return t;
    }
    case LinearPass::kNone:
      break;
  }
  out.push_back(k);
  return t;
}

// append_float8_kernels, with every kernel it adds (casts, bias) run inside k's linear module.
Float8Transients append_float8(std::vector<NamedKernel>& out, const NamedKernel& k,
                               const LinearShape& s, const Float8Conversion& c) {
  const std::size_t first = out.size();
  const Float8Transients t = append_float8_kernels(out, k, s, c);
  for (std::size_t i = first; i < out.size(); ++i) out[i].linear_module = k.linear_module;
  return t;
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

void convert_linears_to_float8(Layer& layer, Float8Weight weight, std::optional<Dtype> weight_dtype,
                               Float8Casts casts) {
  const Float8Conversion c{weight, weight_dtype, casts};
  std::int64_t forward_peak = 0;
  detail::rewrite_forward(layer, [&](const NamedKernel& k, std::vector<NamedKernel>& out) {
    std::optional<LinearShape> shape;
    if (convertible(k, shape)) {
      forward_peak = std::max(forward_peak, append_float8(out, k, *shape, c).peak());
    } else {
      out.push_back(k);
    }
  });
  std::vector<NamedKernel> backward;
  std::int64_t backward_peak = 0;
  for (const NamedKernel& k : layer.backward) {
    std::optional<LinearShape> shape;
    if (convertible(k, shape)) {
      backward_peak = std::max(backward_peak, append_float8(backward, k, *shape, c).peak());
    } else {
      backward.push_back(k);
    }
  }
  layer.backward = std::move(backward);
  add_transient(layer, Pass::kForward, Bytes(forward_peak));
  add_transient(layer, Pass::kBackward, Bytes(backward_peak));
}

}  // namespace fsdpsim::models
