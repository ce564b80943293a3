// Device side of qmatvec's prepare step (the workspace layout is described in qmatvec.h): the code
// that turns x into the prepared workspace, shared by qmatvec_prepare (qmatvec.cu, qmatvec_tc.cu)
// and the engine's fused producers (RMSNorm / SwiGLU / attention gate / gated RMSNorm followed by
// the prepare in one launch, engine/k_prep.cu), so a fused producer writes bitwise the workspace
// that the producer followed by qmatvec_prepare would.
//
// Workspace of T rows of `cols` inputs:
//   SIMT part  xs: T rows of xs_stride(cols, bits) floats, x prescaled per code slot and stored
//                  lane-interleaved (float4 unit u of chunk j at ((j/32)*UPC + u)*32 + j%32);
//              sx: [T, cols/(128/bits)] sums of each 16-byte chunk's x;
//   4-bit adds, at tc_offset (16-byte aligned), the tensor-core part
//              frag: [T, cols/64, 8 lane slots, 2 uint4] f16 hi/lo B fragments; gsx: [T, cols/64] {sum, 2^-s};
//   and, at int_offset, the integer part (int_emit): dg: [T, spans, 6 units, 32 lanes] uint4 s8 digits,
//              dsx: [T, cols/32] {2^-e, sum};
//   and, at gm_offset, the group-integer part (gm_emit, qmatvec_gmma.cu): gdg: [cols/64, 3 digits, T,
//              4 quarters] uint4 s8 digits, gsx2: [cols/64, T] {2^-e, sum of the group} (group-major:
//              the tokens of one group share cache lines).
#pragma once
#include <cuda_fp16.h>

#include <cfloat>
#include <cstdint>

#include "backend/cuda/launch.cuh"

