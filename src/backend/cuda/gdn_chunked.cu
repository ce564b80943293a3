// GatedDeltaNet prefill, chunked WY/UT form (gdn_chunked.h): gdn_chunk_prep_kernel per (head, chunk)
// writes X = [-W ; e^Γ Q - M W], B = [U ; M U] and Γ to the scratch; gdn_chunk_state_kernel per
// (head, 32 rows of S) walks the chunks: Y = B + X S^T (Vnew and O), S <- e^{Γ_last} S + Vnew'^T K.
#include "backend/cuda/gdn_chunked.h"

#include "backend/cuda/async_copy.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.cuh"

namespace mere::cuda {
namespace {

constexpr int kD = 128;      // Dk = Dv
constexpr int kC = 64;       // chunk length (tokens)
constexpr int kRho = 2 * kC; // rows of X and B: [0, 64) the Vnew half, [64, 128) the O half
// One scratch record per (head, chunk), floats: X [kRho][kD] row-major, B [kRho][kD] row-major, Γ [kC].
constexpr int64_t kRecX = 0, kRecB = int64_t{kRho} * kD, kRecG = 2 * int64_t{kRho} * kD;
constexpr int64_t kRecFloats = kRecG + kC;
static_assert(kRecB % 4 == 0 && kRecG % 4 == 0 && kRecFloats % 4 == 0, "records must keep 16-byte alignment");

__device__ __forceinline__ float comp(const float4& v, int c) {  // c is a compile-time constant after unrolling
  return c == 0 ? v.x : c == 1 ? v.y : c == 2 ? v.z : v.w;
}
// 16-byte shared load as one ld.shared.v4: in the fully unrolled solve the addresses are constants and
// the compiler otherwise splits plain float4 loads into 4 scalar loads. The "memory" clobber keeps it
// from moving across barriers or shared stores.
__device__ __forceinline__ float4 lds4(const float* p) {
  float4 r;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w)
               : "r"(smem_u32(p))
               : "memory");
  return r;
}

// ------------------------------------------------------------------------------------------------
// Phase 1: one block a (head, chunk), 256 threads.
constexpr int kPrepThreads = 256;
constexpr int kTiles = (kC / 4) * (kC / 4 + 1) / 2;  // 136 lower 4x4 tiles (tr >= ts) of a 64x64 matrix
// shared memory, floats
constexpr int kPkT = 0;                  // kT [kD][kC]: kT[j][r] = k_r[j]
constexpr int kPqT = kPkT + kD * kC;     // qT [kD][kC]: qT[j][r] = q_r[j]
constexpr int kPAt = kPqT + kD * kC;     // At [kC][kC]: At[s][r] = -A[r][s] for s < r, else 0
constexpr int kPM = kPAt + kC * kC;      // Ms [kC][kC]: Ms[r][s] = M[r][s] for s <= r, else 0
constexpr int kPG = kPM + kC * kC;       // Γ [kC]
constexpr int kPeG = kPG + kC;           // e^Γ [kC]
constexpr int kPb = kPeG + kC;           // beta [kC]
constexpr int kPrepSmemFloats = kPb + kC;
static_assert(kPAt % 4 == 0 && kPM % 4 == 0 && kPG % 4 == 0, "float4 alignment of the shared arrays");

