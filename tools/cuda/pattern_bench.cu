// Access-pattern micro-benchmark for the 4-bit decode matvec (docs/cuda-kernels.md §1 "v6"): how
// fast can the code bytes of one [rows, cols] 4-bit matrix be *read* in the order each kernel design
// reads them, with no arithmetic beyond an XOR? Separates DRAM access-pattern cost from compute.
// Standalone (no project sources): nvcc -std=c++20 -O3 -gencode arch=compute_90a,code=sm_90a
//   tools/cuda/pattern_bench.cu -o pattern_bench && ./pattern_bench [rows cols]
// Patterns (all read every code byte of the matrix exactly once):
//   seq        grid-stride 16-byte loads over the matrix as one flat array
//   rowsR/U    qmatvec_kernel's order: a warp owns R consecutive rows; per iteration lane l loads
//              chunk (base + l + 32u) of each row (u < U), then consumes (MLX row-major layout)
//   packR/U    the same loads, but the R rows are stored interleaved so each iteration's R*U warp
//              loads cover one contiguous R*U*512-byte range (a load-time repack)
//   tcsS       qmatvec_tcs_kernel's order: a 128-thread block owns 16 rows, stage c = 128 bytes of
//              each row by 16-byte cp.async, S stages deep, one barrier a stage
//   tcspS      the same with each stage's 2 KB contiguous (repacked)
//   tileP/S    qmatvec_gmma_kernel's order (tiled layout [tile][group][lane] uint4: a warp owns one
//              16-row tile and K-split of S, 512 contiguous bytes a group), P groups in a register
//              ring, 8 warps a block; gmajP/S the same loads from a group-major layout
//              [group][tile][lane] (all warps of a step read one contiguous range); +sb: also the
//              64-byte scale/bias words of each (tile, group) from their own array
// Each launch reads a different copy of the matrix (copies >= 1 GiB in all, so L2 never helps);
// time = (events around 24 back-to-back launches) / 24, median of 15 such batches.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

__device__ __forceinline__ uint4 ld_stream(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ uint32_t fold(uint4 v) { return v.x ^ v.y ^ v.z ^ v.w; }

__global__ void seq_kernel(const uint4* __restrict__ p, int64_t n, uint32_t* out) {
  uint32_t acc = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 a = ld_stream(p + i), b = ld_stream(p + i + stride), c = ld_stream(p + i + 2 * stride),
          d = ld_stream(p + i + 3 * stride);
    acc ^= fold(a) ^ fold(b) ^ fold(c) ^ fold(d);
  }
  for (; i < n; i += stride) acc ^= fold(ld_stream(p + i));
  if (acc == 0x9e3779b9u) out[0] = acc;  // keeps the loads alive
}

