// Prefill-only kernels of the engine (k_prefill.h).
#include "backend/cuda/engine/k_prefill.h"

#include <cstdint>
#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/engine/k_math.cuh"
#include "backend/cuda/launch.cuh"

namespace mere::cuda::k {
namespace {

constexpr int kMaxConvK = 8;
constexpr int kConvThreads = 128, kConvRows = 8;

// A thread per V adjacent channels (V = 4: float4 rows) x kConvRows consecutive rows t0 .. t0 + 7.
// The inputs x_i, i in [t0 - (K-1), t0 + kConvRows) (raw row i, or history row i + K - 1 for i < 0),
// are loaded once into a sliding window and the channels' K weights once into registers: the thread
// per (row, channel) form read every input K times and its weights once a row (strided). Each output
// is the same fma chain (j = 0..K-1 from 0.0f) and SiLU, so bitwise that form's.
template <int K, int V>
__global__ void __launch_bounds__(kConvThreads)
    conv_rows_kernel(const float* __restrict__ state, const float* __restrict__ w, const float* __restrict__ raw,
                     int T, int C, float* __restrict__ out) {
  using Vec = std::conditional_t<V == 4, float4, float>;
  static_assert(sizeof(Vec) == V * sizeof(float));
  pdl_begin();
  const int c = (blockIdx.x * kConvThreads + threadIdx.x) * V;
  if (c >= C) return;
  const int t0 = static_cast<int>(blockIdx.y) * kConvRows;
  alignas(16) float wr[V * K];  // w[c*K .. (c+V)*K): channel c+v's weight j at v*K + j
  if constexpr (V == 4) {
#pragma unroll
    for (int u = 0; u < K; ++u) reinterpret_cast<float4*>(wr)[u] = reinterpret_cast<const float4*>(w + c * K)[u];
  } else {
#pragma unroll
    for (int j = 0; j < K; ++j) wr[j] = w[c * K + j];
  }
  Vec xw[kConvRows + K - 1];
#pragma unroll
  for (int r = 0; r < kConvRows + K - 1; ++r) {
    const int i = t0 - (K - 1) + r;
    if (i < T) {
      const float* src = i >= 0 ? raw + static_cast<int64_t>(i) * C : state + static_cast<int64_t>(i + K - 1) * C;
      xw[r] = *reinterpret_cast<const Vec*>(src + c);
    } else {
      xw[r] = Vec{};  // past row T: no output reads it
    }
  }
#pragma unroll
  for (int r = 0; r < kConvRows; ++r) {
    if (t0 + r >= T) break;
    alignas(16) float o[V];
#pragma unroll
    for (int v = 0; v < V; ++v) {
      float acc = 0.0f;
#pragma unroll
      for (int j = 0; j < K; ++j) acc = __fmaf_rn(wr[v * K + j], reinterpret_cast<const float*>(&xw[r + j])[v], acc);
      o[v] = silu(acc);
    }
    *reinterpret_cast<Vec*>(out + static_cast<int64_t>(t0 + r) * C + c) = *reinterpret_cast<const Vec*>(o);
  }
}

// history row j <- x_{T-(K-1)+j}; ascending j reads row T+j >= j+1 before any write reaches it
__global__ void conv_shift_kernel(float* state, const float* raw, int T, int C, int K) {
  pdl_begin();
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  for (int j = 0; j < K - 1; ++j) {
    const int i = T - (K - 1) + j;
    state[static_cast<int64_t>(j) * C + c] =
        i >= 0 ? raw[static_cast<int64_t>(i) * C + c] : state[static_cast<int64_t>(i + K - 1) * C + c];
  }
}

template <int K>
void launch_conv_rows(cudaStream_t s, const float* state, const float* w, const float* raw, int T, int C, float* out) {
  // float4 rows need C % 4 == 0 and 16-byte aligned rows (the engine's buffers are); else a channel a thread
  const bool vec = C % 4 == 0 && ((reinterpret_cast<uintptr_t>(state) | reinterpret_cast<uintptr_t>(w) |
                                   reinterpret_cast<uintptr_t>(raw) | reinterpret_cast<uintptr_t>(out)) & 15) == 0;
  const int V = vec ? 4 : 1;
  const dim3 grid(static_cast<unsigned>((C + kConvThreads * V - 1) / (kConvThreads * V)),
                  static_cast<unsigned>((T + kConvRows - 1) / kConvRows));
  if (vec) launch("conv_rows_kernel", &conv_rows_kernel<K, 4>, grid, kConvThreads, 0, s, state, w, raw, T, C, out);
  else launch("conv_rows_kernel", &conv_rows_kernel<K, 1>, grid, kConvThreads, 0, s, state, w, raw, T, C, out);
}

}  // namespace

void conv_silu_rows(cudaStream_t s, float* state, const float* w, const float* raw, int64_t T, int64_t C, int64_t K,
                    float* out) {
  MERE_CHECK(K >= 1 && K <= kMaxConvK && T >= 1 && T < 65536, "cuda conv", "conv width 1..", kMaxConvK,
             " and T 1..65535 expected, got K = ", K, ", T = ", T);
  using Fn = void (*)(cudaStream_t, const float*, const float*, const float*, int, int, float*);
  static constexpr Fn kRows[kMaxConvK] = {launch_conv_rows<1>, launch_conv_rows<2>, launch_conv_rows<3>,
                                          launch_conv_rows<4>, launch_conv_rows<5>, launch_conv_rows<6>,
                                          launch_conv_rows<7>, launch_conv_rows<8>};
  kRows[K - 1](s, state, w, raw, static_cast<int>(T), static_cast<int>(C), out);
  const unsigned bx = static_cast<unsigned>((C + 255) / 256);
  launch("conv_shift_kernel", conv_shift_kernel, bx, 256, 0, s, state, raw, static_cast<int>(T), static_cast<int>(C),
         static_cast<int>(K));
}

}  // namespace mere::cuda::k