// q, k: [T, Hk, kD]; v: [T, Hv, kD]; g, beta: [T, Hv]; scratch: [Hv][nchunks][kRecFloats].
__global__ void __launch_bounds__(kPrepThreads, 2)
    gdn_chunk_prep_kernel(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                          const float* __restrict__ g, const float* __restrict__ beta, int T, int Hk, int Hv,
                          int nchunks, float* __restrict__ scratch) {
  pdl_begin();
  extern __shared__ __align__(16) float sp[];
  float* kT = sp + kPkT;
  float* qT = sp + kPqT;
  float* At = sp + kPAt;
  float* Ms = sp + kPM;
  float* Gs = sp + kPG;
  float* eGs = sp + kPeG;
  float* bs = sp + kPb;
  const int tid = threadIdx.x;
  const int c = blockIdx.x % nchunks, h = blockIdx.x / nchunks;
  const int kh = h / (Hv / Hk);
  const int t0 = c * kC, n = min(kC, T - t0);

  // ---- stage k, q transposed (rows r >= n are zero), zero At and Ms, raw g and beta
  for (int idx = tid; idx < kC * (kD / 4); idx += kPrepThreads) {
    const int r = idx % kC, jq = idx / kC;  // lanes take consecutive rows: conflict-free transposed stores
    float4 kv = make_float4(0.f, 0.f, 0.f, 0.f), qv = kv;
    if (r < n) {
      const size_t off = (static_cast<size_t>(t0 + r) * Hk + kh) * kD + 4 * jq;
      kv = __ldg(reinterpret_cast<const float4*>(k + off));
      qv = __ldg(reinterpret_cast<const float4*>(q + off));
    }
    kT[(4 * jq + 0) * kC + r] = kv.x;
    kT[(4 * jq + 1) * kC + r] = kv.y;
    kT[(4 * jq + 2) * kC + r] = kv.z;
    kT[(4 * jq + 3) * kC + r] = kv.w;
    qT[(4 * jq + 0) * kC + r] = qv.x;
    qT[(4 * jq + 1) * kC + r] = qv.y;
    qT[(4 * jq + 2) * kC + r] = qv.z;
    qT[(4 * jq + 3) * kC + r] = qv.w;
  }
  for (int idx = tid; idx < 2 * kC * kC; idx += kPrepThreads) At[idx] = 0.0f;  // At and Ms are adjacent
  if (tid < kC) {
    const bool ok = tid < n;
    Gs[tid] = ok ? __ldg(g + static_cast<size_t>(t0 + tid) * Hv + h) : 0.0f;
    bs[tid] = ok ? __ldg(beta + static_cast<size_t>(t0 + tid) * Hv + h) : 0.0f;
  }
  __syncthreads();
  if (tid == 0) {  // Γ in token order, as ops::gdn_chunked
    float acc = 0.0f;
    for (int r = 0; r < kC; ++r) {
      acc += Gs[r];
      Gs[r] = acc;
    }
  }
  __syncthreads();

  // ---- e^Γ; Gram tiles -> At, Ms
  if (tid < kC) eGs[tid] = expf(Gs[tid]);
  if (tid < kTiles) {
    int tr = 0, ts = tid;  // tile index tid = tr (tr + 1) / 2 + ts, 0 <= ts <= tr
    while (ts > tr) {
      ts -= tr + 1;
      ++tr;
    }
    float dk[4][4], dq[4][4];
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int b = 0; b < 4; ++b) dk[a][b] = dq[a][b] = 0.0f;
#pragma unroll 4
    for (int j = 0; j < kD; ++j) {
      const float4 kr = *reinterpret_cast<const float4*>(kT + j * kC + 4 * tr);
      const float4 qa = *reinterpret_cast<const float4*>(qT + j * kC + 4 * tr);
      const float4 ks = *reinterpret_cast<const float4*>(kT + j * kC + 4 * ts);
#pragma unroll
      for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int b = 0; b < 4; ++b) {
          dk[a][b] = fmaf(comp(kr, a), comp(ks, b), dk[a][b]);
          dq[a][b] = fmaf(comp(qa, a), comp(ks, b), dq[a][b]);
        }
    }
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const int r = 4 * tr + a, s = 4 * ts + b;
        if (s <= r) {
          const float e = expf(Gs[r] - Gs[s]);
          Ms[r * kC + s] = dq[a][b] * e;
          if (s < r) At[s * kC + r] = -bs[r] * dk[a][b] * e;
        }
      }
  }
  __syncthreads();

  // ---- q row-major into the kT area (free now): qr[r][j], rows r >= n zero; read after the solve
  float* qr = sp + kPkT;
  for (int idx = tid; idx < kC * (kD / 4); idx += kPrepThreads) {
    const int r = idx / (kD / 4), jq = idx % (kD / 4);
    float4 qv = make_float4(0.f, 0.f, 0.f, 0.f);
    if (r < n) qv = __ldg(reinterpret_cast<const float4*>(q + (static_cast<size_t>(t0 + r) * Hk + kh) * kD + 4 * jq));
    *reinterpret_cast<float4*>(qr + r * kD + 4 * jq) = qv;
  }

  // ---- one thread a column: tid < 128 -> U column i = tid (rhs beta v), else W column j = tid - 128
  // (rhs beta e^Γ k). Rows r >= n have rhs 0 and zero rows of A, so their solution is 0.
  const bool isW = tid >= kD;
  const int col = tid & (kD - 1);
  float z[kC];
  if (!isW) {
#pragma unroll
    for (int r = 0; r < kC; ++r)
      z[r] = r < n ? bs[r] * __ldg(v + (static_cast<size_t>(t0 + r) * Hv + h) * kD + col) : 0.0f;
  } else {
#pragma unroll
    for (int r = 0; r < kC; ++r)
      z[r] = r < n ? bs[r] * eGs[r] * __ldg(k + (static_cast<size_t>(t0 + r) * Hk + kh) * kD + col) : 0.0f;
  }
  // (I + A) z = rhs, right-looking: once z[s] is final, z[r] += At[s][r] z[s] for every r > s.
