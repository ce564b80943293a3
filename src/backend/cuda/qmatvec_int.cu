// 4-bit affine group-64 matvec with integer products (contract: qmatvec.h "4-bit, integer"; notes:
// docs/cuda-kernels.md §1 "v6").
//
// Why: the SIMT fp32 kernel spends LOP3 + FADD + FFMA a weight (measured 4.1 instructions a weight
// with its overheads) and sat at ~45% of the copy bandwidth, issue- and latency-bound. Here x is
// prepared as exact base-256 digits of x * 2^e (qmatvec_prep.cuh int_emit: X = d0 + 256 d1 +
// 65536 d2, one exponent e per 32-column chunk), a code word's nibbles become bytes with one shift
// and two LOP3 (even columns in the low nibbles, odd in the high), and IDP4A multiplies 4 codes by 4
// digits at once: 3 + 6 instructions per 8 weights and token instead of 24. The chunk's integer
// sum V = sum q * X is exact (|V| < 2^31: Horner over the digits, d2 first), so nothing in it
// depends on the order of the products; the fp32 part is the SIMT kernel's (chunk j in lane slot
// j mod 32, fma chain in chunk order, xor butterfly), so rows are bitwise batch-width invariant.
//
// Scheduling: the rows of all matrices of a launch (flat row space) are split evenly over a grid of
// resident warps (occupancy x SMs, at most one wave), each warp computing its contiguous share in
// the same number of batches of at most R rows: no tail wave (the SIMT kernel's 1.03-wave grids
// left SMs idle a third of the time, ncu) and no warp running a batch more than the others.
#include "backend/cuda/qmatvec_int.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/engine/k_gdn_common.cuh"
#include "backend/cuda/engine/k_norm.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/qmatvec_common.cuh"
#include "backend/cuda/qmatvec_int.cuh"
#include "backend/cuda/qmatvec_prep.cuh"

