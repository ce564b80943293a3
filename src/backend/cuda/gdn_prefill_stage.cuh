// The GatedDeltaNet prefill kernels' shared staging (gdn_prefill.cu, gdn_prefill_c4.cu): a block owns
// kRowsPerBlock rows of one value head's S and walks the tokens in chunks of kChunk, whose k, q (of the
// head's key head), v (the block's rows), g and beta are copied into shared memory with cp.async,
// double-buffered.
#pragma once
#include <cstddef>
#include <cstdint>

namespace mere::cuda::gdn_stage {

constexpr int kD = 128, kRowsPerBlock = 16, kChunk = 32;

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(dst)), "l"(src));
}
__device__ __forceinline__ void cp4(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_u32(dst)), "l"(src));
}

struct Stage {
  float k[kChunk][kD];
  float q[kChunk][kD];
  float v[kChunk][kRowsPerBlock];
  float g[kChunk];
  float beta[kChunk];
};

// Issues (and commits as one group) the copies of tokens t0 .. t0 + n - 1, n = min(kChunk, T - t0),
// into s; NT threads, tid this one's index. q, k: [T, Hk, kD]; v: [T, Hv, kD]; g, beta: [T, Hv].
// Swz: the 16-byte column chunk j of an odd token's k and q rows lands at j ^ Swz (0: unswizzled;
// gdn_prefill_tc's 4 puts odd tokens' columns in the other half of the banks).
template <int NT, int Swz = 0>
__device__ __forceinline__ void stage_chunk(Stage& s, int tid, int t0, int T, const float* q, const float* k,
                                            const float* v, const float* g, const float* beta, int Hk, int Hv,
                                            int kh, int h, int row0) {
  const int n = min(kChunk, T - t0);
  for (int c = tid; c < n * 32; c += NT) {
    const int t = c >> 5, j = c & 31;
    const size_t off = (static_cast<size_t>(t0 + t) * Hk + kh) * kD + j * 4;
    const int js = (t & 1) ? j ^ Swz : j;
    cp16(&s.k[t][js * 4], k + off);
    cp16(&s.q[t][js * 4], q + off);
  }
  for (int c = tid; c < n * 4; c += NT) {
    const int t = c >> 2, j = c & 3;
    cp16(&s.v[t][j * 4], v + (static_cast<size_t>(t0 + t) * Hv + h) * kD + row0 + j * 4);
  }
  for (int c = tid; c < n; c += NT) {
    cp4(&s.g[c], g + static_cast<size_t>(t0 + c) * Hv + h);
    cp4(&s.beta[c], beta + static_cast<size_t>(t0 + c) * Hv + h);
  }
  asm volatile("cp.async.commit_group;\n" ::);
}

// The top of chunk ch's loop (its first token t0): issues the copies of chunk ch + 1 into the other
// buffer (load(buf, first token)), waits for chunk ch's and makes them visible to the block.
template <class Load>
__device__ __forceinline__ void wait_chunk(int ch, int nchunks, int t0, Load&& load) {
  if (ch + 1 < nchunks) {
    load((ch + 1) & 1, t0 + kChunk);
    asm volatile("cp.async.wait_group 1;\n" ::);
  } else {
    asm volatile("cp.async.wait_group 0;\n" ::);
  }
  __syncthreads();
}

// The end of a chunk's loop: after a barrier (os complete, the chunk's stage free for the load of
// chunk ch + 2), the block's outputs os [kChunk][kRowsPerBlock] of tokens t0 .. t0 + n - 1 to o
// [T, Hv, kD], then a barrier (os read before the next chunk overwrites it).
template <int NT>
__device__ __forceinline__ void write_chunk(const float* os, float* o, int tid, int t0, int n, int Hv, int h, int row0) {
  __syncthreads();
  for (int c = tid; c < n * 4; c += NT) {
    const int t = c >> 2, j = c & 3;
    *reinterpret_cast<float4*>(o + (static_cast<size_t>(t0 + t) * Hv + h) * kD + row0 + j * 4) =
        *reinterpret_cast<const float4*>(os + t * kRowsPerBlock + j * 4);
  }
  __syncthreads();
}

// The lane-holds-4-columns layout of gdn_prefill_lazy and gdn_prefill_c4: slot i of the lane's RW
// rows is row row0 + wr + (i ^ perm) of head h, columns 4 lane .. 4 lane + 3; S = c R on the way out.
template <int RW>
__device__ __forceinline__ void load_rows(const float* S, int h, int row0, int wr, int lane, int perm, float4 (&r)[RW]) {
  const float* base = S + (static_cast<size_t>(h) * kD + row0 + wr) * kD + 4 * lane;
#pragma unroll
  for (int i = 0; i < RW; ++i) r[i] = *reinterpret_cast<const float4*>(base + (i ^ perm) * kD);
}
template <int RW>
__device__ __forceinline__ void scale_rows(float4 (&r)[RW], float x) {  // R <- x R (the fold of c into R)
#pragma unroll
  for (int i = 0; i < RW; ++i) {
    r[i].x = __fmul_rn(r[i].x, x);
    r[i].y = __fmul_rn(r[i].y, x);
    r[i].z = __fmul_rn(r[i].z, x);
    r[i].w = __fmul_rn(r[i].w, x);
  }
}
template <int RW>
__device__ __forceinline__ void store_rows(float* S, int h, int row0, int wr, int lane, int perm, float c,
                                           const float4 (&r)[RW]) {
  float* base = S + (static_cast<size_t>(h) * kD + row0 + wr) * kD + 4 * lane;
#pragma unroll
  for (int i = 0; i < RW; ++i)
    *reinterpret_cast<float4*>(base + (i ^ perm) * kD) =
        make_float4(__fmul_rn(c, r[i].x), __fmul_rn(c, r[i].y), __fmul_rn(c, r[i].z), __fmul_rn(c, r[i].w));
}

}  // namespace mere::cuda::gdn_stage