// R rows a warp, U chunks a row in flight; PACK: the warp's rows are interleaved per 32-chunk span.
template <int R, int U, bool PACK>
__global__ void __launch_bounds__(128) rows_kernel(const uint4* __restrict__ p, int rows, int nchunk, uint32_t* out) {
  const int lane = threadIdx.x & 31;
  const int warp = blockIdx.x * 4 + (threadIdx.x >> 5);
  const int row0 = warp * R;
  if (row0 >= rows) return;
  uint32_t acc = 0;
  for (int base = lane; base < nchunk; base += 32 * U) {
    uint4 v[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int j = base + 32 * u;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        size_t idx;
        if (PACK)  // [row group][span j/32][r][lane]
          idx = static_cast<size_t>(row0) * nchunk + (static_cast<size_t>(j >> 5) * R + r) * 32 + (j & 31);
        else
          idx = static_cast<size_t>(row0 + r) * nchunk + j;
        v[u][r] = j < nchunk ? ld_stream(p + idx) : make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < R; ++r) acc ^= fold(v[u][r]);
  }
  if (acc == 0x9e3779b9u) out[0] = acc;
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void wait_group() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

// 16 rows a block; stage c = 128 bytes of each row (8 16-byte pieces a row, 128 pieces: one a thread)
template <int S, bool PACK>
__global__ void __launch_bounds__(128) tcs_kernel(const uint8_t* __restrict__ p, int rows, int row_bytes, uint32_t* out) {
  __shared__ __align__(16) uint8_t sm[S][16][128];
  const int tid = threadIdx.x;
  const int row0 = blockIdx.x * 16;
  const int nst = row_bytes / 128;
  const int pr = tid >> 3, pc = tid & 7;  // row and 16-byte piece of this thread's copy
  auto src = [&](int c) -> const uint8_t* {
    if (PACK) return p + static_cast<size_t>(row0) * row_bytes + static_cast<size_t>(c) * 2048 + tid * 16;
    return p + static_cast<size_t>(row0 + pr) * row_bytes + c * 128 + pc * 16;
  };
  uint32_t acc = 0;
#pragma unroll
  for (int c = 0; c < S - 1; ++c) {
    if (c < nst) cp_async16(smem_u32(&sm[c % S][pr][pc * 16]), src(c));
    commit();
  }
  for (int c = 0; c < nst; ++c) {
    wait_group<S - 2>();
    __syncthreads();
    const int n = c + S - 1;
    if (n < nst) cp_async16(smem_u32(&sm[n % S][pr][pc * 16]), src(n));
    commit();
    acc ^= reinterpret_cast<const uint32_t*>(&sm[c % S][0][0])[tid];
  }
  wait_group<0>();
  if (acc == 0x9e3779b9u) out[0] = acc;
}

// qmatvec_gmma_kernel's loads: warp = (tile, split); P groups of 512 bytes (lane: 16) in flight in a
// register ring; GMAJ: group-major layout; SB: also a warp's 64 bytes of scale/bias words a group
template <int P, bool GMAJ, bool SB>
__global__ void __launch_bounds__(256, 2) tile_kernel(const uint4* __restrict__ p, const uint2* __restrict__ sb,
                                                      int tiles, int ng, int S, uint32_t* out) {
  const int lane = threadIdx.x & 31;
  const int unit = blockIdx.x * 8 + (threadIdx.x >> 5);
  const int tile = unit / S, split = unit % S;
  if (tile >= tiles) return;
  const int gb = ng * split / S, n = ng * (split + 1) / S - gb;
  auto at = [&](int i) -> size_t {
    const size_t G = static_cast<size_t>(gb + i);
    return GMAJ ? (G * tiles + tile) * 32 + lane : (static_cast<size_t>(tile) * ng + G) * 32 + lane;
  };
  uint4 ring[P];
  uint2 sr[P];
#pragma unroll
  for (int q = 0; q < P; ++q) {
    ring[q] = q < n ? ld_stream(p + at(q)) : make_uint4(0, 0, 0, 0);
    if (SB) sr[q] = q < n ? __ldg(sb + at(q) / 4) : make_uint2(0, 0);
  }
  uint32_t acc = 0;
  for (int i0 = 0; i0 < n; i0 += P) {
#pragma unroll
    for (int q = 0; q < P; ++q) {
      const int i = i0 + q;
      if (i >= n) break;
      acc ^= fold(ring[q]);
      if (SB) acc ^= sr[q].x ^ sr[q].y;
      ring[q] = i + P < n ? ld_stream(p + at(i + P)) : make_uint4(0, 0, 0, 0);
      if (SB) sr[q] = i + P < n ? __ldg(sb + at(i + P) / 4) : make_uint2(0, 0);
    }
  }
  if (acc == 0x9e3779b9u) out[0] = acc;
}

int main(int argc, char** argv) {
  const int rows = argc > 1 ? std::atoi(argv[1]) : 17408;
  const int cols = argc > 2 ? std::atoi(argv[2]) : 5120;
  const int row_bytes = cols / 2, nchunk = row_bytes / 16;
  const size_t mbytes = static_cast<size_t>(rows) * row_bytes;
  const int copies = static_cast<int>(std::max<size_t>(8, ((size_t{1} << 30) + mbytes - 1) / mbytes));
  std::vector<uint8_t*> bufs(copies);
  for (auto& b : bufs) {
    CK(cudaMalloc(&b, mbytes));
    CK(cudaMemset(b, 0x5a, mbytes));
  }
  uint32_t* out;
  CK(cudaMalloc(&out, 4));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  // copy bandwidth of the same run (read + write), 256 MiB
  {
    uint8_t *a, *b;
    const size_t n = size_t{256} << 20;
    CK(cudaMalloc(&a, n));
    CK(cudaMalloc(&b, n));
    std::vector<float> ts;
    for (int i = 0; i < 12; ++i) {
      CK(cudaEventRecord(e0));
      CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice));
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (i >= 2) ts.push_back(ms);
    }
    std::sort(ts.begin(), ts.end());
    std::printf("copy 256 MiB d2d: %.1f GB/s (read+write)\n", 2.0 * n / (ts[ts.size() / 2] * 1e-3) / 1e9);
    CK(cudaFree(a));
    CK(cudaFree(b));
  }
  std::printf("matrix [%d, %d] 4-bit: %.2f MB of codes, %d copies; floor at 4200 GB/s %.2f us\n", rows, cols,
              mbytes / 1e6, copies, mbytes / 4200e9 * 1e6);
  auto timeit = [&](const char* name, auto launch) {
    for (int w = 0; w < 4; ++w) launch(bufs[w % copies]);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<float> ts;
    constexpr int kBatch = 24;
    for (int rep = 0; rep < 15; ++rep) {
      CK(cudaEventRecord(e0));
      for (int i = 0; i < kBatch; ++i) launch(bufs[(rep * kBatch + i) % copies]);
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      ts.push_back(ms * 1000.0f / kBatch);
    }
    CK(cudaGetLastError());
    std::sort(ts.begin(), ts.end());
    const float med = ts[ts.size() / 2];
    std::printf("%-14s %8.2f us [%7.2f-%7.2f]  %7.1f GB/s\n", name, med, ts.front(), ts.back(), mbytes / (med * 1e-6) / 1e9);
  };
  timeit("seq 8/SM", [&](uint8_t* b) {
    seq_kernel<<<sms * 8, 256>>>(reinterpret_cast<const uint4*>(b), static_cast<int64_t>(mbytes / 16), out);
  });
  timeit("seq 4/SM", [&](uint8_t* b) {
    seq_kernel<<<sms * 4, 256>>>(reinterpret_cast<const uint4*>(b), static_cast<int64_t>(mbytes / 16), out);
  });