namespace mere::cuda::prep {

// Floats of one row t of the SIMT layout: whole spans of 32 chunks (the last one padded).
__host__ __device__ inline int64_t xs_stride(int64_t cols, int bits) {
  const int64_t E = 128 / bits, nchunk = cols / E;
  return (nchunk + 31) / 32 * 32 * E;
}
__host__ __device__ inline int64_t simt_floats(int64_t T, int64_t cols, int bits) {
  return T * xs_stride(cols, bits) + T * (cols * bits / 128);
}
__host__ __device__ inline int64_t tc_offset(int64_t T, int64_t cols) { return (simt_floats(T, cols, 4) + 3) / 4 * 4; }
__host__ __device__ inline int64_t tc_floats(int64_t T, int64_t cols) { return T * (cols / 64) * 66; }
// 4-bit integer layout (qmatvec_int.cu): per (token, chunk of 32 columns) the three base-256 digits
// of x * 2^e as s8, 6 uint4 units [T][span of 32 chunks][unit][lane], then {2^-e, sum of x} [T][chunk].
__host__ __device__ inline int64_t int_spans(int64_t cols) { return (cols / 32 + 31) / 32; }
__host__ __device__ inline int64_t int_offset(int64_t T, int64_t cols) {
  return (tc_offset(T, cols) + tc_floats(T, cols) + 3) / 4 * 4;
}
__host__ __device__ inline int64_t int_floats(int64_t T, int64_t cols) {
  return T * int_spans(cols) * 6 * 32 * 4 + T * (cols / 32) * 2;
}
// Group-integer layout (qmatvec_gmma.cu): per (token, group of 64 columns) three base-256 digits of
// x * 2^e (one e a group) as s8, [group][digit][T][quarter] uint4, then {2^-e, sum} [group][T].
__host__ __device__ inline int64_t gm_offset(int64_t T, int64_t cols) {
  return (int_offset(T, cols) + int_floats(T, cols) + 3) / 4 * 4;
}
__host__ __device__ inline int64_t gm_floats(int64_t T, int64_t cols) { return T * (cols / 64) * (3 * 4 * 4 + 2); }
__host__ __device__ inline int64_t q4_floats(int64_t T, int64_t cols) { return gm_offset(T, cols) + gm_floats(T, cols); }

// The parts of a 4-bit workspace (a producer writes only those its consumers read: Layout::parts).
constexpr int kPartSimt = 1;  // xs, sx: the 4-bit SIMT kernel (MERE_CUDA_QMATVEC=simt)
constexpr int kPartFrag = 2;  // frag, gsx: the tensor-core kernel (MERE_CUDA_QMATVEC=tc)
constexpr int kPartInt = 4;   // dg, dsx: the integer kernels (the default)
constexpr int kPartGm = 8;    // gdg, gsx2: the group-integer kernel (MERE_CUDA_QMATVEC=mma, tiled weights)
constexpr int kPartsAll = kPartSimt | kPartFrag | kPartInt | kPartGm;

// Pointers into a workspace prepared for T rows of `cols` inputs at `bits` (frag/gsx: 4-bit only).
struct Layout {
  float* xs = nullptr;
  float* sx = nullptr;
  uint4* frag = nullptr;
  float2* gsx = nullptr;
  uint4* dg = nullptr;    // integer layout: digit units
  float2* dsx = nullptr;  // integer layout: {2^-e, sum} per chunk
  uint4* gdg = nullptr;    // group-integer layout: digit words
  float2* gsx2 = nullptr;  // group-integer layout: {2^-e, sum} per group
  int stride = 0, cols = 0, spans = 0, T = 0;
  int early = 0;  // the producer writing this layout triggers the next launch early (launch.cuh)
  int parts = kPartsAll;  // 4-bit: the parts q4_emit writes (8-bit: the SIMT layout, always)
};
__host__ __device__ inline Layout layout(float* ws, int64_t T, int64_t cols, int bits) {
  Layout L;
  L.xs = ws;
  L.stride = static_cast<int>(xs_stride(cols, bits));
  L.sx = ws + T * L.stride;
  L.cols = static_cast<int>(cols);
  L.T = static_cast<int>(T);
  if (bits == 4) {
    float* tc = ws + tc_offset(T, cols);
    L.frag = reinterpret_cast<uint4*>(tc);
    L.gsx = reinterpret_cast<float2*>(tc + T * (cols / 64) * 64);
    float* in = ws + int_offset(T, cols);
    L.spans = static_cast<int>(int_spans(cols));
    L.dg = reinterpret_cast<uint4*>(in);
    L.dsx = reinterpret_cast<float2*>(in + T * int_spans(cols) * 6 * 32 * 4);
    float* gm = ws + gm_offset(T, cols);
    L.gdg = reinterpret_cast<uint4*>(gm);
    L.gsx2 = reinterpret_cast<float2*>(gm + T * (cols / 64) * 48);
  }
  return L;
}

// The 4-bit parts the process's matvec kernels read (qmatvec.cu, from MERE_CUDA_QMATVEC; with
// MERE_CUDA_PREP_PARTS=all every part): the engine's producers write only these.
int producer_parts();

// The layout a producer kernel writes for the next matvec (rms_norm_prep, gated_rms_norm_prep, the
// src prepares): with MERE_CUDA_PDL_EARLY the producer lets that matvec launch before its own wait
// (launch.cuh pdl_begin_producer), so the matvec's blocks land and prefetch their weights earlier;
// a 4-bit layout holds only the parts the process's kernels read (producer_parts).
inline Layout producer_layout(float* ws, int64_t T, int64_t cols, int bits) {
  Layout L = layout(ws, T, cols, bits);
  L.early = pdl_early() ? 1 : 0;
  if (bits == 4) L.parts = producer_parts();
  return L;
}

// x prescale of the SIMT layout for a column's code slot inside its word (undoes the 16^p of the
// SIMT kernel's magic-number dequantisation): 4-bit slots 0..7, 8-bit slots 0..3.
__device__ __forceinline__ float q4_slot_prescale(int s) {
  return s == 0 || s == 5 ? 1.0f
                          : (s == 1 || s == 6 ? 0.0625f
                                              : (s == 2 || s == 7 ? 0.00390625f
                                                                  : (s == 3 ? 0.000244140625f : 1.52587890625e-05f)));
}
__device__ __forceinline__ float q8_slot_prescale(int s) { return (s & 1) ? 0.00390625f : 1.0f; }

__device__ __forceinline__ uint32_t pack_half2(__half lo, __half hi) {
  return static_cast<uint32_t>(__half_as_ushort(lo)) | (static_cast<uint32_t>(__half_as_ushort(hi)) << 16);
}

// Integer layout of one half (h = 0: columns 0..15, 1: 16..31) of chunk j of row t: x * 2^e rounded
// to an integer X (|X| <= 2^21; e from the chunk's max |x|, which lands in [2^20, 2^21)), split into
// balanced base-256 digits X = d0 + 256 d1 + 65536 d2 (d0, d1 in [-128, 127], |d2| <= 33), packed as
// s8 to match the nibble order of a code word: word k (columns 8k..8k+7) has its even columns in the
// low nibbles and its odd columns in the high nibbles, so unit 2d is {digit d of columns 8k, 8k+2,
// 8k+4, 8k+6}_k=0..3 and unit 2d+1 the odd columns. {2^-e, sum} goes with h = 0; a chunk holding a
// non-finite value gets 2^-e = NaN, so its products are NaN (the integer digits would lose it).
__device__ __forceinline__ void int_emit(const float (&v)[16], float cmax, float csum, int t, int j, int h,
                                         const Layout& L) {
  const bool finite = cmax <= FLT_MAX && fabsf(csum) <= FLT_MAX;
  int e = 0;
  if (finite && cmax > 0.0f) {
    const int ex = static_cast<int>((__float_as_uint(cmax) >> 23) & 0xFFu) - 126;  // cmax in [2^(ex-1), 2^ex)
    e = min(max(21 - ex, -125), 125);
  }
  const float p = __uint_as_float(static_cast<uint32_t>(127 + e) << 23);
  const float inv = finite ? __uint_as_float(static_cast<uint32_t>(127 - e) << 23) : __int_as_float(0x7fc00000);
  uint32_t w[6][2] = {};  // [unit][word k - 2h]
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const int X = finite ? __float2int_rn(__fmul_rn(v[i], p)) : 0;
    const int d0 = static_cast<int8_t>(X & 0xFF);
    const int x1 = (X - d0) >> 8;
    const int d1 = static_cast<int8_t>(x1 & 0xFF);
    const int d2 = (x1 - d1) >> 8;
    const int kk = i >> 3, col = i & 7, odd = col & 1, byte = col >> 1;
    w[0 + odd][kk] |= (static_cast<uint32_t>(d0) & 0xFFu) << (8 * byte);
    w[2 + odd][kk] |= (static_cast<uint32_t>(d1) & 0xFFu) << (8 * byte);
    w[4 + odd][kk] |= (static_cast<uint32_t>(d2) & 0xFFu) << (8 * byte);
  }
  uint2* base = reinterpret_cast<uint2*>(L.dg + ((static_cast<size_t>(t) * L.spans + (j >> 5)) * 6) * 32 + (j & 31)) + h;
#pragma unroll
  for (int u = 0; u < 6; ++u) base[u * 32 * 2] = make_uint2(w[u][0], w[u][1]);
  if (h == 0) L.dsx[static_cast<size_t>(t) * (L.cols / 32) + j] = make_float2(inv, csum);
}

