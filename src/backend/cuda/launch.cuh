// Kernel launches with Programmatic Dependent Launch (PDL, sm_90+): launch() marks each launch
// "programmatic stream serialization allowed", so kernel N+1 is launched, and its blocks are
// scheduled, while kernel N still runs (in a stream and in the decode CUDA graphs captured from it);
// kernel N+1 then waits in pdl_wait() until kernel N has finished and its writes are visible.
//
// Contract: every kernel launched through launch() MUST call pdl_begin() (or pdl_wait()) before
// its first global read of data written by earlier kernels and before its first global write;
// the backend's kernels call pdl_begin() as their first statement. Without the wait a kernel could
// read stale data or race a still-running predecessor. The griddepcontrol instructions are no-ops
// in a kernel launched without the attribute (<<<...>>>, or MERE_CUDA_PDL=0).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "backend/cuda/cuda_check.h"
#if defined(MERE_CUDA_TRACE)
#include "backend/cuda/kernel_trace.h"
#endif

namespace mere::cuda {

#if defined(MERE_CUDA_TRACE)
// Trace builds (kernel_trace.h): this translation unit's pointer to the trace buffer ([0] count,
// then stamps), null while no trace runs; set through the setter each unit registers at start-up.
namespace trace_detail {
static __constant__ unsigned long long* g_trace_buf;
constexpr unsigned long long kTraceCap = 1ull << 20;
static void set_buf(unsigned long long* p) { (void)cudaMemcpyToSymbol(g_trace_buf, &p, sizeof p); }
[[maybe_unused]] static const bool g_registered = (trace_register_symbol(&set_buf), true);
}  // namespace trace_detail
#endif

// Blocks until every kernel this one programmatically depends on has completed and its memory
// operations are visible. Trace builds: block (0,0,0) then stamps the time.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
#if defined(MERE_CUDA_TRACE) && defined(__CUDA_ARCH__)
  unsigned long long* buf = trace_detail::g_trace_buf;
  if (buf != nullptr && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 && threadIdx.x == 0 &&
      threadIdx.y == 0 && threadIdx.z == 0) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    const unsigned long long i = atomicAdd(buf, 1ull);
    if (i < trace_detail::kTraceCap) buf[1 + i] = t;
  }
#endif
}

// Lets the next kernel in the stream launch now (it still waits in pdl_wait() for this one to end).
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Wait, then let the next kernel launch: the first statement of every backend kernel.
__device__ __forceinline__ void pdl_begin() {
  pdl_wait();
  pdl_trigger();
}

// The first statement of a kernel that prepares the next kernel's input (the norms and prepares
// that write qmatvec's prepared x): with `early`, it lets the next kernel launch before its own wait,
// so that kernel's blocks become resident, and prefetch their weights (qmatvec_int), while the
// kernel before this one is still finishing. Still safe: the next kernel waits for this one to
// complete, and this one completes only after its own wait, so the chain of completions holds.
__device__ __forceinline__ void pdl_begin_producer(int early) {
  if (early) {
    pdl_trigger();
    pdl_wait();
  } else {
    pdl_begin();
  }
}

// MERE_CUDA_PDL: unset or 1 -> launch() sets the PDL attribute, 0 -> plain launches; anything else
// throws mere::Error. Read once per process (device.cpp).
bool pdl_enabled();
// MERE_CUDA_PDL_EARLY: unset or 1 -> the prepared-input producers trigger before their wait
// (pdl_begin_producer; H100: 35B-A3B decode +0.5%, 27B unchanged), 0 -> after it; anything else
// throws mere::Error. Read once per process.
bool pdl_early();
// MERE_CUDA_NORM_W: unset or early -> the RMSNorm kernels (rms_norm_v4, the norm inside the MoE router
// launch, the GDN gated norm) load their norm weights before the PDL wait (weights: never written), so
// the normalised row waits for no weight round trip after the row's reduction (s34b H100: 35B-A3B decode
// +3.6%, 27B +1.6%); late -> after the reduction, where they are used (the same bits). Read once per
// process (device.cpp).
bool norm_w_early();
// MERE_CUDA_GDN_STATE: early -> gdn_decode loads each lane's float4 of its S row, and conv_gdn_prepare each
// channel's conv state and weights, before the PDL wait (the state is written by no launch of the pass before
// the kernel's own), so neither waits for a DRAM round trip after the wait (the same values, the same bits);
// unset or late -> after it. Read once per process (device.cpp).
bool gdn_state_early();

// kernel<<<grid, block, smem, s>>>(args...) with the PDL attribute (when pdl_enabled()); a launch
// error throws mere::Error naming `what`.
// launch() with a thread-block cluster of `cluster` blocks (sm_90); cluster = (1, 1, 1) is launch().
template <class... P, class... A>
void launch_cluster(const char* what, void (*kernel)(P...), dim3 grid, dim3 block, dim3 cluster, size_t smem,
                    cudaStream_t s, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "launch: argument count must match the kernel's parameters");
  cudaLaunchAttribute attr[2];
  int n = 0;
  if (cluster.x * cluster.y * cluster.z > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster.x;
    attr[n].val.clusterDim.y = cluster.y;
    attr[n].val.clusterDim.z = cluster.z;
    ++n;
  }
  if (pdl_enabled()) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
#if defined(MERE_CUDA_TRACE)
  trace_note_launch(what);
#endif
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = n;
  const cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, static_cast<P>(std::forward<A>(args))...);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // clear it, as MERE_CUDA_CHECK_LAUNCH did, so a later check does not see it
    throw_cuda_error(err, cat("launch of ", what).c_str(), __FILE__, __LINE__);
  }
}

template <class... P, class... A>
void launch(const char* what, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, A&&... args) {
  launch_cluster(what, kernel, grid, block, dim3(1, 1, 1), smem, s, std::forward<A>(args)...);
}

}  // namespace mere::cuda
