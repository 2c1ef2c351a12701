#include "calibrate/harness/kernels.hpp"

namespace fsdpsim::harness {
namespace {

__global__ void empty_kernel() {}

__device__ std::uint32_t hash32(std::uint64_t i) {
  // splitmix64's finalizer (Steele, Lea, Flood, "Fast splittable pseudorandom number generators",
  // OOPSLA 2014), folded to 32 bits.
  std::uint64_t z = i + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<std::uint32_t>(z);
}

__global__ void fill_kernel(void* data, std::size_t count, int element_bytes, std::uint32_t base,
                            std::uint32_t mask) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const std::uint32_t v = base | (hash32(i) & mask);
    if (element_bytes == 1) {
      static_cast<std::uint8_t*>(data)[i] = static_cast<std::uint8_t>(v);
    } else if (element_bytes == 2) {
      static_cast<std::uint16_t*>(data)[i] = static_cast<std::uint16_t>(v);
    } else {
      static_cast<std::uint32_t*>(data)[i] = v;
    }
  }
}

// The GPU's nanosecond clock (PTX %globaltimer).
__device__ std::uint64_t global_nanoseconds() {
  std::uint64_t t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void gate_kernel(volatile std::uint32_t* words, std::uint32_t ticket,
                            std::uint64_t timeout_ns) {
  const std::uint64_t start = global_nanoseconds();
  while (static_cast<std::int32_t>(words[0] - ticket) < 0) {
    if (global_nanoseconds() - start > timeout_ns) {
      words[1] = 1;
      return;
    }
    __nanosleep(1000);
  }
}

}  // namespace

cudaError_t launch_gate_kernel(std::uint32_t* words, std::uint32_t ticket, std::uint64_t timeout_ns,
                               cudaStream_t stream) {
  gate_kernel<<<1, 1, 0, stream>>>(words, ticket, timeout_ns);
  return cudaGetLastError();
}

cudaError_t launch_empty_kernel(cudaStream_t stream) {
  empty_kernel<<<1, 1, 0, stream>>>();
  return cudaGetLastError();
}

cudaError_t fill_pattern(void* data, std::size_t count, int element_bytes, std::uint32_t base,
                         std::uint32_t mask, cudaStream_t stream) {
  constexpr unsigned kThreads = 256;
  constexpr std::size_t kMaxBlocks = 4096;
  const std::size_t blocks = (count + kThreads - 1) / kThreads;
  fill_kernel<<<static_cast<unsigned>(blocks < kMaxBlocks ? (blocks == 0 ? 1 : blocks)
                                                          : kMaxBlocks),
                kThreads, 0, stream>>>(data, count, element_bytes, base, mask);
  return cudaGetLastError();
}

}  // namespace fsdpsim::harness
