#include "backend/cuda/smem_opt_in.h"

#include <cuda_runtime.h>

#include <mutex>
#include <set>
#include <tuple>

#include "backend/cuda/cuda_check.h"

namespace mere::cuda {

void opt_in_smem(const void* fn, int bytes) {
  int dev = 0;
  MERE_CUDA_CHECK(cudaGetDevice(&dev));
  static std::mutex mu;
  static std::set<std::tuple<int, const void*, int>> done;  // (device, kernel, bytes) already raised
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(dev, fn, bytes);
  if (done.count(key)) return;
  MERE_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  done.insert(key);
}

}  // namespace mere::cuda
