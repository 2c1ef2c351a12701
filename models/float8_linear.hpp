// torchao Float8Linear (torchao/float8/float8_linear.py) with tensorwise dynamic scaling, the
// default recipe of convert_to_float8_training and of torchtitan's "quantize.linear.float8"
// converter, as a rewrite of one layer's linear GEMMs (the kernels marked with a LinearPass).
//
// Per linear Y[T,out] = X[T,in] W[out,in]^T, with e = bytes of the high-precision dtype:
//  * forward: amax and cast of X and of W to float8_e4m3 (hp_tensor_to_float8_dynamic), then
//    the GEMM at the fp8 rate (torch._scaled_mm) writing Y in the high-precision dtype; a bias is
//    no longer in the GEMM epilogue but a separate add (Float8Linear.forward: output + bias);
//  * backward (matmul_with_hp_or_float8_args.backward): dY cast to float8_e5m2 once for the
//    input gradient and once transposed for the weight gradient; W and X cast again from the
//    high-precision tensors autograd saved; both GEMMs at the fp8 rate.
// Kernel names: <linear>_amax_{input,weight,grad_output}, <linear>_cast_..., with _bwd for the
// backward re-casts of input and weight.
#pragma once

#include <cstdint>
#include <optional>

#include "models/workload.hpp"

namespace fsdpsim::models {

// torch._scaled_mm needs both dimensions of the weight divisible by 16; torchao's documented
// module_filter_fn and torchtitan's float8 converter leave other linears in high precision
// (docs.pytorch.org/ao, torchao.float8.convert_to_float8_training).
bool float8_eligible(std::int64_t in_features, std::int64_t out_features);

// Where a Float8Linear's float8 weight comes from.
enum class Float8Weight : std::uint8_t {
  // Cast from the high-precision weight at each use, forward and backward (as above).
  kCastAtEachUse,
  // All-gathered already in float8 by FSDP2 (torchao enable_fsdp_float8_all_gather:
  // WeightWithDynamicFloat8CastTensor.fsdp_pre_all_gather casts the shard, fsdp_post_all_gather
  // wraps the gathered bytes as a Float8TrainingTensor): Float8Linear finds the weight in float8
  // (tensor_already_casted_to_fp8) and casts it neither in forward nor in backward, where the
  // input gradient's GEMM copies it into the column-major layout it reads (preprocess_addmm: no
  // cast is there to write it transposed). The cast is then FSDP's (sim/fsdp/fsdp2_schedule.cpp).
  kAllGatheredInFloat8,
};

// How the casts run: as fused kernels (torch.compile's, which torchtitan documents as required
// with float8, or TransformerEngine's), or eagerly, op by op, as torchao's Python runs them without
// compile: each cast is then eleven kernels with fp32 temporaries, the two layouts of dY two casts,
// and three fp8 operands are copied into the layout torch._scaled_mm reads
// (models/float8_linear.cpp).
enum class Float8Casts : std::uint8_t { kFused, kEager };

// Whether convert_linears_to_float8 rewrites this kernel: a GEMM of an eligible linear.
bool becomes_float8(const NamedKernel& k);

// Rewrites every eligible linear of `layer` as above (shapes from its GEMMs). The saved activations
// do not change (torchao saves the high-precision input and weight: ctx.save_for_backward(
// input_hp, weight_hp_t)); the transient peaks grow by the largest set of fp8 operands alive at
// one GEMM (with the weight all-gathered in float8, the fp8 weight is the unsharded parameter,
// not a temporary). Attention-core indices are kept pointing at the same kernels.
// `weight_dtype`: the weights' own dtype where it is wider than the GEMMs' (autocast over fp32
// weights): Float8Linear casts only its input to the autocast dtype and the weight straight from
// its own dtype to float8, so the weight's amax and cast read that many bytes per element.
void convert_linears_to_float8(Layer& layer, Float8Weight weight = Float8Weight::kCastAtEachUse,
                               std::optional<Dtype> weight_dtype = std::nullopt,
                               Float8Casts casts = Float8Casts::kFused);

}  // namespace fsdpsim::models