namespace mere::cuda::detail {
namespace {

using qi::IntArgs;
using qi::kWarps;
using qi::MatRef;
using qm::bf16_to_f32;
using qm::ld_stream;
using qm::word_of;

// The one-token input of a SRC launch, computed by every block into xsm, each value as the engine's
// producer computes it (qmatvec.h QMatvecSource):
//  * RmsNorm: 1 / rms in rms_norm_v4's sum order (the block's 128 threads standing for its 256:
//    k_norm.cuh row_inv_rms_folded), y = (x * r) * w;
//  * GatedRmsNorm: a warp a head for 1 / rms (warp_block_sum: gated_norm_head's 128-thread block sum),
//    y = (w * (x * r_h)) * silu(z);
//  * SigmoidGate: y = x * sigmoid(gate);
// then the integer layout of y as the producers' prepare writes it (prep::int_emit on the two 16-column
// halves of a chunk in adjacent lanes, half_chunk_stats for the chunk's sum and max), for token 0 of a
// workspace whose digits are xsm[0 .. spans*192) and {2^-e, sum} the chunks after them. Ends with a barrier.
__device__ __forceinline__ void src_to_smem(const QMatvecSource& in, int cols, int spans, uint4* xsm) {
  using Kind = QMatvecSource::Kind;
  constexpr int kThreads = kWarps * 32;
  static_assert(2 * kThreads == k::kNormThreads, "two layout threads a thread");
  static_assert(kThreads == k::kPrepThreads, "the gated norm's former block");
  __shared__ float head_r[kSrcMaxHeads];
  const float4* x4 = reinterpret_cast<const float4*>(in.x);
  const float4* w4 = reinterpret_cast<const float4*>(in.w);
  const float4* z4 = reinterpret_cast<const float4*>(in.z);
  const int hd = in.head_dim;
  float r = 0.0f;
  if (in.kind == Kind::RmsNorm) {
    const int n4 = cols / 4;
    float ss[2] = {0.0f, 0.0f};
#pragma unroll
    for (int k = 0; k < 2; ++k)  // layout thread threadIdx.x + k * 128: units j, j + 256, ... in order
      for (int i = static_cast<int>(threadIdx.x) + k * kThreads; i < n4; i += k::kNormThreads)
        ss[k] = k::unit_sumsq(x4[i], ss[k]);
    r = k::row_inv_rms_folded<2>(ss, cols, in.eps);
  } else if (in.kind == Kind::GatedRmsNorm) {
    const int lane = static_cast<int>(threadIdx.x & 31);
    for (int h = static_cast<int>(threadIdx.x >> 5); h < cols / hd; h += kWarps) {
      const float* xh = in.x + static_cast<size_t>(h) * hd;
      float p[k::kFormerWarps];
#pragma unroll
      for (int m = 0; m < k::kFormerWarps; ++m) {  // former thread 32 m + lane: columns i, i + 128, ...
        float ss = 0.0f;
        for (int i = 32 * m + lane; i < hd; i += kThreads) ss = __fmaf_rn(xh[i], xh[i], ss);
        p[m] = ss;
      }
      const float total = k::warp_block_sum(p);
      if (lane == 0) head_r[h] = 1.0f / sqrtf(__fadd_rn(__fdiv_rn(total, static_cast<float>(hd)), in.eps));
    }
    __syncthreads();
  }
  prep::Layout L;
  L.dg = xsm;
  L.dsx = reinterpret_cast<float2*>(xsm + static_cast<size_t>(spans) * 6 * 32);
  L.spans = spans;
  L.cols = cols;
  L.T = 1;
  const int halves = cols / 16;  // item i: chunk i / 2, columns 16 i .. 16 i + 15 (one head: hd % 16 == 0)
  for (int base = 0; base < halves; base += kThreads) {  // block-uniform trip count
    const int i = base + static_cast<int>(threadIdx.x);
    const bool valid = i < halves;  // pairs of lanes alike (halves and base are even)
    float v[16];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (valid) {
        const int u = 4 * i + q;  // float4 unit of the row
        const float4 xv = x4[u];
        if (in.kind == Kind::RmsNorm) {
          o = k::norm_unit(xv, r, w4[u]);
        } else {
          const int c = 4 * u, h = c / hd, d = c - h * hd;
          if (in.kind == Kind::GatedRmsNorm) {
            const float rh = head_r[h];
            const float4 wv = w4[d / 4], zv = z4[u];
            o.x = __fmul_rn(__fmul_rn(wv.x, __fmul_rn(xv.x, rh)), k::silu(zv.x));
            o.y = __fmul_rn(__fmul_rn(wv.y, __fmul_rn(xv.y, rh)), k::silu(zv.y));
            o.z = __fmul_rn(__fmul_rn(wv.z, __fmul_rn(xv.z, rh)), k::silu(zv.z));
            o.w = __fmul_rn(__fmul_rn(wv.w, __fmul_rn(xv.w, rh)), k::silu(zv.w));
          } else {  // the gate: the second half of head h's row of z
            const float4 gv = z4[(static_cast<size_t>(h) * 2 * hd + hd + d) / 4];
            o.x = __fmul_rn(xv.x, k::sigmoid(gv.x));
            o.y = __fmul_rn(xv.y, k::sigmoid(gv.y));
            o.z = __fmul_rn(xv.z, k::sigmoid(gv.z));
            o.w = __fmul_rn(xv.w, k::sigmoid(gv.w));
          }
        }
      }
      v[4 * q] = o.x, v[4 * q + 1] = o.y, v[4 * q + 2] = o.z, v[4 * q + 3] = o.w;
    }
    float cs, cmax;
    prep::half_chunk_stats(v, &cs, &cmax);
    if (valid) prep::int_emit(v, cmax, cs, 0, i >> 1, i & 1, L);
  }
  __syncthreads();
}

// y[t, row] for T tokens. A warp owns the flat rows [rb, re) and computes them in `nb` batches (the
// same count for every warp of the launch, so all warps finish together; a batch holds at most R
// rows, cut again at matrix boundaries); lane l takes chunks l, l+32, ... of each row, U chunks a
// row in flight. Addressing is by pointer increments: the hot loop is the loads, 3 ALU + 6 IDP4A
// per code word and token, and the fp32 epilogue. MINB blocks an SM caps the registers.
// DB (session 24; the tuner's "R<R>DB" shapes, T = 1, U = 1): the same rows, batches, lane-to-chunk map
// and chunk arithmetic (qi::chunk_step, the pipe kernel's copy of the loop body below), so every row
// is bitwise the same; but each lane keeps two chunks of each of its R rows in flight: chunk i + 2 is
// asked for right after chunk i's use, in two register sets used alternately (no moves of in-flight
// loads: v9 notes), where the loop below issues a chunk set, waits for it, computes, and only then
// issues the next.
// SRC (T = 1; qmatvec_src_multi): each block computes the input itself, after the wait, into shared
// memory (src_to_smem: the digits and chunk factors of the producer's workspace, bitwise), and the
// loop reads x from there; dg / dsx are unused.
template <int T, int R, int U, int MINB, bool DB = false, bool SRC = false>
__global__ void __launch_bounds__(kWarps * 32, MINB)
    qmatvec_int_kernel(const IntArgs args, const uint4* __restrict__ dg, const float2* __restrict__ dsx, int cols,
                       int spans, int nb, int prefetch, const QMatvecSource src) {
  static_assert(!SRC || T == 1, "the input computed inside the launch is a one-token form");
  const int nchunk = cols >> 5, ngroups = cols >> 6;
  const int lane = threadIdx.x & 31;
  const int gw = blockIdx.x * kWarps + static_cast<int>(threadIdx.x >> 5);
  const int64_t W = static_cast<int64_t>(gridDim.x) * kWarps;
  int rb = 0, re = 0;
  qi::warp_rows(args, gw, W, &rb, &re);
  qi::prefetch_first_rows<R>(args, rb, re, cols, prefetch);  // weights only: before the wait
  pdl_begin();
  extern __shared__ uint4 xsm[];  // SRC: [spans][6][32] digit units, then {2^-e, sum} a chunk
  const uint4* xg = dg;
  const float2* ig = dsx;
  if constexpr (SRC) {
    src_to_smem(src, cols, spans, xsm);
    xg = xsm;
    ig = reinterpret_cast<const float2*>(xsm + static_cast<size_t>(spans) * 6 * 32);
  }
  const int rows_w = re - rb;
  const int nl = (nchunk - lane + 31) >> 5;                    // chunks of this lane in a row
  const size_t tstride = static_cast<size_t>(spans) * 6 * 32;  // uint4 of one token's digits

  for (int k = 0; k < nb; ++k) {
    const int bend = rb + static_cast<int>((static_cast<int64_t>(k) + 1) * rows_w / nb);
    for (int r0 = rb + static_cast<int>(static_cast<int64_t>(k) * rows_w / nb); r0 < bend;) {
      const MatRef M = qi::locate(args, r0);
      const int nr = min(bend, M.end) - r0;  // 1..R rows of one matrix
      const int l0 = r0 - M.begin;
      const uint4* cp[R];
      const uint16_t* sp[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int rr = l0 + (r < nr ? r : 0);  // masked rows: row l0's scales, no code loads
        cp[r] = M.codes + static_cast<size_t>(rr) * nchunk + lane;
        sp[r] = M.scales + static_cast<size_t>(rr) * ngroups + (lane >> 1);
      }
      const ptrdiff_t bdelta = M.biases - M.scales;
      const uint4* xp = xg + lane;
      const float2* ip = ig + lane;
      float acc[R][T];
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < T; ++t) acc[r][t] = 0.0f;

      if constexpr (DB) {
        static_assert(U == 1, "the double-buffered loop takes one chunk a set");
        auto load = [&](uint4 (&w)[R], int i) {
#pragma unroll
          for (int r = 0; r < R; ++r) w[r] = qm::ld_stream_if(cp[r] + 32 * i, r < nr && i < nl);  // no branch
        };
        auto step = [&](const uint4 (&w)[R], int i) {
          float sc[R], bi[R];
          uint32_t lo[R][4], hi[R][4];
#pragma unroll
          for (int r = 0; r < R; ++r) {
            sc[r] = bf16_to_f32(__ldg(sp[r] + 16 * i));
            bi[r] = bf16_to_f32(__ldg(sp[r] + 16 * i + bdelta));
            qi::split_nibbles(w[r], lo[r], hi[r]);
          }
          qi::chunk_step<T, R, SRC>(lo, hi, sc, bi, xp + 192 * i, tstride, ip + 32 * i, nchunk, acc);
        };
        uint4 wa[R], wb[R];
        load(wa, 0);
        load(wb, 1);
        for (int i = 0; i < nl; i += 2) {
          step(wa, i);
          load(wa, i + 2);  // refill after the last use
          if (i + 1 < nl) {
            step(wb, i + 1);
            load(wb, i + 3);
          }
        }
      } else {
        for (int i = 0; i < nl; i += U) {
          uint4 wv[U][R];
#pragma unroll
          for (int u = 0; u < U; ++u)
#pragma unroll
            for (int r = 0; r < R; ++r)
              wv[u][r] = qm::ld_stream_if(cp[r] + 32 * min(u, nl - 1 - i), r < nr);  // no branch (v9 notes)
#pragma unroll
          for (int u = 0; u < U; ++u) {
            if (i + u >= nl) break;
            float s[R], b[R];
            uint32_t lo[R][4], hi[R][4];
#pragma unroll
            for (int r = 0; r < R; ++r) {
              s[r] = bf16_to_f32(__ldg(sp[r] + 16 * u));
              b[r] = bf16_to_f32(__ldg(sp[r] + 16 * u + bdelta));
              qi::split_nibbles(wv[u][r], lo[r], hi[r]);
            }
#pragma unroll
            for (int t = 0; t < T; ++t) {
              const uint4* xt = xp + 192 * u + t * tstride;
              uint4 d[6];
#pragma unroll
              for (int e = 0; e < 6; ++e) d[e] = qi::ldx<SRC>(xt + 32 * e);
              const float2 ci = qi::ldx<SRC>(ip + 32 * u + static_cast<size_t>(t) * nchunk);
#pragma unroll
              for (int r = 0; r < R; ++r) {
                const int S = qi::chunk_dot(lo[r], hi[r], d);
                const float qx = __fmul_rn(__int2float_rn(S), ci.x);
                acc[r][t] = __fmaf_rn(s[r], qx, __fmaf_rn(b[r], ci.y, acc[r][t]));
              }
            }
          }
#pragma unroll
          for (int r = 0; r < R; ++r) {
            cp[r] += 32 * U;
            sp[r] += 16 * U;
          }
          xp += 192 * U;
          ip += 32 * U;
        }
      }

#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < T; ++t) {
          const float v = qm::butterfly_sum(acc[r][t]);
          if (r < nr && lane == (r * T + t) % 32) {
            float* yp = M.y + static_cast<size_t>(t) * M.rows + l0 + r;
            *yp = M.accumulate ? __fadd_rn(*yp, v) : v;
          }
        }
      r0 += nr;
    }
  }
}

