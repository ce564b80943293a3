// MoE routing and combination on the device (mirrors Qwen35Model::ffn_block): softmax over the
// router logits in fp32, top-k by probability with the lowest index first on ties, renormalised;
// the selected experts run through k::gemv with the ids read on the device (no host round trip).
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/engine/kernels.h"

namespace mere::cuda::k {
namespace {

// one thread per row: E is at most a few hundred, the order is the CPU's
__global__ void moe_route_kernel(const float* logits, int E, int K, bool renorm, int32_t* idx, float* w) {
  extern __shared__ float sm[];  // p[E], taken[E]
  float* p = sm;
  float* taken = sm + E;
  const int t = blockIdx.x;
  if (threadIdx.x != 0) return;
  const float* lg = logits + static_cast<int64_t>(t) * E;
  float mx = lg[0];
  for (int e = 1; e < E; ++e) mx = fmaxf(mx, lg[e]);
  float sum = 0.0f;
  for (int e = 0; e < E; ++e) {
    p[e] = expf(__fsub_rn(lg[e], mx));
    sum = __fadd_rn(sum, p[e]);
    taken[e] = 0.0f;
  }
  for (int e = 0; e < E; ++e) p[e] = __fdiv_rn(p[e], sum);
  float topsum = 0.0f;
  for (int k = 0; k < K; ++k) {
    int best = -1;
    for (int e = 0; e < E; ++e)
      if (taken[e] == 0.0f && (best < 0 || p[e] > p[best])) best = e;
    taken[best] = 1.0f;
    idx[t * K + k] = best;
    topsum = __fadd_rn(topsum, p[best]);
  }
  for (int k = 0; k < K; ++k) {
    const float pk = p[idx[t * K + k]];
    w[t * K + k] = renorm ? __fdiv_rn(pk, topsum) : pk;
  }
}

__global__ void moe_combine_kernel(const float* y, const float* w, const float* shared, const float* sg, int K, int H,
                                   float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int t = blockIdx.y;
  if (i >= H) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc = __fmaf_rn(w[t * K + k], y[(static_cast<int64_t>(t) * K + k) * H + i], acc);
  const float s = 1.0f / (1.0f + expf(-sg[t]));
  out[static_cast<int64_t>(t) * H + i] = __fmaf_rn(s, shared[static_cast<int64_t>(t) * H + i], acc);
}

}  // namespace

void moe_route(cudaStream_t s, const float* logits, int64_t T, int64_t E, int64_t K, bool renorm, int32_t* idx,
               float* w) {
  MERE_CHECK(E >= 1 && E <= 4096 && K >= 1 && K <= E, "cuda moe", "unsupported experts: E ", E, " top-k ", K);
  moe_route_kernel<<<static_cast<unsigned>(T), 32, static_cast<size_t>(2 * E) * sizeof(float), s>>>(
      logits, static_cast<int>(E), static_cast<int>(K), renorm, idx, w);
  MERE_CUDA_CHECK_LAUNCH("moe_route_kernel");
}

void moe_combine(cudaStream_t s, const float* y, const float* w, const float* shared, const float* sg, int64_t T,
                 int64_t K, int64_t H, float* out) {
  dim3 grid(static_cast<unsigned>((H + 255) / 256), static_cast<unsigned>(T));
  moe_combine_kernel<<<grid, 256, 0, s>>>(y, w, shared, sg, static_cast<int>(K), static_cast<int>(H), out);
  MERE_CUDA_CHECK_LAUNCH("moe_combine_kernel");
}

}  // namespace mere::cuda::k
