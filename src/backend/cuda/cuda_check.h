// Error checking for every CUDA runtime call and kernel launch: a failure throws mere::Error
// reading "[cuda <where>] <call> failed: expected cudaSuccess, got <code name> (<message>)".
// Used by every file of the CUDA backend; nothing here aborts the process.
#pragma once
#include <cuda_runtime.h>

#include "core/error.h"

namespace mere::cuda {

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  fail(cat("cuda ", file, ":", line), cat(call, " failed: expected cudaSuccess, got ", cudaGetErrorName(err), " (",
                                          cudaGetErrorString(err), ")"));
}

inline void check(cudaError_t err, const char* call, const char* file, int line) {
  if (err != cudaSuccess) throw_cuda_error(err, call, file, line);
}

}  // namespace mere::cuda

// MERE_CUDA_CHECK(cudaMalloc(...)): throws mere::Error naming the call, file and line on failure.
#define MERE_CUDA_CHECK(call) ::mere::cuda::check((call), #call, __FILE__, __LINE__)
// After a <<<...>>> launch: catches bad configurations (and, with a sync, asynchronous faults).
#define MERE_CUDA_CHECK_LAUNCH(what) ::mere::cuda::check(cudaGetLastError(), "launch of " what, __FILE__, __LINE__)
