// Element-wise producers fused with qmatvec's prepare step: the value of each input column is
// computed where the prepare loads it (SwiGLU of the MLP, sigmoid gate of the attention output), so
// the product is never stored and one launch replaces two. Each value is rounded exactly as the
// unfused kernel rounds it (k_math.cuh), and the prepare is qmatvec's own (qmatvec_prep.cuh), so the
// workspace is bitwise the one swiglu / sigmoid_gate followed by qmatvec_prepare would write.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/engine/k_math.cuh"
#include "backend/cuda/engine/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/qmatvec_prep.cuh"

namespace mere::cuda::k {
namespace {

struct SwiGluSrc {  // silu(g) * u, g and u: [T, n]
  const float* g;
  const float* u;
  int n;
  __device__ float operator()(int t, int c) const {
    const int64_t i = static_cast<int64_t>(t) * n + c;
    return __fmul_rn(silu(g[i]), u[i]);
  }
};

struct SigmoidGateSrc {  // out[t, h, d] * sigmoid(qg[t, h, 1, d]); out: [T, nh, hd]; qg: [T, nh, 2, hd]
  const float* out;
  const float* qg;
  int nh, hd;
  __device__ float operator()(int t, int c) const {
    const int h = c / hd, d = c - h * hd;
    const int64_t row = static_cast<int64_t>(t) * nh + h;
    return __fmul_rn(out[row * hd + d], sigmoid(qg[row * 2 * hd + hd + d]));
  }
};

// 4-bit: a thread per (row, group, lane slot: 8 or 4 a group, prep::q4_group_lanes); 8-bit: a thread
// per (row, chunk of 16 columns).
template <int BITS, class Src>
__global__ void src_prepare_kernel(Src src, int T, int cols, prep::Layout L) {
  pdl_begin_producer(L.early);
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if constexpr (BITS == 4) {
    const int ng = cols >> 6, lanes = prep::q4_group_lanes(L.parts);
    const bool valid = idx < T * ng * lanes;  // whole lane sets
    const int slot = idx & (lanes - 1);
    const int tg = valid ? idx / lanes : 0;
    const int t = tg / ng, G = tg - t * ng, cb = 64 * G + 16 * (slot & 3);
    float v[16];
#pragma unroll
    for (int e = 0; e < 16; ++e) v[e] = valid ? src(t, cb + e) : 0.0f;
    prep::q4_emit(v, t, G, slot, valid, L);
  } else {
    const int nchunk = cols / 16;
    if (idx >= T * nchunk) return;
    const int t = idx / nchunk, j = idx - t * nchunk;
    float v[16];
#pragma unroll
    for (int e = 0; e < 16; ++e) v[e] = src(t, 16 * j + e);
    prep::q8_emit(v, t, j, L);
  }
}

template <class Src>
void launch(cudaStream_t s, const Src& src, int64_t T, int64_t cols, int bits, float* ws, const char* what) {
  MERE_CHECK((bits == 4 || bits == 8) && cols % 64 == 0 && T >= 1 && T * cols < (int64_t{1} << 31), what,
             "expected 4 or 8 bits, a width divisible by 64 and T*width < 2^31, got ", bits, " bits, T ", T, ", width ",
             cols);
  const prep::Layout L = prep::producer_layout(ws, T, cols, bits);
  const int64_t n = bits == 4 ? T * (cols / 64) * prep::q4_group_lanes(L.parts) : T * (cols / 16);
  // 256 threads a block: blocks of 64 (4x the SMs busy for the 27B's producers) measured the same
  // (s32a, H100: 27B decode 127.7 vs 127.8 tok/s)
  const unsigned blocks = static_cast<unsigned>((n + 255) / 256);
  if (bits == 4)
    cuda::launch(what, &src_prepare_kernel<4, Src>, blocks, 256, 0, s, src, static_cast<int>(T), static_cast<int>(cols),
                 L);
  else
    cuda::launch(what, &src_prepare_kernel<8, Src>, blocks, 256, 0, s, src, static_cast<int>(T), static_cast<int>(cols),
                 L);
}

}  // namespace

void swiglu_prep(cudaStream_t s, const float* g, const float* u, int64_t T, int64_t n, int bits, float* ws) {
  launch(s, SwiGluSrc{g, u, static_cast<int>(n)}, T, n, bits, ws, "swiglu_prep");
}

void sigmoid_gate_prep(cudaStream_t s, const float* out, const float* qg, int64_t T, int64_t nh, int64_t hd, int bits,
                       float* ws) {
  launch(s, SigmoidGateSrc{out, qg, static_cast<int>(nh), static_cast<int>(hd)}, T, nh * hd, bits, ws,
         "sigmoid_gate_prep");
}

}  // namespace mere::cuda::k