using IntFn = void (*)(IntArgs, const uint4*, const float2*, int, int, int, int, QMatvecSource);

struct IntVariant {
  int R, U, t_lo, t_hi;
  bool db;  // the double-buffered loop (qmatvec_int_kernel DB, U = 1)
  IntFn fns[kMaxSkinnyRows];
  IntFn src_fn;  // T = 1 with the input computed inside (SRC)
};

template <int R, int U, int TLO, int THI, int MINB>
IntVariant make_int() {
  static_assert(TLO == 1, "every variant has its one-token SRC form");
  IntVariant v{R, U, TLO, THI, false, {}, &qmatvec_int_kernel<1, R, U, MINB, false, true>};
  qm::fill_by_T<TLO, THI>(v.fns, [](auto t) { return &qmatvec_int_kernel<decltype(t)::value, R, U, MINB>; });
  return v;
}

template <int R, int MINB>
IntVariant make_int_db() {  // T = 1 only: the decode step's launches (the tuner's candidates)
  IntVariant v{R, 1, 1, 1, true, {}, &qmatvec_int_kernel<1, R, 1, MINB, true, true>};
  qm::fill_by_T<1, 1>(v.fns, [](auto t) { return &qmatvec_int_kernel<decltype(t)::value, R, 1, MINB, true>; });
  return v;
}

