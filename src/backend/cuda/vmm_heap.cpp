// VmmHeap (vmm_heap.h): cuMemAddressReserve + cuMemCreate / cuMemMap / cuMemSetAccess per grown
// range, through driver entry points found at run time.
#include "backend/cuda/vmm_heap.h"

#include <cuda.h>
#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "core/error.h"

namespace mere::cuda {

struct VmmHeap::Driver {
  decltype(&::cuMemAddressReserve) reserve = nullptr;
  decltype(&::cuMemAddressFree) free = nullptr;
  decltype(&::cuMemCreate) create = nullptr;
  decltype(&::cuMemRelease) release = nullptr;
  decltype(&::cuMemMap) map = nullptr;
  decltype(&::cuMemUnmap) unmap = nullptr;
  decltype(&::cuMemSetAccess) access = nullptr;
  decltype(&::cuMemGetAllocationGranularity) granularity = nullptr;
};

namespace {

template <class F>
void entry(const char* name, F* fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
  const cudaError_t err = cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q);
  MERE_CHECK(err == cudaSuccess && q == cudaDriverEntryPointSuccess && p != nullptr, "cuda weights heap",
             "expected the driver's ", name, " (virtual memory management), got none (",
             cudaGetErrorString(err), ")");
  *fn = reinterpret_cast<F>(p);
}

void drv_check(CUresult r, const char* call) {
  MERE_CHECK(r == CUDA_SUCCESS, "cuda weights heap", call, " failed: expected CUDA_SUCCESS, got error ",
             static_cast<int>(r));
}

CUmemAllocationProp device_prop(int ordinal) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = ordinal;
  return prop;
}

}  // namespace

VmmHeap::VmmHeap(int ordinal, size_t reserve_bytes) : drv_(std::make_unique<Driver>()), ordinal_(ordinal) {
  DeviceGuard guard(ordinal_);
  MERE_CUDA_CHECK(cudaFree(nullptr));  // the primary context exists before the driver calls
  entry("cuMemAddressReserve", &drv_->reserve);
  entry("cuMemAddressFree", &drv_->free);
  entry("cuMemCreate", &drv_->create);
  entry("cuMemRelease", &drv_->release);
  entry("cuMemMap", &drv_->map);
  entry("cuMemUnmap", &drv_->unmap);
  entry("cuMemSetAccess", &drv_->access);
  entry("cuMemGetAllocationGranularity", &drv_->granularity);
  const CUmemAllocationProp prop = device_prop(ordinal_);
  drv_check(drv_->granularity(&granule_, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), "cuMemGetAllocationGranularity");
  MERE_CHECK(granule_ > 0, "cuda weights heap", "expected a positive allocation granularity, got 0");
  reserved_ = (reserve_bytes + granule_ - 1) / granule_ * granule_;
  CUdeviceptr base = 0;
  drv_check(drv_->reserve(&base, reserved_, granule_, 0, 0), "cuMemAddressReserve");
  base_ = base;
}

VmmHeap::~VmmHeap() {
  if (!drv_ || base_ == 0) return;
  DeviceGuard guard(ordinal_);
  for (const Chunk& c : chunks_) {
    drv_->unmap(static_cast<CUdeviceptr>(base_ + c.offset), c.size);
    drv_->release(static_cast<CUmemGenericAllocationHandle>(c.handle));
  }
  drv_->free(static_cast<CUdeviceptr>(base_), reserved_);
}

void* VmmHeap::alloc(size_t bytes, size_t align, std::string_view what) {
  MERE_CHECK(align > 0 && (align & (align - 1)) == 0 && align <= granule_, "cuda weights heap",
             "alignment must be a power of two up to ", granule_, ", got ", align);
  const size_t start = (next_ + align - 1) / align * align;
  const size_t end = start + bytes;
  MERE_CHECK(end <= reserved_, "cuda weights heap", "weights do not fit the reserved ", reserved_,
             " bytes of device address space: ", what, " needs ", bytes, " more bytes at offset ", start);
  if (end > mapped_) {
    DeviceGuard guard(ordinal_);
    const size_t size = (end - mapped_ + granule_ - 1) / granule_ * granule_;
    const CUmemAllocationProp prop = device_prop(ordinal_);
    CUmemGenericAllocationHandle h = 0;
    const CUresult r = drv_->create(&h, size, &prop, 0);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      fail(cat("cuda:", ordinal_, " alloc"), cat("out of device memory for ", what, " (weights): expected ", size,
                                                 " free bytes, got ", free_b, " free of ", total_b, " (",
                                                 mapped_, " bytes of weights already on the device)"));
    }
    drv_check(r, "cuMemCreate");
    const CUdeviceptr at = static_cast<CUdeviceptr>(base_ + mapped_);
    const CUresult rm = drv_->map(at, size, 0, h, 0);
    if (rm != CUDA_SUCCESS) {
      drv_->release(h);
      drv_check(rm, "cuMemMap");
    }
    chunks_.push_back(Chunk{static_cast<uint64_t>(h), mapped_, size});
    CUmemAccessDesc acc{};
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = ordinal_;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    drv_check(drv_->access(at, size, &acc, 1), "cuMemSetAccess");
    mapped_ += size;
  }
  next_ = end;
  return reinterpret_cast<void*>(static_cast<uintptr_t>(base_ + start));
}

}  // namespace mere::cuda