// Group-integer layout of quarter q (columns 16q .. 16q+15) of group G of row t: as int_emit, but
// one exponent for the whole group (gmax = the group's max |x|, NaN if it holds one; gsum = its sum),
// and digit d of the quarter as one uint4 {even columns 0,2,4,6; odd 1,3,5,7; even 8..14; odd 9..15}
// (the order in which a code word's low / high nibbles meet them in qmatvec_gmma.cu's mma).
__device__ __forceinline__ void gm_emit(const float (&v)[16], float gmax, float gsum, int t, int G, int q,
                                        const Layout& L) {
  const bool finite = gmax <= FLT_MAX && fabsf(gsum) <= FLT_MAX;
  int e = 0;
  if (finite && gmax > 0.0f) {
    const int ex = static_cast<int>((__float_as_uint(gmax) >> 23) & 0xFFu) - 126;  // gmax in [2^(ex-1), 2^ex)
    e = min(max(21 - ex, -125), 125);
  }
  const float p = __uint_as_float(static_cast<uint32_t>(127 + e) << 23);
  const float inv = finite ? __uint_as_float(static_cast<uint32_t>(127 - e) << 23) : __int_as_float(0x7fc00000);
  uint32_t w[3][4] = {};  // [digit][word]
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const int X = finite ? __float2int_rn(__fmul_rn(v[i], p)) : 0;
    const int d0 = static_cast<int8_t>(X & 0xFF);
    const int x1 = (X - d0) >> 8;
    const int d1 = static_cast<int8_t>(x1 & 0xFF);
    const int d2 = (x1 - d1) >> 8;
    const int col = i & 7, word = 2 * (i >> 3) + (col & 1), byte = col >> 1;
    w[0][word] |= (static_cast<uint32_t>(d0) & 0xFFu) << (8 * byte);
    w[1][word] |= (static_cast<uint32_t>(d1) & 0xFFu) << (8 * byte);
    w[2][word] |= (static_cast<uint32_t>(d2) & 0xFFu) << (8 * byte);
  }
  uint4* o = L.gdg + (static_cast<size_t>(G) * 3 * L.T + t) * 4 + q;
