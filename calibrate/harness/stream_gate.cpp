#include "calibrate/harness/stream_gate.hpp"

#include "calibrate/harness/common.hpp"
#include "calibrate/harness/kernels.hpp"

namespace fsdpsim::harness {

void create_gate(StreamGate& gate) {
  FSDPSIM_CUDA(cudaGetDevice(&gate.cuda_device));
  void* words = nullptr;
  FSDPSIM_CUDA(cudaHostAlloc(&words, 2 * sizeof(std::uint32_t), cudaHostAllocMapped));
  gate.host = static_cast<std::uint32_t*>(words);
  gate.host[0] = 0;
  gate.host[1] = 0;
  void* mapped = nullptr;
  FSDPSIM_CUDA(cudaHostGetDevicePointer(&mapped, words, 0));
  gate.device = static_cast<std::uint32_t*>(mapped);
  gate.ticket = 0;
}

void destroy_gate(StreamGate& gate) noexcept {
  if (gate.host != nullptr) cudaFreeHost(gate.host);
  gate.host = nullptr;
  gate.device = nullptr;
}

void close_gate(StreamGate& gate, cudaStream_t stream) {
  const DeviceGuard restore;
  FSDPSIM_CUDA(cudaSetDevice(gate.cuda_device));
  ++gate.ticket;
  FSDPSIM_CUDA(launch_gate_kernel(gate.device, gate.ticket, kGateTimeoutNs, stream));
}

void open_gate(StreamGate& gate) {
  // A store the spinning kernel reads over the bus; sequentially consistent, so that it follows
  // every launch this thread queued before it.
  __atomic_store_n(&gate.host[0], gate.ticket, __ATOMIC_SEQ_CST);
}

bool gate_timed_out(StreamGate& gate) {
  return __atomic_exchange_n(&gate.host[1], 0U, __ATOMIC_SEQ_CST) != 0U;
}

std::string gate_timeout_note(const std::string& what) {
  return cat(what, ": a stream gate opened by its timeout (", kGateTimeoutNs / 1000000000,
             " s) before the launches behind it were queued; the timing includes the host's "
             "enqueue time");
}

}  // namespace fsdpsim::harness