constexpr int kIntVariants = 9;
const IntVariant* int_variants(int* count) {
  static const IntVariant table[kIntVariants] = {
      make_int<4, 1, 1, 9, 4>(), make_int<2, 2, 1, 9, 4>(), make_int<2, 1, 1, 9, 5>(),
      make_int<4, 2, 1, 2, 4>(), make_int<8, 1, 1, 1, 4>(), make_int<3, 1, 1, 9, 4>(),
      make_int_db<2, 5>(),       make_int_db<4, 4>(),       make_int_db<8, 3>(),
  };
  *count = kIntVariants;
  return table;
}

const IntVariant* find_int(int64_t T, int R, int U, int* index, bool db = false) {
  int n = 0;
  const IntVariant* v = int_variants(&n);
  for (int i = 0; i < n; ++i)
    if (v[i].R == R && v[i].U == U && v[i].db == db && T >= v[i].t_lo && T <= v[i].t_hi) {
      *index = i;
      return &v[i];
    }
  return nullptr;
}

// blocks a multiprocessor holds of each compiled kernel (at least 1: a launch needs a grid)
int occupancy(int index, int64_t T, IntFn fn) {
  static qm::OccupancyCache<kIntVariants, kMaxSkinnyRows> cache;
  return std::max(1, cache.get(index, T, fn, kWarps * 32));
}

}  // namespace

