// Numeric formats of tensors and of matrix units.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace fsdpsim {

enum class Dtype : std::uint8_t { kFp32, kTf32, kBf16, kFp16, kFp8 };

// Storage size of one element. TF32 is a math mode over fp32 storage.
constexpr std::int64_t dtype_bytes(Dtype d) {
  switch (d) {
    case Dtype::kFp32:
    case Dtype::kTf32:
      return 4;
    case Dtype::kBf16:
    case Dtype::kFp16:
      return 2;
    case Dtype::kFp8:
      return 1;
  }
  return 4;
}

constexpr std::string_view dtype_name(Dtype d) {
  switch (d) {
    case Dtype::kFp32:
      return "fp32";
    case Dtype::kTf32:
      return "tf32";
    case Dtype::kBf16:
      return "bf16";
    case Dtype::kFp16:
      return "fp16";
    case Dtype::kFp8:
      return "fp8";
  }
  return "fp32";
}

// The math dtype of a GEMM in `compute`: fp32 runs on the TF32 tensor cores under
// torch.backends.cuda.matmul.allow_tf32; every other dtype is unaffected by that flag.
constexpr Dtype gemm_math_dtype(Dtype compute, bool allow_tf32) {
  return allow_tf32 && compute == Dtype::kFp32 ? Dtype::kTf32 : compute;
}

// Accepts our names and PyTorch's ("bfloat16", "float32", ...).
constexpr std::optional<Dtype> parse_dtype(std::string_view s) {
  if (s == "fp32" || s == "float32") return Dtype::kFp32;
  if (s == "tf32") return Dtype::kTf32;
  if (s == "bf16" || s == "bfloat16") return Dtype::kBf16;
  if (s == "fp16" || s == "float16") return Dtype::kFp16;
  if (s == "fp8" || s == "float8") return Dtype::kFp8;
  return std::nullopt;
}

}  // namespace fsdpsim
