// 4-bit integer-contract matvec with the code words streamed through a per-lane cp.async ring in
// shared memory (contract: qmatvec.h "4-bit, integer"; notes: docs/cuda-kernels.md §1 "v7").
//
// Why: the register kernel (qmatvec_int.cu) issues a row batch's loads and then waits for them
// before it computes, so each warp is a chain of dependent memory round trips (~15 for a 27B
// projection) and the loads in flight drop to zero while it computes: ~55-64% of the copy
// bandwidth on the 27B projections (v6 ncu: 46% of cycles with no eligible warp). Here each lane
// copies its own future code words, scales and biases (cp.async, D iterations deep) into its own
// shared-memory slots while it computes the current one; no lane reads another lane's slots, so
// there is no barrier, only cp.async.wait_group. The weights do not depend on the previous kernel,
// so the first D - 1 iterations are copied before the programmatic-launch wait: they overlap the
// previous kernel's tail.
//
// Arithmetic and row split are the register kernel's (qmatvec_int.cuh: same flat row split, same
// batches, chunk j in lane slot j mod 32 in increasing order, exact chunk sums, the same fp32
// epilogue and butterfly), so every row is bitwise what the register kernel gives it.
#include <cuda_runtime.h>

#include <algorithm>
#include <iterator>

#include "backend/cuda/async_copy.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/qmatvec_common.cuh"
#include "backend/cuda/qmatvec_int.cuh"
#include "backend/cuda/qmatvec_int.h"
#include "backend/cuda/qmatvec_prep.cuh"

namespace mere::cuda::detail {
namespace {

using qi::IntArgs;
using qi::kWarps;
using qi::Cursor;
using qi::cursor_batch;
using qi::cursor_next;
using qi::MatRef;

// Per-warp ring: D stages x R rows x 32 lanes of {16-byte codes, 4-byte scale word, 4-byte bias word}.
template <int R, int D>
__host__ __device__ constexpr int ring_bytes() {
  return D * R * 32 * 24;
}

// Copies iteration c of this lane (its chunk j = 32 i + lane of each live row) into stage slot s,
// then commits one group (possibly empty, so that the group count stays one an iteration).
template <int R, int D>
__device__ __forceinline__ void issue(const Cursor& c, int s, int lane, int nchunk, int ngroups, uint32_t ring) {
  if (!c.done) {
    const int j = 32 * c.i + lane;
    if (j < nchunk) {
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (r < c.nr) {
          const size_t row = static_cast<size_t>(c.l0 + r);
          const int slot = (s * R + r) * 32 + lane;
          cp_async16(ring + slot * 16, c.M.codes + row * nchunk + j, 16);
          // the 4-byte word holding group j/2's bf16 (ngroups is even, so it stays in the row)
          const size_t g = (row * ngroups + (j >> 1)) & ~size_t{1};
          cp_async4(ring + D * R * 32 * 16 + slot * 4, c.M.scales + g);
          cp_async4(ring + D * R * 32 * 20 + slot * 4, c.M.biases + g);
        }
    }
  }
  cp_async_commit();
}

// y[t, row] for T tokens (the register kernel's rows, batches and arithmetic; see the file comment).
template <int T, int R, int D, int MINB>
__global__ void __launch_bounds__(kWarps * 32, MINB)
    qmatvec_int_pipe_kernel(const IntArgs args, const uint4* __restrict__ dg, const float2* __restrict__ dsx, int cols,
                            int spans, int nb) {
  extern __shared__ __align__(16) unsigned char pipe_smem[];
  const int nchunk = cols >> 5, ngroups = cols >> 6;
  const int lane = threadIdx.x & 31, wib = static_cast<int>(threadIdx.x >> 5);
  const int64_t gw = static_cast<int64_t>(blockIdx.x) * kWarps + wib;
  int rb = 0, re = 0;
  qi::warp_rows(args, gw, static_cast<int64_t>(gridDim.x) * kWarps, &rb, &re);
  const int rows_w = re - rb;
  const int nit = (nchunk + 31) >> 5;
  const size_t tstride = static_cast<size_t>(spans) * 6 * 32;
  unsigned char* ring_p = pipe_smem + wib * ring_bytes<R, D>();
  const uint32_t ring = smem_u32(ring_p);
  const uint4* codes_s = reinterpret_cast<const uint4*>(ring_p);
  const uint32_t* scale_s = reinterpret_cast<const uint32_t*>(ring_p + D * R * 32 * 16);
  const uint32_t* bias_s = reinterpret_cast<const uint32_t*>(ring_p + D * R * 32 * 20);
  const int half = (lane >> 1) & 1;  // which bf16 of the scale word is this lane's group

  Cursor cons{}, prod{};
  cons.done = rows_w <= 0;
  if (!cons.done) cursor_batch(cons, args, rb, rows_w, nb);
  prod = cons;
#pragma unroll
  for (int p = 0; p < D - 1; ++p) {  // weights only: before the wait for the previous kernel
    issue<R, D>(prod, p, lane, nchunk, ngroups, ring);
    if (!prod.done) cursor_next(prod, args, rb, rows_w, nb, nit);
  }
  pdl_begin();

  float acc[R][T];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t) acc[r][t] = 0.0f;
  for (int it = 0; !cons.done; ++it) {
    issue<R, D>(prod, (it + D - 1) % D, lane, nchunk, ngroups, ring);
    if (!prod.done) cursor_next(prod, args, rb, rows_w, nb, nit);
    cp_async_wait<D - 1>();  // this lane's copies of iteration `it` have landed

    const int s = it % D;
    const int j = 32 * cons.i + lane;
    if (j < nchunk) {
      float sc[R], bi[R];
      uint32_t lo[R][4], hi[R][4];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int slot = (s * R + r) * 32 + lane;
        const uint4 w = r < cons.nr ? codes_s[slot] : make_uint4(0u, 0u, 0u, 0u);
        const uint32_t sw = r < cons.nr ? scale_s[slot] : 0u, bw = r < cons.nr ? bias_s[slot] : 0u;
        sc[r] = __uint_as_float(half ? (sw & 0xFFFF0000u) : (sw << 16));
        bi[r] = __uint_as_float(half ? (bw & 0xFFFF0000u) : (bw << 16));
        qi::split_nibbles(w, lo[r], hi[r]);
      }
      qi::chunk_step<T, R>(lo, hi, sc, bi, dg + 192 * cons.i + lane, tstride, dsx + j, nchunk, acc);
    }
    if (cons.i == nit - 1) qi::store_rows<T, R>(acc, cons, lane);  // the sub-batch's last iteration
    cursor_next(cons, args, rb, rows_w, nb, nit);
  }
  cp_async_wait<0>();
}