std::pair<int, int> q4int_small_shape() {
  static const std::pair<int, int> shape = [] {
    const char* e = std::getenv("MERE_CUDA_MV_SMALL");
    if (e == nullptr || *e == '\0') return std::pair<int, int>{2, 1};  // session 14 A/B: +3% 27B decode
    int R = 0, U = 0;
    char tail = 0;
    const int n = std::sscanf(e, "%d,%d%c", &R, &U, &tail);
    int idx = 0;
    MERE_CHECK(n == 2 && find_int(1, R, U, &idx) != nullptr, "MERE_CUDA_MV_SMALL",
               "expected R,U of a compiled T = 1 integer shape (4,1 2,1 2,2 3,1 8,1 4,2), got '", e, "'");
    return std::pair<int, int>{R, U};
  }();
  return shape;
}

int64_t q4int_prefetch_bytes() {
  static const int64_t bytes = [] {
    const char* e = std::getenv("MERE_CUDA_MV_PREFETCH");
    if (e == nullptr || *e == '\0') return int64_t{16} << 20;
    char* end = nullptr;
    const long mb = std::strtol(e, &end, 10);
    MERE_CHECK(end != e && *end == '\0' && mb >= 0 && mb <= 64, "MERE_CUDA_MV_PREFETCH",
               "expected megabytes as an integer in [0, 64], got '", e, "'");
    return static_cast<int64_t>(mb) << 20;
  }();
  return bytes;
}

bool q4int_available(int64_t T, const QMatvecConfig& cfg) {
  if (cfg.integer == kIntPipelined) return q4pipe_available(T, cfg);
  if (cfg.integer == kIntMma) return q4imma_available(T, cfg);
  if (cfg.integer == kGroupMma) return q4gm_available(T, cfg);
  int i = 0;
  const int R = cfg.rows_per_warp == kIntFitRows ? 2 : cfg.rows_per_warp;  // fit: R = 2..4 at U = 1
  const bool db = cfg.stages == kIntDoubleBuffer;
  if (db && cfg.rows_per_warp == kIntFitRows) return false;
  return T >= 1 && T <= kMaxSkinnyRows && find_int(T, R, cfg.unroll, &i, db) != nullptr;
}

QMatvecConfig q4int_default(int64_t T, IntImpl impl) {
  QMatvecConfig c;
  c.unroll = 1;
  if (impl == IntImpl::GroupMma) {
    c.integer = kGroupMma;
    c.rows_per_warp = 16;
    const GmShape g = q4gm_shape(T);
    c.stages = g.stages;         // 0: by T
    c.unroll = g.db ? 2 : 1;     // two batches (2) or a ring
    c.warps = g.groups;          // groups a step (0: by the variant)
    return c;
  }
  if (impl == IntImpl::Mma && T <= 4) {
    c.integer = kIntMma;
    c.rows_per_warp = 16;
    c.stages = 0;  // by the launch's tile count
    return c;
  }
  if (impl == IntImpl::Pipelined) {
    c.integer = kIntPipelined;
    c.rows_per_warp = T <= 4 ? 4 : 2;
    c.stages = T <= 4 ? 3 : 4;
    return c;
  }
  c.integer = 1;
  // H200 sweeps (docs/cuda-kernels.md §1 "v6", "v7"): T = 1: 4 rows a batch (the per-launch fit is
  // faster on single 27B projections but slower on the engine's multi-matrix launches: gate+up 34.9
  // vs 33.5 µs in a graph, 27B decode 130.5 vs 132.5 tok/s); T >= 2: the fit (R = 4, 3 or 2 by the
  // fewest empty batch slots), 16-20% faster than 2 rows at T = 8, 9 (67.6 vs 80.0 µs at [17408,5120])
  c.rows_per_warp = T == 1 ? 4 : kIntFitRows;
  return c;
}