#pragma unroll
  for (int d = 0; d < 3; ++d) o[static_cast<size_t>(d) * L.T * 4] = make_uint4(w[d][0], w[d][1], w[d][2], w[d][3]);
  if (q == 0) L.gsx2[static_cast<size_t>(G) * L.T + t] = make_float2(inv, gsum);
}

// The 32-column chunk's sum and max |x| from its two halves in lanes l and l ^ 1 (v = this lane's 16
// columns): the halves' sums in column order, added (the same bits in both lanes); the max
// NaN-propagating (fmaxf drops NaN). Both lanes must call it (shuffles).
__device__ __forceinline__ void half_chunk_stats(const float (&v)[16], float* cs, float* cmax) {
  constexpr uint32_t kFull = 0xffffffffu;
  float qs = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; ++i) qs = __fadd_rn(qs, v[i]);
  *cs = __fadd_rn(qs, __shfl_xor_sync(kFull, qs, 1));
  float m16 = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; ++i) m16 = fabsf(v[i]) > m16 || v[i] != v[i] ? fabsf(v[i]) : m16;
  const float m32o = __shfl_xor_sync(kFull, m16, 1);
  *cmax = m32o > m16 || m32o != m32o ? m32o : m16;
}

// 4-bit: one lane slot (0..7: slot = 4*lo + quarter q) of the 8 consecutive lanes that prepare
// group G of row t (4 lanes, slots 0..3, where L.parts has no fragments: q4_group_lanes); v = the 16
// columns 16q .. 16q+15 of the group. All 32 lanes of the warp must call it together (shuffles inside
// 4-lane sets); lanes with valid = false write nothing. Writes the
// parts of L.parts (warp-uniform): the slot's B-fragment words and the group's {sum, 2^-s} (slot 0)
// (kPartFrag); for slots 0..3, the SIMT layout of its 16 columns and (even q) the 32-column chunk sum
// (kPartSimt), the integer layout (kPartInt), the group-integer layout (kPartGm). Each part's bits do
// not depend on which others are written.
__device__ __forceinline__ void q4_emit(const float (&v)[16], int t, int G, int slot, bool valid, const Layout& L) {
  constexpr uint32_t kFull = 0xffffffffu;
  const int q = slot & 3;
  const bool frag = (L.parts & kPartFrag) != 0;
  int s = 0;
  if (frag) {
    float mx = 0.0f;
#pragma unroll
    for (int i = 0; i < 16; ++i) mx = fmaxf(mx, fabsf(v[i]));
    mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 2));  // the group's max |x| (lanes of the same part)
    if (mx > 0.0f && mx <= FLT_MAX) {
      const int ex = static_cast<int>((__float_as_uint(mx) >> 23) & 0xFFu) - 126;  // mx in [2^(ex-1), 2^ex)
      s = min(max(15 - ex, -125), 125);
    }
  }
  float cs, cmax;
  half_chunk_stats(v, &cs, &cmax);
  const float gs = __fadd_rn(cs, __shfl_xor_sync(kFull, cs, 2));  // group = chunk01 + chunk23
  const float m64o = __shfl_xor_sync(kFull, cmax, 2);
  const float gmax = m64o > cmax || m64o != m64o ? m64o : cmax;  // the group's max |x| (or NaN)
  if (!valid) return;

  const int ng = L.cols >> 6;
  const size_t tg = static_cast<size_t>(t) * ng + G;
  const bool lo = slot >= 4;
  if (frag) {
    const float p = __uint_as_float(static_cast<uint32_t>(127 + s) << 23);
    const float inv = __uint_as_float(static_cast<uint32_t>(127 - s) << 23);
    auto part = [&](float z) -> __half {
      z = __fmul_rn(z, p);
      const __half h = __float2half_rn(z);
      return lo ? __float2half_rn(__fsub_rn(z, __half2float(h))) : h;
    };
    uint32_t fr[8];
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      fr[2 * ks] = pack_half2(part(v[ks]), part(v[ks + 4]));
      fr[2 * ks + 1] = pack_half2(part(v[8 + ks]), part(v[12 + ks]));
    }
    uint4* fo = L.frag + tg * 16 + slot * 2;
    fo[0] = make_uint4(fr[0], fr[1], fr[2], fr[3]);
    fo[1] = make_uint4(fr[4], fr[5], fr[6], fr[7]);
    if (slot == 0) L.gsx[tg] = make_float2(gs, inv);
  }

  if (!lo) {  // chunk j = 2G + q/2 (32 columns)
    const int j = 2 * G + (q >> 1);
    if (L.parts & kPartSimt) {  // float4 units 4*(q&1) .. +3 of the chunk
      float4* xs = reinterpret_cast<float4*>(L.xs + static_cast<size_t>(t) * L.stride) + (j >> 5) * 8 * 32 + (j & 31);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int u = 4 * (q & 1) + i;
        float4 o;
        o.x = __fmul_rn(v[4 * i], q4_slot_prescale((4 * u) % 8));
        o.y = __fmul_rn(v[4 * i + 1], q4_slot_prescale((4 * u + 1) % 8));
        o.z = __fmul_rn(v[4 * i + 2], q4_slot_prescale((4 * u + 2) % 8));
        o.w = __fmul_rn(v[4 * i + 3], q4_slot_prescale((4 * u + 3) % 8));
        xs[u * 32] = o;
      }
      if ((q & 1) == 0) L.sx[static_cast<size_t>(t) * (L.cols / 32) + j] = cs;
    }
    if (L.parts & kPartInt) int_emit(v, cmax, cs, t, j, q & 1, L);
    if (L.parts & kPartGm) gm_emit(v, gmax, gs, t, G, q, L);
  }
}

