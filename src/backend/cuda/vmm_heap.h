// Device memory for the weights without allocation rounding: one virtual address range reserved on
// the device, physical memory mapped into it in the driver's granules (2 MiB on the H200) only as
// the bump pointer passes them. Tensors packed this way waste at most one granule in total, where a
// cudaMalloc per big tensor (and per 64 MiB slab of small ones) rounded each up: measured at the
// 27B geometry, 1.23 GiB of device memory over the weights right after the load, of which ~0.5 GiB
// was rounding (docs/cuda-engine.md "Memory").
//
// The driver's virtual-memory calls are looked up at run time (cudaGetDriverEntryPointByVersion), so
// nothing links libcuda. Owned by one device (the ordinal it was made for); freed on destruction.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace mere::cuda {

class VmmHeap {
 public:
  // Reserves `reserve_bytes` of address space on device `ordinal`. Throws mere::Error when the driver
  // lacks the virtual-memory calls or refuses the reservation.
  VmmHeap(int ordinal, size_t reserve_bytes);
  ~VmmHeap();
  VmmHeap(const VmmHeap&) = delete;
  VmmHeap& operator=(const VmmHeap&) = delete;

  // `bytes` at `align` (a power of two <= the granule); maps more physical memory when needed.
  // Running out of device memory (or of the reservation) throws mere::Error naming `what`, the bytes
  // asked for and the device's free memory.
  void* alloc(size_t bytes, size_t align, std::string_view what);
  size_t used() const { return next_; }      // bytes handed out (with alignment padding)
  size_t mapped() const { return mapped_; }  // physical bytes behind the range
  size_t granule() const { return granule_; }

 private:
  struct Driver;
  std::unique_ptr<Driver> drv_;
  int ordinal_;
  uint64_t base_ = 0;  // CUdeviceptr
  size_t reserved_ = 0, next_ = 0, mapped_ = 0, granule_ = 0;
  struct Chunk {
    uint64_t handle;  // CUmemGenericAllocationHandle
    size_t offset, size;
  };
  std::vector<Chunk> chunks_;
};

}  // namespace mere::cuda
