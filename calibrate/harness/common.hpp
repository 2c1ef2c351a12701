// What the CUDA parts of the harness share: the plain helpers (util.hpp) and checks of CUDA,
// NCCL and cuBLASLt results that throw HarnessError with the call and its location.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "calibrate/harness/util.hpp"

namespace fsdpsim::harness {

void check_cuda(cudaError_t status, const char* call, const char* file, int line);
void check_nccl(ncclResult_t status, const char* call, const char* file, int line);
void check_cublas(cublasStatus_t status, const char* call, const char* file, int line);

#define FSDPSIM_CUDA(call) ::fsdpsim::harness::check_cuda((call), #call, __FILE__, __LINE__)
#define FSDPSIM_NCCL(call) ::fsdpsim::harness::check_nccl((call), #call, __FILE__, __LINE__)
#define FSDPSIM_CUBLAS(call) ::fsdpsim::harness::check_cublas((call), #call, __FILE__, __LINE__)

// Restores the current CUDA device when it goes out of scope: loops over the local GPUs must
// not leave a later allocation or launch on the wrong one.
class DeviceGuard {
 public:
  DeviceGuard() { cudaGetDevice(&device_); }
  ~DeviceGuard() { cudaSetDevice(device_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int device_ = 0;
};

}  // namespace fsdpsim::harness