#pragma unroll
  for (int s = 0; s < kC - 1; ++s) {
    const float zs = z[s];
#pragma unroll
    for (int r4 = (s + 1) / 4; r4 < kC / 4; ++r4) {
      const float4 a = lds4(At + s * kC + 4 * r4);
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (4 * r4 + e > s) z[4 * r4 + e] = fmaf(comp(a, e), zs, z[4 * r4 + e]);
    }
  }
  __syncthreads();  // qr complete
  // y = M z (M lower triangular incl. the diagonal; the zeros above it in the diagonal 4-group are
  // multiplied too), then this column's outputs: U threads write B rows r (U) and 64 + r (M U),
  // W threads X rows r (-W) and 64 + r (e^Γ q - M W).
  float* rec = scratch + (static_cast<size_t>(h) * nchunks + c) * kRecFloats;
  float* out = rec + (isW ? kRecX : kRecB) + col;
  const float sgn = isW ? -1.0f : 1.0f;
#pragma unroll
  for (int r = 0; r < kC; ++r) {
    float p0 = 0.0f, p1 = 0.0f, p2 = 0.0f, p3 = 0.0f;
#pragma unroll
    for (int s4 = 0; s4 <= r / 4; ++s4) {
      const float4 m = lds4(Ms + r * kC + 4 * s4);
      p0 = fmaf(m.x, z[4 * s4 + 0], p0);
      p1 = fmaf(m.y, z[4 * s4 + 1], p1);
      p2 = fmaf(m.z, z[4 * s4 + 2], p2);
      p3 = fmaf(m.w, z[4 * s4 + 3], p3);
    }
    const float y = (p0 + p1) + (p2 + p3);
    const float qv = qr[r * kD + col];
    out[r * kD] = sgn * z[r];
    out[(kC + r) * kD] = isW ? fmaf(eGs[r], qv, -y) : y;
  }
  if (tid < kC) rec[kRecG + tid] = Gs[tid];
}

// ------------------------------------------------------------------------------------------------
// Phase 2: one block a (head, 32 rows of S), 256 threads, sequential over the chunks.
constexpr int kR = 32;  // rows of S a block
constexpr int kStateThreads = 256;
constexpr int kNS = 3;  // cp.async ring slots
constexpr int kTilesPerChunk = 6;  // X column slices 0..3 (32 columns each), K row slices 4..5 (32 tokens each)
constexpr int kXStride = 36;       // X slice [kRho][32] in a slot, padded
constexpr int kKStride = 132;      // K slice [32][kD] in a slot, padded
constexpr int kBStride = 40;       // B columns of the block [kRho][kR], padded
constexpr int kSStride = 132;      // S rows of the block [kR][kD], padded
constexpr int kVStride = 40;       // Vnew' [kC][kR], padded
constexpr int kSlot = kRho * kXStride > 32 * kKStride ? kRho * kXStride : 32 * kKStride;
// shared memory, floats
constexpr int kSRing = 0;
constexpr int kSB = kSRing + kNS * kSlot;
constexpr int kSG = kSB + kRho * kBStride;  // Γ of two chunks [2][kC] (chunk parity)
constexpr int kSS = kSG + 2 * kC;
constexpr int kSV = kSS + kR * kSStride;
constexpr int kStateSmemFloats = kSV + kC * kVStride;
static_assert(kSlot % 4 == 0 && kSB % 4 == 0 && kSG % 4 == 0 && kSS % 4 == 0 && kSV % 4 == 0,
              "float4 alignment of the shared arrays");
