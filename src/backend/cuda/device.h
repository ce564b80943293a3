// CudaDevice: one GPU, owned as an object (no process-global device state), so several can be
// driven from one process later (tensor parallelism). It owns its stream, its properties and every
// allocation made through it; each method makes its device current only for the call (DeviceGuard).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mere::cuda {

// Makes `ordinal` the calling thread's current device for the guard's lifetime, then restores.
class DeviceGuard {
 public:
  explicit DeviceGuard(int ordinal);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool switched_ = false;
};

// A device allocation (cudaMalloc), freed on destruction. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(int ordinal, void* ptr, size_t bytes) : ordinal_(ordinal), ptr_(ptr), bytes_(bytes) {}
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void reset() noexcept;
  void* get() const { return ptr_; }
  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }
  int ordinal() const { return ordinal_; }

 private:
  int ordinal_ = -1;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

class CudaDevice {
 public:
  explicit CudaDevice(int ordinal = 0);  // throws mere::Error when the device does not exist
  ~CudaDevice();
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  static int device_count();  // 0 when no driver or device is present (never throws)

  int ordinal() const { return ordinal_; }
  cudaStream_t stream() const { return stream_; }
  const cudaDeviceProp& props() const { return props_; }
  int sm_count() const { return props_.multiProcessorCount; }
  size_t l2_bytes() const { return static_cast<size_t>(props_.l2CacheSize); }
  std::string name() const { return props_.name; }
  std::string describe() const;  // "cuda:0 NVIDIA H200 (sm_90, 132 SMs, 60 MiB L2, 139.8 GiB)"

  // Allocates `bytes` on this device; out of memory is an error naming `what` and the free memory.
  DeviceBuffer alloc(size_t bytes, std::string_view what);
  // Stream-ordered copies on this device's stream; the blocking forms synchronize the stream.
  void upload(void* dst, const void* host, size_t bytes);
  void download(void* host, const void* src, size_t bytes);
  void fill_bytes(void* dst, int value, size_t bytes);  // async memset on the stream
  void synchronize(std::string_view where);             // waits for the stream; reports async faults

  void make_current() const;  // for launches: callers hold a DeviceGuard instead where they can

 private:
  int ordinal_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaDeviceProp props_{};
};

}  // namespace mere::cuda