#define ROWS(R, U, P, NAME)                                                                        \
  timeit(NAME, [&](uint8_t* b) {                                                                   \
    const int warps = (rows + R - 1) / R;                                                          \
    rows_kernel<R, U, P><<<(warps + 3) / 4, 128>>>(reinterpret_cast<const uint4*>(b), rows, nchunk, out); \
  })
  ROWS(8, 1, false, "rows8/1");
  ROWS(8, 1, true, "pack8/1");
  ROWS(4, 2, false, "rows4/2");
  ROWS(4, 2, true, "pack4/2");
  ROWS(2, 2, false, "rows2/2");
  ROWS(2, 2, true, "pack2/2");
  ROWS(2, 4, false, "rows2/4");
  ROWS(2, 4, true, "pack2/4");
  ROWS(1, 4, false, "rows1/4");
  ROWS(1, 8, false, "rows1/8");
#define TCS(S, P, NAME)                                                                              \
  timeit(NAME, [&](uint8_t* b) { tcs_kernel<S, P><<<(rows + 15) / 16, 128>>>(b, rows, row_bytes, out); })
  TCS(8, false, "tcs8");
  TCS(8, true, "tcsp8");
  TCS(4, false, "tcs4");
  TCS(4, true, "tcsp4");
  TCS(12, false, "tcs12");
  TCS(12, true, "tcsp12");
  // the group-integer tensor-core kernel's order (tiled layout) and a group-major layout
  {
    const int tiles = (rows + 15) / 16, ng = cols / 64;
    uint2* sbb;
    CK(cudaMalloc(&sbb, static_cast<size_t>(tiles) * ng * 64));
    CK(cudaMemset(sbb, 0x5a, static_cast<size_t>(tiles) * ng * 64));
#define TILE(P, G, SB, S)                                                                                   \
    {                                                                                                       \
      char nm[32];                                                                                          \
      std::snprintf(nm, sizeof(nm), "%s%d/%d%s", G ? "gmaj" : "tile", P, S, SB ? "+sb" : "");               \
      timeit(nm, [&](uint8_t* b) {                                                                          \
        tile_kernel<P, G, SB><<<(tiles * S + 7) / 8, 256>>>(reinterpret_cast<const uint4*>(b), sbb, tiles, ng, S, out); \
      });                                                                                                   \
    }
    for (int S : {1, 2, 4}) {
      TILE(2, false, false, S);
      TILE(6, false, false, S);
      TILE(6, true, false, S);
      TILE(6, false, true, S);
      TILE(6, true, true, S);
    }
    TILE(12, false, false, 1);
    TILE(12, true, false, 1);
  }
  return 0;
}