static_assert(kStateThreads == 8 * kR && kR == 32, "thread mappings below assume 32 rows and 256 threads");

// S: [Hv, kD, kD] (in/out); k: [T, Hk, kD]; scratch: [Hv][nchunks][kRecFloats] (from phase 1);
// o: [T, Hv, kD].
__global__ void __launch_bounds__(kStateThreads, 2)
    gdn_chunk_state_kernel(float* __restrict__ S, const float* __restrict__ k, const float* __restrict__ scratch,
                           int T, int Hk, int Hv, int nchunks, float* __restrict__ o) {
  pdl_begin();
  extern __shared__ __align__(16) float sp[];
  float* ring = sp + kSRing;
  float* Bs = sp + kSB;
  float* Gs2 = sp + kSG;
  float* Ss = sp + kSS;
  float* Vs = sp + kSV;
  const int tid = threadIdx.x;
  const int h = blockIdx.x / (kD / kR), i0 = (blockIdx.x % (kD / kR)) * kR;
  const int kh = h / (Hv / Hk);
  // Y = B + X S^T: thread rows rho = rg + 32 a, columns i = ig + 8 b (a, b < 4)
  const int rg = tid >> 3, ig = tid & 7;
  // S += Vnew'^T K: thread rows i = 4 ig3 + b, columns j = 4 jg + e (b, e < 4)
  const int jg = tid >> 3, ig3 = tid & 7;
  const int ntiles = kTilesPerChunk * nchunks;
  const size_t head_rec = static_cast<size_t>(h) * nchunks;

  // this block's rows of S
  float* Sg = S + (static_cast<size_t>(h) * kD + i0) * kD;
  for (int idx = tid; idx < kR * (kD / 4); idx += kStateThreads) {
    const int i = idx / (kD / 4), jq = idx % (kD / 4);
    *reinterpret_cast<float4*>(Ss + i * kSStride + 4 * jq) = *reinterpret_cast<const float4*>(Sg + i * kD + 4 * jq);
  }

  // Issues the copies of tile tau into slot tau % kNS (and, with a chunk's first tile, its B columns
  // and Γ), then commits a group (an empty one past the last tile, so the wait count stays uniform).
  auto issue = [&](int tau) {
    if (tau < ntiles) {
      const int c = tau / kTilesPerChunk, u = tau % kTilesPerChunk;
      float* slot = ring + (tau % kNS) * kSlot;
      const float* rec = scratch + (head_rec + c) * kRecFloats;
      if (u < 4) {  // X[:, 32u .. 32u+31]
        for (int idx = tid; idx < kRho * 8; idx += kStateThreads) {
          const int rho = idx >> 3, p = idx & 7;
          cp_async16(smem_u32(slot + rho * kXStride + 4 * p), rec + kRecX + rho * kD + 32 * u + 4 * p, 16);
        }
        if (u == 0) {
          for (int idx = tid; idx < kRho * (kR / 4); idx += kStateThreads) {
            const int rho = idx >> 3, p = idx & 7;
            cp_async16(smem_u32(Bs + rho * kBStride + 4 * p), rec + kRecB + rho * kD + i0 + 4 * p, 16);
          }
          if (tid < kC / 4) cp_async16(smem_u32(Gs2 + (c & 1) * kC + 4 * tid), rec + kRecG + 4 * tid, 16);
        }
      } else {  // K rows 32 (u - 4) .. +31 of the chunk; rows past T are zero-filled
        const int r0 = 32 * (u - 4);
        for (int idx = tid; idx < 32 * (kD / 4); idx += kStateThreads) {
          const int rr = idx >> 5, p = idx & 31;
          const int t = c * kC + r0 + rr;
          const float* src = t < T ? k + (static_cast<size_t>(t) * Hk + kh) * kD + 4 * p : k;
          cp_async16(smem_u32(slot + rr * kKStride + 4 * p), src, t < T ? 16 : 0);
        }
      }
    }
    cp_async_commit();
  };
  // Before consuming tile tau: its group is complete (all but the newest kNS - 2 are), every thread's
  // copies are visible, and every thread is done with tile tau - 1, whose slot the next issue reuses.
  auto advance = [&](int tau) {
    cp_async_wait<kNS - 2>();
    __syncthreads();
    issue(tau + kNS - 1);
  };

#pragma unroll
  for (int p = 0; p < kNS - 1; ++p) issue(p);

  for (int c = 0; c < nchunks; ++c) {
    const int t0 = c * kC;
    const float* G = Gs2 + (c & 1) * kC;
    // ---- Y = B + X S^T
    float acc[4][4];
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int b = 0; b < 4; ++b) acc[a][b] = 0.0f;
    for (int u = 0; u < 4; ++u) {
      const int tau = kTilesPerChunk * c + u;
      advance(tau);
      const float* xs = ring + (tau % kNS) * kSlot;
      const float* ss = Ss + 32 * u;
#pragma unroll 2
      for (int jj = 0; jj < 32; jj += 4) {
        float4 xa[4], sb[4];
#pragma unroll
        for (int a = 0; a < 4; ++a) xa[a] = *reinterpret_cast<const float4*>(xs + (rg + 32 * a) * kXStride + jj);
#pragma unroll
        for (int b = 0; b < 4; ++b) sb[b] = *reinterpret_cast<const float4*>(ss + (ig + 8 * b) * kSStride + jj);
#pragma unroll
        for (int a = 0; a < 4; ++a)
#pragma unroll
          for (int b = 0; b < 4; ++b) {
            acc[a][b] = fmaf(xa[a].x, sb[b].x, acc[a][b]);
            acc[a][b] = fmaf(xa[a].y, sb[b].y, acc[a][b]);
            acc[a][b] = fmaf(xa[a].z, sb[b].z, acc[a][b]);
            acc[a][b] = fmaf(xa[a].w, sb[b].w, acc[a][b]);
          }
      }
    }
    // epilogue (B and Γ of chunk c came with its tile 0): rows < 64 -> Vnew e^{Γ_last - Γ_r} into
    // Vs, rows >= 64 -> o of token t0 + rho - 64
    const float gl = G[kC - 1];
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      const int rho = rg + 32 * a;
      if (a < 2) {
        const float f = expf(gl - G[rho]);
#pragma unroll
        for (int b = 0; b < 4; ++b) Vs[rho * kVStride + ig + 8 * b] = (Bs[rho * kBStride + ig + 8 * b] + acc[a][b]) * f;
      } else {
        const int t = t0 + rho - kC;
        if (t < T) {
          float* orow = o + (static_cast<size_t>(t) * Hv + h) * kD + i0;
#pragma unroll
          for (int b = 0; b < 4; ++b) orow[ig + 8 * b] = Bs[rho * kBStride + ig + 8 * b] + acc[a][b];
        }
      }
    }
    // ---- S <- e^{Γ_last} S + Vnew'^T K
    float sacc[4][4];
