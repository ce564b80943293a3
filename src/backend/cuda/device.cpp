// CudaDevice, DeviceGuard and DeviceBuffer: device ownership, allocation with clear out-of-memory
// errors, stream-ordered copies. Every CUDA call is checked (cuda_check.h).
#include "backend/cuda/device.h"

#include <cstdlib>
#include <string_view>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/env_choice.h"
#include "backend/cuda/launch.cuh"

namespace mere::cuda {

bool pdl_enabled() {
  static const bool on = env_choice("MERE_CUDA_PDL", {"0", "1"}) != 0;
  return on;
}

bool pdl_early() {
  static const bool on = env_choice("MERE_CUDA_PDL_EARLY", {"0", "1"}) != 0;
  return on;
}

bool norm_w_early() {
  static const bool on = env_choice("MERE_CUDA_NORM_W", {"late", "early"}) != 0;
  return on;
}

bool gdn_state_early() {
  static const bool on = env_choice("MERE_CUDA_GDN_STATE", {"late", "early"}) == 1;
  return on;
}

DeviceGuard::DeviceGuard(int ordinal) {
  MERE_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != ordinal) {
    MERE_CUDA_CHECK(cudaSetDevice(ordinal));
    switched_ = true;
  }
}

DeviceGuard::~DeviceGuard() {
  if (switched_) cudaSetDevice(previous_);  // destructor: nothing sensible to do on failure
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    ordinal_ = std::exchange(o.ordinal_, -1);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::reset() noexcept {
  if (ptr_ != nullptr) {
    int prev = -1;
    cudaGetDevice(&prev);
    if (prev != ordinal_) cudaSetDevice(ordinal_);
    cudaFree(ptr_);
    if (prev != ordinal_ && prev >= 0) cudaSetDevice(prev);
  }
  ptr_ = nullptr;
  bytes_ = 0;
}

int CudaDevice::device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return 0;
  }
  return n;
}

CudaDevice::CudaDevice(int ordinal) : ordinal_(ordinal) {
  const int n = device_count();
  MERE_CHECK(ordinal >= 0 && ordinal < n, "cuda device", "no such device: expected an ordinal in [0, ", n, "), got ",
             ordinal);
  DeviceGuard guard(ordinal_);
  MERE_CUDA_CHECK(cudaGetDeviceProperties(&props_, ordinal_));
  MERE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

CudaDevice::~CudaDevice() {
  if (stream_ != nullptr) {
    int prev = -1;
    cudaGetDevice(&prev);
    if (prev != ordinal_) cudaSetDevice(ordinal_);
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
    if (prev != ordinal_ && prev >= 0) cudaSetDevice(prev);
  }
}

std::string CudaDevice::describe() const {
  return cat("cuda:", ordinal_, " ", props_.name, " (sm_", props_.major, props_.minor, ", ", props_.multiProcessorCount,
             " SMs, ", props_.l2CacheSize >> 20, " MiB L2, ",
             static_cast<double>(props_.totalGlobalMem) / static_cast<double>(1ull << 30), " GiB)");
}

DeviceBuffer CudaDevice::alloc(size_t bytes, std::string_view what) {
  DeviceGuard guard(ordinal_);
  void* p = nullptr;
  if (bytes == 0) return DeviceBuffer(ordinal_, nullptr, 0);
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    fail(cat("cuda:", ordinal_, " alloc"), cat("out of device memory for ", what, ": expected ", bytes,
                                               " free bytes, got ", free_b, " free of ", total_b));
  }
  check(err, "cudaMalloc", __FILE__, __LINE__);
  return DeviceBuffer(ordinal_, p, bytes);
}

void CudaDevice::make_current() const { MERE_CUDA_CHECK(cudaSetDevice(ordinal_)); }

void CudaDevice::upload(void* dst, const void* host, size_t bytes) {
  DeviceGuard guard(ordinal_);
  MERE_CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream_));
  MERE_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaDevice::download(void* host, const void* src, size_t bytes) {
  DeviceGuard guard(ordinal_);
  MERE_CUDA_CHECK(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, stream_));
  MERE_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaDevice::fill_bytes(void* dst, int value, size_t bytes) {
  DeviceGuard guard(ordinal_);
  MERE_CUDA_CHECK(cudaMemsetAsync(dst, value, bytes, stream_));
}

void CudaDevice::synchronize(std::string_view where) {
  DeviceGuard guard(ordinal_);
  const cudaError_t err = cudaStreamSynchronize(stream_);
  if (err != cudaSuccess)
    fail(cat("cuda:", ordinal_, " ", where), cat("stream synchronize failed: expected cudaSuccess, got ",
                                                 cudaGetErrorName(err), " (", cudaGetErrorString(err), ")"));
}

}  // namespace mere::cuda
