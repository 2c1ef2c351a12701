// torch.autocast over modules whose weights are wider than the autocast dtype (Composer's
// DEFAULT precision: FSDP MixedPrecision param_dtype fp32 under amp_bf16), as a rewrite of one
// layer's linear GEMMs (the kernels marked with a LinearPass):
//  * forward: F.linear is on autocast's lower-precision list, so its weight goes through
//    cached_cast (aten/src/ATen/autocast_mode.cpp): a <linear>_weight_cast kernel reading the
//    stored weight and writing the cast copy, and mm saves that copy for the input gradient
//    (saved activations grow by it; a checkpointed layer saves only its input, as before, and
//    re-casts in its recomputation). Each linear reads its weight once a forward, so the cache
//    saves no cast; what it changes is how long a copy lives: it caches the casts of fp32
//    tensors that require grad, are leaves and are not views (can_try_cache) until the
//    outermost autocast exits. FSDP1's forward reads views of the FlatParameter (not leaves):
//    none cached. FSDP2's unsharded parameters are nn.Parameters (leaves; pytorch/pytorch#158232
//    is the cache reusing them): cached (Layer::autocast_weight_copies).
//  * backward: the weight gradient comes out of the GEMM in the autocast dtype and
//    ToCopyBackward casts it to the stored dtype before it is accumulated into the parameter's
//    gradient: a <linear>_weight_grad_cast kernel after each weight-gradient GEMM, whose
//    autocast-dtype output is a transient of the layer's backward.
// The activations' dtypes are the compute dtype's but the residual stream's and the norms' (gpt,
// mpt and llama under WorkloadOptions::residual_dtype).
#pragma once

#include <cstdint>

#include "models/workload.hpp"

namespace fsdpsim::models {

// Preconditions: stored_bytes > compute_bytes > 0 (the weights are wider than the GEMMs' dtype).
// With `float8_linears`, the linears that become Float8Linear (becomes_float8) get no forward cast
// and save no copy: Float8Linear.forward casts only its input to the autocast dtype, and the
// weight goes from its own dtype to float8 (models/float8_linear.hpp); their weight gradient is
// still cast to the weight's dtype (autograd's validate_outputs casts a gradient to its input's
// dtype).
void add_autocast_weight_casts(Layer& layer, std::int64_t stored_bytes, std::int64_t compute_bytes,
                               bool float8_linears = false);

}  // namespace fsdpsim::models