// 8-bit (SIMT layout only): chunk j (16 columns) of row t, v = its 16 values in column order.
__device__ __forceinline__ void q8_emit(const float (&v)[16], int t, int j, const Layout& L) {
  float4* xs = reinterpret_cast<float4*>(L.xs + static_cast<size_t>(t) * L.stride) + (j >> 5) * 4 * 32 + (j & 31);
  float s = 0.0f;
#pragma unroll
  for (int e = 0; e < 16; e += 4) {
    s = __fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(s, v[e]), v[e + 1]), v[e + 2]), v[e + 3]);
    float4 o;
    o.x = __fmul_rn(v[e], q8_slot_prescale((e + 0) % 4));
    o.y = __fmul_rn(v[e + 1], q8_slot_prescale((e + 1) % 4));
    o.z = __fmul_rn(v[e + 2], q8_slot_prescale((e + 2) % 4));
    o.w = __fmul_rn(v[e + 3], q8_slot_prescale((e + 3) % 4));
    xs[(e / 4) * 32] = o;
  }
  L.sx[static_cast<size_t>(t) * (L.cols / 16) + j] = s;
}

// Lanes that prepare one 4-bit group: 8 when the tensor-core part is written (slots 4..7 write its
// low halves), else 4 (slots 0..3 write every other part).
__host__ __device__ inline int q4_group_lanes(int parts) { return (parts & kPartFrag) ? 8 : 4; }

// Prepares columns [c0, c1) of row t of x (`src(c)` = column c; c0, c1 multiples of 64) with the
// threads of one block: every thread of the block must call it (4-bit shuffles); loops until all
// groups / chunks of the range are done. The whole row: c0 = 0, c1 = L.cols.
template <int BITS, class Src>
__device__ __forceinline__ void prepare_block(const Src& src, int t, int c0, int c1, const Layout& L) {
  if constexpr (BITS == 4) {
    const int lanes = q4_group_lanes(L.parts), shift = lanes == 8 ? 3 : 2;
    const int nslots = ((c1 - c0) >> 6) * lanes;
    for (int base = 0; base < nslots; base += blockDim.x) {  // block-uniform trip count
      const int i = base + static_cast<int>(threadIdx.x);
      const bool valid = i < nslots;  // whole lane sets (blockDim is a multiple of 32)
      const int G = (c0 >> 6) + (valid ? i >> shift : 0), slot = i & (lanes - 1), cb = 64 * G + 16 * (slot & 3);
      float v[16];
#pragma unroll
      for (int e = 0; e < 16; ++e) v[e] = valid ? src(cb + e) : 0.0f;
      q4_emit(v, t, G, slot, valid, L);
    }
  } else {
    for (int j = (c0 >> 4) + static_cast<int>(threadIdx.x); j < (c1 >> 4); j += blockDim.x) {
      float v[16];
#pragma unroll
      for (int e = 0; e < 16; ++e) v[e] = src(16 * j + e);
      q8_emit(v, t, j, L);
    }
  }
}

}  // namespace mere::cuda::prep