template <int R, int D, int TLO, int THI, int MINB>
qi::RingVariant make_pipe() {
  qi::RingVariant v{R, D, TLO, THI, kWarps * ring_bytes<R, D>(), {}};
  qm::fill_by_T<TLO, THI>(v.fns, [](auto t) { return &qmatvec_int_pipe_kernel<decltype(t)::value, R, D, MINB>; });
  return v;
}

const qi::RingVariant* find_pipe(int64_t T, int R, int D, int* index) {
  // the two shapes worth keeping from the session-7 sweep (R4D3 the fastest at [17408,5120] and
  // [10240,5120] T = 1; R2D4 for every T); R4D4, R4D6, R8D3 and R2D8 were slower everywhere
  static const qi::RingVariant table[] = {make_pipe<4, 3, 1, 4, 4>(), make_pipe<2, 4, 1, 9, 4>()};
  return qi::find_ring(table, static_cast<int>(std::size(table)), T, R, D, index);
}

}  // namespace

bool q4pipe_available(int64_t T, const QMatvecConfig& cfg) {
  int i = 0;
  return T >= 1 && T <= kMaxSkinnyRows && find_pipe(T, cfg.rows_per_warp, cfg.stages, &i) != nullptr;
}

bool q4pipe_supported(const QMatvecOut* outs, int n, int64_t cols) {
  return qi::ring_supported(outs, n, cols, 128, 4);  // an even group count: a scale word never straddles two rows
}

void q4pipe_launch(cudaStream_t s, const qi::IntArgs& args, const float* ws, int64_t T, int64_t cols,
                   const QMatvecConfig& cfg, int sms) {
  int index = 0;
  const qi::RingVariant* v = find_pipe(T, cfg.rows_per_warp, cfg.stages, &index);
  MERE_CHECK(v != nullptr, "qmatvec", "no compiled pipelined integer kernel for T=", T,
             " rows_per_warp=", cfg.rows_per_warp, " stages=", cfg.stages);
  static qi::RingOccupancy occupancy;
  qi::ring_launch("qmatvec_int_pipe_kernel", s, *v, index, occupancy, args, ws, T, cols, sms);
}

}  // namespace mere::cuda::detail