namespace {
// Grid for `total` rows with variant v: every resident warp (one wave; rows spread evenly, so a warp
// holds the ceiling or the floor of total / warps rows), fewer when there are fewer than R rows a
// warp; every warp computes its rows in the same number of batches nb = ceil(ceil(total / warps) /
// R), so none runs a batch more than the others (v6a cut 9-row warps into batches of 4, 4, 1 next to
// 8-row warps' 4, 4: SMs idle 20% of the kernel, ncu). Returns the block count; *nb is set.
int64_t int_grid(int index, const IntVariant* v, int64_t T, int64_t total, int sms, int* nb) {
  return qi::ring_grid(occupancy(index, T, v->fns[T - 1]), sms, v->R, total, nb);
}

// The launch arguments of up to kMaxMultiMatrices matrices in one flat row space.
IntArgs int_args(const QMatvecOut* outs, int n) {
  IntArgs args{};
  args.n = n;
  int64_t end = 0;
  for (int i = 0; i < n; ++i) {
    const QWeightView& W = outs[i].W;
    end += W.rows;
    args.m[i] = qi::IntMat{reinterpret_cast<const uint4*>(W.codes), W.scales, W.biases, outs[i].y,
                           static_cast<int>(W.rows), static_cast<int>(end), outs[i].accumulate ? 1 : 0};
  }
  args.total = static_cast<int>(end);
  return args;
}

// The fit (kIntFitRows): of the U = 1 shapes with R = 4, 3, 2 the one whose batches leave the fewest row
// slots empty (nb * R, ties to the larger R: x digits are shared by more rows); at the 27B shapes warps
// hold 8-9 rows, which fill 3 batches of 3 but only 9 of 12 slots of 4. Sets *index, *blocks, *nb.
const IntVariant* fit_variant(int64_t T, int64_t total, int sms, int* index, int64_t* blocks, int* nb) {
  const IntVariant* v = nullptr;
  int64_t best = 0;
  for (int R : {4, 3, 2}) {
    int i = 0, cnb = 0;
    const IntVariant* c = find_int(T, R, 1, &i);
    if (c == nullptr) continue;
    const int64_t cblocks = int_grid(i, c, T, total, sms, &cnb);
    const int64_t slots = static_cast<int64_t>(cnb) * R * cblocks * kWarps;
    if (v == nullptr || slots < best) v = c, *index = i, best = slots, *blocks = cblocks, *nb = cnb;
  }
  return v;
}
}  // namespace

