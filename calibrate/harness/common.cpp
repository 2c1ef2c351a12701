#include "calibrate/harness/common.hpp"

namespace fsdpsim::harness {

void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  throw HarnessError(cat("CUDA error ", cudaGetErrorName(status), " (", cudaGetErrorString(status),
                         ") in ", call, " at ", file, ":", line));
}

void check_nccl(ncclResult_t status, const char* call, const char* file, int line) {
  if (status == ncclSuccess || status == ncclInProgress) return;
  throw HarnessError(
      cat("NCCL error ", ncclGetErrorString(status), " in ", call, " at ", file, ":", line,
          status == ncclRemoteError || status == ncclSystemError
              ? " (another rank failed or the network is down; NCCL_DEBUG=WARN tells more)"
              : ""));
}

void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw HarnessError(
      cat("cuBLASLt error ", static_cast<int>(status), " in ", call, " at ", file, ":", line));
}

}  // namespace fsdpsim::harness