#pragma unroll
    for (int b = 0; b < 4; ++b)
#pragma unroll
      for (int e = 0; e < 4; ++e) sacc[b][e] = 0.0f;
    for (int u = 4; u < kTilesPerChunk; ++u) {
      const int tau = kTilesPerChunk * c + u;
      advance(tau);  // also orders the Vs writes above before the reads below
      const float* ks = ring + (tau % kNS) * kSlot;
      const float* vs = Vs + 32 * (u - 4) * kVStride;
#pragma unroll 4
      for (int rr = 0; rr < 32; ++rr) {
        const float4 vv = *reinterpret_cast<const float4*>(vs + rr * kVStride + 4 * ig3);
        const float4 kk = *reinterpret_cast<const float4*>(ks + rr * kKStride + 4 * jg);
#pragma unroll
        for (int b = 0; b < 4; ++b) {
          const float vb = comp(vv, b);
          sacc[b][0] = fmaf(vb, kk.x, sacc[b][0]);
          sacc[b][1] = fmaf(vb, kk.y, sacc[b][1]);
          sacc[b][2] = fmaf(vb, kk.z, sacc[b][2]);
          sacc[b][3] = fmaf(vb, kk.w, sacc[b][3]);
        }
      }
    }
    // every thread finished reading S for this chunk's Y before the last advance; each S element is
    // owned by one thread here; the next chunk reads S after its first advance
    const float el = expf(gl);
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      float4* sp4 = reinterpret_cast<float4*>(Ss + (4 * ig3 + b) * kSStride + 4 * jg);
      float4 s = *sp4;
      s.x = fmaf(s.x, el, sacc[b][0]);
      s.y = fmaf(s.y, el, sacc[b][1]);
      s.z = fmaf(s.z, el, sacc[b][2]);
      s.w = fmaf(s.w, el, sacc[b][3]);
      *sp4 = s;
    }
  }
  cp_async_wait<0>();  // only empty groups can be outstanding here
  __syncthreads();
  for (int idx = tid; idx < kR * (kD / 4); idx += kStateThreads) {
    const int i = idx / (kD / 4), jq = idx % (kD / 4);
    *reinterpret_cast<float4*>(Sg + i * kD + 4 * jq) = *reinterpret_cast<const float4*>(Ss + i * kSStride + 4 * jq);
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

int64_t gdn_chunked_scratch_floats(int64_t T, int64_t Hv) {
  MERE_CHECK(T >= 1 && Hv >= 1, "cuda gdn_chunked_scratch_floats", "expected T >= 1 and Hv >= 1, got T = ", T,
             ", Hv = ", Hv);
  return Hv * ((T + kC - 1) / kC) * kRecFloats;
}

void gdn_prefill_chunked(CudaDevice& dev, float* S, const float* q, const float* k, const float* v, const float* g,
                         const float* beta, int64_t T, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, float* scratch,
                         float* o) {
  constexpr const char* kWhere = "cuda gdn_prefill_chunked";
  MERE_CHECK(Dk == kD && Dv == kD, kWhere, "head size: expected Dk = Dv = 128, got Dk = ", Dk, ", Dv = ", Dv);
  MERE_CHECK(Hk >= 1 && Hv >= Hk && Hv % Hk == 0, kWhere, "heads: expected Hv a positive multiple of Hk, got Hk = ", Hk,
             ", Hv = ", Hv);
  MERE_CHECK(T >= 1 && T * Hv * kD < (int64_t{1} << 31), kWhere, "token count out of range, got ", T);
  MERE_CHECK(S && q && k && v && g && beta && scratch && o, kWhere,
             "expected non-null S, q, k, v, g, beta, scratch and o");
  MERE_CHECK(aligned16(S) && aligned16(q) && aligned16(k) && aligned16(v) && aligned16(scratch) && aligned16(o),
             kWhere, "expected S, q, k, v, scratch and o 16-byte aligned");
  DeviceGuard guard(dev.ordinal());
  const int64_t nchunks = (T + kC - 1) / kC;
  const int smem1 = kPrepSmemFloats * static_cast<int>(sizeof(float));
  const int smem2 = kStateSmemFloats * static_cast<int>(sizeof(float));
  MERE_CUDA_CHECK(cudaFuncSetAttribute(gdn_chunk_prep_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem1));
  MERE_CUDA_CHECK(cudaFuncSetAttribute(gdn_chunk_state_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem2));
  launch("gdn_chunk_prep_kernel", gdn_chunk_prep_kernel, static_cast<unsigned>(Hv * nchunks), kPrepThreads, smem1,
         dev.stream(), q, k, v, g, beta, static_cast<int>(T), static_cast<int>(Hk), static_cast<int>(Hv),
         static_cast<int>(nchunks), scratch);
  launch("gdn_chunk_state_kernel", gdn_chunk_state_kernel, static_cast<unsigned>(Hv * (kD / kR)), kStateThreads, smem2,
         dev.stream(), S, k, scratch, static_cast<int>(T), static_cast<int>(Hk), static_cast<int>(Hv),
         static_cast<int>(nchunks), o);
}

}  // namespace mere::cuda