void q4int_launch(cudaStream_t s, const QMatvecOut* outs, int n, const float* ws, int64_t T, int64_t cols,
                  const QMatvecConfig& cfg, int sms) {
  if (cfg.integer == kGroupMma) return q4gm_launch(s, outs, n, ws, T, cols, cfg, sms);
  if (cfg.integer == kIntMma) {  // else the register kernel: the same rows bitwise (one contract)
    if (T <= 4 && q4imma_supported(outs, n)) return q4imma_launch(s, outs, n, ws, T, cols, cfg);
    return q4int_launch(s, outs, n, ws, T, cols, q4int_default(T, IntImpl::Register), sms);
  }
  const IntArgs args = int_args(outs, n);
  const int64_t total = args.total;
  if (cfg.integer == kIntPipelined) {
    // the pipelined kernel needs an even group count and aligned rows; else the register kernel,
    // whose rows are bitwise the same (one contract)
    if (q4pipe_supported(outs, n, cols)) return q4pipe_launch(s, args, ws, T, cols, cfg, sms);
    q4int_launch(s, outs, n, ws, T, cols, q4int_default(T, IntImpl::Register), sms);
    return;
  }
  int index = 0, nb = 0;
  int64_t blocks = 0;
  const IntVariant* v = nullptr;
  if (cfg.rows_per_warp == kIntFitRows) {
    v = fit_variant(T, total, sms, &index, &blocks, &nb);
  } else {
    v = find_int(T, cfg.rows_per_warp, cfg.unroll, &index, cfg.stages == kIntDoubleBuffer);
    if (v != nullptr) blocks = int_grid(index, v, T, total, sms, &nb);
  }
  MERE_CHECK(v != nullptr, "qmatvec", "no compiled integer kernel for T=", T, " rows_per_warp=", cfg.rows_per_warp,
             " unroll=", cfg.unroll, cfg.stages == kIntDoubleBuffer ? " (double-buffered)" : "");
  const IntFn fn = v->fns[T - 1];
  const prep::Layout L = prep::layout(const_cast<float*>(ws), T, cols, 4);
  const int64_t warps = blocks * kWarps;
  const int prefetch = static_cast<int>(std::min<int64_t>(q4int_prefetch_bytes() / warps, int64_t{1} << 30));
  launch("qmatvec_int_kernel", fn, dim3(static_cast<unsigned>(blocks)), dim3(kWarps * 32), 0, s, args, L.dg, L.dsx,
         static_cast<int>(cols), L.spans, nb, prefetch, QMatvecSource{});
}

size_t q4int_src_smem(int64_t cols) {
  return static_cast<size_t>(prep::int_spans(cols)) * 6 * 32 * sizeof(uint4) + static_cast<size_t>(cols / 32) * sizeof(float2);
}

void q4int_src_launch(cudaStream_t s, const QMatvecOut* outs, int n, const QMatvecSource& in, int64_t cols,
                      const QMatvecConfig& cfg, int sms) {
  MERE_CHECK(cols % 64 == 0 && cols <= kSrcMaxCols && q4int_src_smem(cols) <= 48 * 1024, "qmatvec_src",
             "the input computed inside the launch takes widths that are multiples of 64 up to ", kSrcMaxCols, ", got ", cols);
  const IntArgs args = int_args(outs, n);
  const int64_t end = args.total;
  // a register shape (the fit picks R per launch as q4int_launch does); else the default register shape
  QMatvecConfig c = cfg;
  if (c.integer != 1 || !q4int_available(1, c)) c = q4int_default(1, IntImpl::Register);
  int index = 0;
  const IntVariant* v = nullptr;
  if (c.rows_per_warp == kIntFitRows) {
    // the fit's rule on the plain kernels' grids (the SRC grid differs only where shared memory
    // lowers the occupancy); the same bits whatever R
    int64_t fb = 0;
    int fnb = 0;
    v = fit_variant(1, end, sms, &index, &fb, &fnb);
  } else {
    v = find_int(1, c.rows_per_warp, c.unroll, &index, c.stages == kIntDoubleBuffer);
  }
  MERE_CHECK(v != nullptr, "qmatvec_src", "no compiled integer kernel for rows_per_warp=", c.rows_per_warp,
             " unroll=", c.unroll);
  const size_t smem = q4int_src_smem(cols);
  const int spans = static_cast<int>(prep::int_spans(cols));
  static qm::OccupancyCache<kIntVariants, kSrcMaxCols / 1024> occ;  // slot: spans (whole 32-chunk spans)
  const int resident = std::max(1, occ.get(index, spans, v->src_fn, kWarps * 32, smem));
  int nb = 0;
  const int64_t blocks = qi::ring_grid(resident, sms, v->R, end, &nb);
  const int prefetch = static_cast<int>(std::min<int64_t>(q4int_prefetch_bytes() / (blocks * kWarps), int64_t{1} << 30));
  launch("qmatvec_int_kernel (input inside)", v->src_fn, dim3(static_cast<unsigned>(blocks)), dim3(kWarps * 32), smem,
         s, args, static_cast<const uint4*>(nullptr), static_cast<const float2*>(nullptr), static_cast<int>(cols), spans,
         nb, prefetch, in);
}

}  // namespace mere::cuda::detail
