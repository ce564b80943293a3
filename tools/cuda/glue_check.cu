// mere_glue_check: bitwise checks and benchmarks of the prefill "glue" kernels rewritten for speed
// (k::gdn_prepare, k::conv_silu_rows, k::gated_rms_norm, moe_sort_pairs) against copies of their
// previous kernels (namespace ref below, the source as it was, launched <<<...>>>). A plain main (the
// GPU machine has no gtest). Every check: the same random inputs to both, outputs NaN-poisoned before
// each run, every output compared with memcmp. Shapes: the Qwen3.5-35B-A3B and 27B GatedDeltaNet
// geometries at T = 1, 7, 16, 512, 513 plus odd shapes that take the fallback paths; the MoE sort
// with uniform, skewed and single-expert routing, P up to 16384. Benchmarks at T = 512: old vs new,
// L2 flushed before each launch (cold, as ncu measures) and back to back (warm).
// Usage: mere_glue_check [--no-bench] [--bench-only] [--reps N >= 20] [--json PATH]. Exit 1 on any failure.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "backend/cuda/engine/k_math.cuh"
#include "backend/cuda/engine/k_prefill.h"
#include "backend/cuda/engine/kernels.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/launch.cuh"
#include "check_report.h"

using namespace mere;
using namespace mere::cuda;
using namespace mere::cuda::checktool;

// ---------------------------------------------------------------- reference: the previous kernels
// Verbatim copies of the kernels the new code replaced (k_gdn.cu, k_prefill.cu, gemm.cu before the
// rewrite); gated_rms_norm_kernel is its PREP = 0 instantiation (the prepare branch dropped).
namespace ref {
using mere::cuda::k::sigmoid;
using mere::cuda::k::silu;

__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

constexpr int kPrepThreads = 128;
__device__ float block_sum(float v, float* partial) {  // fixed order: butterfly, then warps in order
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, off));
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  float total = 0.0f;
  for (int i = 0; i < static_cast<int>(blockDim.x >> 5); ++i) total = __fadd_rn(total, partial[i]);
  __syncthreads();
  return total;
}

__global__ void __launch_bounds__(kPrepThreads)
    gdn_prepare_kernel(const float* mixed, const float* a, const float* b, const float* neg_a, const float* dt_bias,
                       int C, int Hk, int Dk, int Hv, int Dv, float* q, float* k, float* v, float* g, float* beta) {
  pdl_begin();
  __shared__ float partial[kPrepThreads / 32];
  const int blk = blockIdx.x, t = blockIdx.y, tid = threadIdx.x;
  const float* m = mixed + static_cast<int64_t>(t) * C;
  const int kd = Hk * Dk;
  if (blk < 2 * Hk) {
    const bool is_q = blk < Hk;
    const int h = is_q ? blk : blk - Hk;
    const float* src = m + (is_q ? 0 : kd) + h * Dk;
    float* dst = (is_q ? q : k) + static_cast<int64_t>(t) * kd + h * Dk;
    float ss = 0.0f;
    for (int i = tid; i < Dk; i += kPrepThreads) ss = __fmaf_rn(src[i], src[i], ss);
    const float r = 1.0f / sqrtf(__fadd_rn(block_sum(ss, partial), 1e-6f));
    const float qscale = 1.0f / sqrtf(static_cast<float>(Dk));
    for (int i = tid; i < Dk; i += kPrepThreads) {
      const float y = __fmul_rn(src[i], r);
      dst[i] = is_q ? __fmul_rn(y, qscale) : y;
    }
  } else if (blk < 2 * Hk + Hv) {
    const int h = blk - 2 * Hk;
    for (int i = tid; i < Dv; i += kPrepThreads)
      v[static_cast<int64_t>(t) * Hv * Dv + h * Dv + i] = m[2 * kd + h * Dv + i];
  } else {
    for (int h = tid; h < Hv; h += kPrepThreads) {
      const int64_t i = static_cast<int64_t>(t) * Hv + h;
      beta[i] = sigmoid(b[i]);
      g[i] = __fmul_rn(neg_a[h], softplus(__fadd_rn(a[i], dt_bias[h])));
    }
  }
}

__global__ void __launch_bounds__(kPrepThreads)
    gated_rms_norm_kernel(const float* x, const float* z, const float* w, int Hv, int Dv, float eps, float* y) {
  pdl_begin();
  __shared__ float partial[kPrepThreads / 32];
  const int64_t off = (static_cast<int64_t>(blockIdx.y) * Hv + blockIdx.x) * Dv;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < Dv; i += kPrepThreads) ss = __fmaf_rn(x[off + i], x[off + i], ss);
  const float r = 1.0f / sqrtf(__fadd_rn(__fdiv_rn(block_sum(ss, partial), static_cast<float>(Dv)), eps));
  for (int i = threadIdx.x; i < Dv; i += kPrepThreads)
    y[off + i] = __fmul_rn(__fmul_rn(w[i], __fmul_rn(x[off + i], r)), silu(z[off + i]));
}

// x_i for i in [-(K-1), T): raw row i, or history row i + K - 1 for i < 0
__global__ void conv_rows_kernel(const float* state, const float* w, const float* raw, int C, int K, float* out) {
  pdl_begin();
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int t = blockIdx.y;
  if (c >= C) return;
  float acc = 0.0f;
  for (int j = 0; j < K - 1; ++j) {
    const int i = t - (K - 1) + j;
    const float x = i >= 0 ? raw[static_cast<int64_t>(i) * C + c] : state[static_cast<int64_t>(i + K - 1) * C + c];
    acc = __fmaf_rn(w[c * K + j], x, acc);
  }
  acc = __fmaf_rn(w[c * K + K - 1], raw[static_cast<int64_t>(t) * C + c], acc);
  out[static_cast<int64_t>(t) * C + c] = silu(acc);
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

// One block of 1024 threads: stable counting sort of (token, slot) pairs by expert. Pairs go in
// chunks of 1024 (a pair a thread): rank inside a warp from __match_any_sync, per-warp counts
// [32][E] in shared memory scanned per expert, plus the running count of earlier chunks.
constexpr int kSortThreads = 1024;
__global__ void __launch_bounds__(kSortThreads) moe_sort_kernel(const int32_t* __restrict__ ids, int P, int k, int E,
                                                                int32_t* __restrict__ offsets,
                                                                int32_t* __restrict__ row_token,
                                                                int32_t* __restrict__ pair_row) {
  pdl_begin();
  extern __shared__ int32_t sm[];
  int32_t* base = sm;           // [E]: offsets[e] + pairs of expert e in earlier chunks
  int32_t* wc = sm + E;         // [32][E]: per-warp counts, then per-warp starts
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  for (int i = tid; i < 33 * E; i += kSortThreads) sm[i] = 0;
  __syncthreads();
  for (int i = tid; i < P; i += kSortThreads) atomicAdd(&base[ids[i]], 1);
  __syncthreads();
  if (tid == 0) {
    int run = 0;
    for (int e = 0; e < E; ++e) {
      const int c = base[e];
      base[e] = run;
      offsets[e] = run;
      run += c;
    }
    offsets[E] = run;
  }
  __syncthreads();
  for (int c0 = 0; c0 < P; c0 += kSortThreads) {
    const int i = c0 + tid;
    const bool ok = i < P;
    const int e = ok ? ids[i] : -1 - lane;  // invalid lanes never match anyone
    const unsigned same = __match_any_sync(0xffffffffu, e);
    const int rank = __popc(same & ((1u << lane) - 1u));
    if (ok && rank == 0) wc[warp * E + e] = __popc(same);
    __syncthreads();
    for (int x = tid; x < E; x += kSortThreads) {  // exclusive scan over warps, per expert
      int run = base[x];
      for (int w = 0; w < 32; ++w) {
        const int t = wc[w * E + x];
        wc[w * E + x] = run;
        run += t;
      }
      base[x] = run;
    }
    __syncthreads();
    if (ok) {
      const int pos = wc[warp * E + e] + rank;
      row_token[pos] = i / k;
      pair_row[i] = pos;
    }
    __syncthreads();
    for (int x = tid; x < 32 * E; x += kSortThreads) wc[x] = 0;
    __syncthreads();
  }
}

// the previous host launches
void gdn_prepare(cudaStream_t s, const float* mixed, const float* a, const float* b, const float* neg_a,
                 const float* dt_bias, int64_t T, int64_t Hk, int64_t Dk, int64_t Hv, int64_t Dv, float* q, float* k,
                 float* v, float* g, float* beta) {
  dim3 grid(static_cast<unsigned>(2 * Hk + Hv + 1), static_cast<unsigned>(T));
  const int C = static_cast<int>(2 * Hk * Dk + Hv * Dv);
  gdn_prepare_kernel<<<grid, kPrepThreads, 0, s>>>(mixed, a, b, neg_a, dt_bias, C, static_cast<int>(Hk),
                                                   static_cast<int>(Dk), static_cast<int>(Hv), static_cast<int>(Dv), q,
                                                   k, v, g, beta);
  MERE_CUDA_CHECK_LAUNCH("ref gdn_prepare_kernel");
}
void gated_rms_norm(cudaStream_t s, const float* x, const float* z, const float* w, int64_t T, int64_t Hv, int64_t Dv,
                    float eps, float* y) {
  dim3 grid(static_cast<unsigned>(Hv), static_cast<unsigned>(T));
  gated_rms_norm_kernel<<<grid, kPrepThreads, 0, s>>>(x, z, w, static_cast<int>(Hv), static_cast<int>(Dv), eps, y);
  MERE_CUDA_CHECK_LAUNCH("ref gated_rms_norm_kernel");
}
void conv_rows(cudaStream_t s, const float* state, const float* w, const float* raw, int64_t T, int64_t C, int64_t K,
               float* out) {
  const unsigned bx = static_cast<unsigned>((C + 255) / 256);
  conv_rows_kernel<<<dim3(bx, static_cast<unsigned>(T)), 256, 0, s>>>(state, w, raw, static_cast<int>(C),
                                                                      static_cast<int>(K), out);
  MERE_CUDA_CHECK_LAUNCH("ref conv_rows_kernel");
}
void conv_shift(cudaStream_t s, float* state, const float* raw, int64_t T, int64_t C, int64_t K) {
  conv_shift_kernel<<<static_cast<unsigned>((C + 255) / 256), 256, 0, s>>>(state, raw, static_cast<int>(T),
                                                                           static_cast<int>(C), static_cast<int>(K));
  MERE_CUDA_CHECK_LAUNCH("ref conv_shift_kernel");
}
void conv_silu_rows(cudaStream_t s, float* state, const float* w, const float* raw, int64_t T, int64_t C, int64_t K,
                    float* out) {
  conv_rows(s, state, w, raw, T, C, K, out);
  conv_shift(s, state, raw, T, C, K);
}
void moe_sort_pairs(cudaStream_t s, const int32_t* ids, int64_t T, int64_t k, int64_t E, int32_t* offsets,
                    int32_t* row_token, int32_t* pair_row) {
  const int smem = static_cast<int>(33 * E * 4);
  MERE_CUDA_CHECK(cudaFuncSetAttribute(moe_sort_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  moe_sort_kernel<<<1, kSortThreads, smem, s>>>(ids, static_cast<int>(T * k), static_cast<int>(k), static_cast<int>(E),
                                                offsets, row_token, pair_row);
  MERE_CUDA_CHECK_LAUNCH("ref moe_sort_kernel");
}
}  // namespace ref

namespace {

// Rng, random_vec, the report, to_device, poison: check_report.h

// One output of a check: its old and new device buffers, compared word by word after the runs.
struct Out {
  const char* name;
  DeviceBuffer old_b, new_b;
};
Out make_out(CudaDevice& dev, const char* name, size_t bytes) {
  return {name, dev.alloc(std::max<size_t>(bytes, 4), name), dev.alloc(std::max<size_t>(bytes, 4), name)};
}
// memcmp of every output; the detail names the first differing word of each differing output
void compare_outs(CudaDevice& dev, const std::string& check, std::vector<Out>& outs) {
  bool ok = true;
  std::ostringstream d;
  size_t words = 0;
  for (Out& o : outs) {
    const size_t n = o.old_b.bytes() / 4;
    std::vector<uint32_t> a(n), b(n);
    dev.download(a.data(), o.old_b.get(), n * 4);
    dev.download(b.data(), o.new_b.get(), n * 4);
    words += n;
    if (std::memcmp(a.data(), b.data(), n * 4) == 0) continue;
    ok = false;
    size_t diff = 0, first = n;
    for (size_t i = 0; i < n; ++i)
      if (a[i] != b[i]) diff += 1, first = std::min(first, i);
    char buf[160];
    std::snprintf(buf, sizeof(buf), "%s: %zu of %zu words differ, first [%zu] old 0x%08x new 0x%08x; ", o.name, diff, n,
                  first, a[first], b[first]);
    d << buf;
  }
  if (ok) d << words << " words bitwise equal";
  record_bool(check, ok, d.str());
}

// ---------------------------------------------------------------- checks
struct GdnShape {
  const char* name;
  int64_t Hk, Dk, Hv, Dv;
  int64_t C() const { return 2 * Hk * Dk + Hv * Dv; }
};
constexpr GdnShape k35{"35B", 16, 128, 32, 128}, k27{"27B", 16, 128, 48, 128};
const std::vector<int64_t> kModelTs = {1, 7, 16, 512, 513};

std::string tag(const char* kernel, const std::string& shape, int64_t T) {
  return std::string(kernel) + " " + shape + " T=" + std::to_string(T);
}

// gdn_prepare inputs: mixed [T, C]; a, b [T, Hv]; neg_a, dt_bias [Hv]
struct GdnPrepIn {
  DeviceBuffer mixed, a, b, neg_a, dt_bias;
};
GdnPrepIn gdn_prep_inputs(CudaDevice& dev, const GdnShape& g, int64_t T, uint64_t seed) {
  const size_t nt = static_cast<size_t>(T * g.Hv);
  return {to_device(dev, random_vec(static_cast<size_t>(T * g.C()), seed, -2.0f, 2.0f), "mixed"),
          to_device(dev, random_vec(nt, seed + 1, -30.0f, 30.0f), "a"),  // softplus on both sides of 20
          to_device(dev, random_vec(nt, seed + 2, -8.0f, 8.0f), "b"),
          to_device(dev, random_vec(static_cast<size_t>(g.Hv), seed + 3, -8.0f, -0.05f), "neg_a"),
          to_device(dev, random_vec(static_cast<size_t>(g.Hv), seed + 4, -2.0f, 2.0f), "dt_bias")};
}

void check_gdn_prepare(CudaDevice& dev, const GdnShape& g, int64_t T, uint64_t seed) {
  const GdnPrepIn in = gdn_prep_inputs(dev, g, T, seed);
  std::vector<Out> outs;
  outs.push_back(make_out(dev, "q", T * g.Hk * g.Dk * 4));
  outs.push_back(make_out(dev, "k", T * g.Hk * g.Dk * 4));
  outs.push_back(make_out(dev, "v", T * g.Hv * g.Dv * 4));
  outs.push_back(make_out(dev, "g", T * g.Hv * 4));
  outs.push_back(make_out(dev, "beta", T * g.Hv * 4));
  for (Out& o : outs) poison(dev, o.old_b), poison(dev, o.new_b);
  auto run = [&](bool fresh) {
    auto p = [&](int i) { return (fresh ? outs[i].new_b : outs[i].old_b).as<float>(); };
    (fresh ? k::gdn_prepare : ref::gdn_prepare)(dev.stream(), in.mixed.as<float>(), in.a.as<float>(), in.b.as<float>(),
                                                in.neg_a.as<float>(), in.dt_bias.as<float>(), T, g.Hk, g.Dk, g.Hv, g.Dv,
                                                p(0), p(1), p(2), p(3), p(4));
  };
  run(false);
  run(true);
  char shape[96];
  std::snprintf(shape, sizeof(shape), "%s Hk=%lld Dk=%lld Hv=%lld Dv=%lld", g.name, (long long)g.Hk, (long long)g.Dk,
                (long long)g.Hv, (long long)g.Dv);
  compare_outs(dev, tag("gdn_prepare", shape, T), outs);
}

void check_gated_rms_norm(CudaDevice& dev, const char* name, int64_t Hv, int64_t Dv, int64_t T, uint64_t seed) {
  const size_t n = static_cast<size_t>(T * Hv * Dv);
  const DeviceBuffer x = to_device(dev, random_vec(n, seed, -2.0f, 2.0f), "x");
  const DeviceBuffer z = to_device(dev, random_vec(n, seed + 1, -6.0f, 6.0f), "z");
  const DeviceBuffer w = to_device(dev, random_vec(static_cast<size_t>(Dv), seed + 2, 0.5f, 1.5f), "w");
  std::vector<Out> outs;
  outs.push_back(make_out(dev, "y", n * 4));
  poison(dev, outs[0].old_b);
  poison(dev, outs[0].new_b);
  const float eps = 1e-6f;
  ref::gated_rms_norm(dev.stream(), x.as<float>(), z.as<float>(), w.as<float>(), T, Hv, Dv, eps,
                      outs[0].old_b.as<float>());
  k::gated_rms_norm(dev.stream(), x.as<float>(), z.as<float>(), w.as<float>(), T, Hv, Dv, eps,
                    outs[0].new_b.as<float>());
  char shape[96];
  std::snprintf(shape, sizeof(shape), "%s Hv=%lld Dv=%lld", name, (long long)Hv, (long long)Dv);
  compare_outs(dev, tag("gated_rms_norm", shape, T), outs);
}

// conv_silu_rows: out and the shifted history. `misalign` offsets every pointer by one float (the
// scalar path of the new kernel), as does C % 4 != 0.
void check_conv(CudaDevice& dev, const char* name, int64_t C, int64_t K, int64_t T, uint64_t seed, bool misalign) {
  const int64_t m = misalign ? 1 : 0;
  const auto state0 = random_vec(static_cast<size_t>((K - 1) * C + m), seed, -3.0f, 3.0f);
  const DeviceBuffer w = to_device(dev, random_vec(static_cast<size_t>(C * K + m), seed + 1, -1.0f, 1.0f), "w");
  const DeviceBuffer raw = to_device(dev, random_vec(static_cast<size_t>(T * C + m), seed + 2, -3.0f, 3.0f), "raw");
  std::vector<Out> outs;
  outs.push_back(make_out(dev, "out", (T * C + m) * 4));
  outs.push_back(make_out(dev, "state", ((K - 1) * C + m) * 4));
  for (int fresh = 0; fresh < 2; ++fresh) {
    Out &o = outs[0], &st = outs[1];
    DeviceBuffer& ob = fresh ? o.new_b : o.old_b;
    DeviceBuffer& sb = fresh ? st.new_b : st.old_b;
    poison(dev, ob);
    poison(dev, sb);
    if (K > 1) dev.upload(sb.as<float>(), state0.data(), state0.size() * 4);
    (fresh ? k::conv_silu_rows : ref::conv_silu_rows)(dev.stream(), sb.as<float>() + m, w.as<float>() + m,
                                                      raw.as<float>() + m, T, C, K, ob.as<float>() + m);
  }
  char shape[96];
  std::snprintf(shape, sizeof(shape), "%s C=%lld K=%lld%s", name, (long long)C, (long long)K,
                misalign ? " misaligned" : "");
  compare_outs(dev, tag("conv_silu_rows", shape, T), outs);
}

// Routing of P = T * topk pairs over E experts. kinds: 0 distinct top-k (uniform), 1 skewed (one
// expert takes ~90% of the pairs), 2 every pair on one expert, 3 a few low experts, 4 mostly the last
enum class Route { Uniform, Skewed, Single, Few, Last };
const char* route_name(Route r) {
  switch (r) {
    case Route::Uniform: return "uniform";
    case Route::Skewed: return "skewed";
    case Route::Single: return "single";
    case Route::Few: return "few";
    case Route::Last: return "last";
  }
  return "?";
}
std::vector<int32_t> route(int64_t T, int64_t topk, int64_t E, Route kind, uint64_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(T * topk));
  Rng r(seed);
  const int32_t hot = static_cast<int32_t>(r.next() % E);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < topk; ++j) {
      int32_t e = static_cast<int32_t>(r.next() % E);
      if (kind == Route::Uniform && topk <= E) {  // distinct experts a token, as the router's top-k
        bool dup;
        do {
          e = static_cast<int32_t>(r.next() % E);
          dup = false;
          for (int64_t i = 0; i < j; ++i) dup |= ids[t * topk + i] == e;
        } while (dup);
      } else if (kind == Route::Skewed) {
        if (r.next() % 10 != 0) e = hot;
      } else if (kind == Route::Single) {
        e = hot;
      } else if (kind == Route::Few) {
        e = static_cast<int32_t>(r.next() % std::min<int64_t>(E, 3));
      } else if (kind == Route::Last) {
        if (r.next() % 4 != 0) e = static_cast<int32_t>(E - 1);
      }
      ids[t * topk + j] = e;
    }
  return ids;
}

void check_moe_sort(CudaDevice& dev, int64_t T, int64_t topk, int64_t E, Route kind, uint64_t seed) {
  const int64_t P = T * topk;
  const DeviceBuffer ids = to_device(dev, route(T, topk, E, kind, seed), "ids");
  std::vector<Out> outs;
  outs.push_back(make_out(dev, "offsets", (E + 1) * 4));
  outs.push_back(make_out(dev, "row_token", P * 4));
  outs.push_back(make_out(dev, "pair_row", P * 4));
  for (Out& o : outs) poison(dev, o.old_b), poison(dev, o.new_b);
  ref::moe_sort_pairs(dev.stream(), ids.as<int32_t>(), T, topk, E, outs[0].old_b.as<int32_t>(),
                      outs[1].old_b.as<int32_t>(), outs[2].old_b.as<int32_t>());
  moe_sort_pairs(dev, ids.as<int32_t>(), T, topk, E, outs[0].new_b.as<int32_t>(), outs[1].new_b.as<int32_t>(),
                 outs[2].new_b.as<int32_t>());
  char shape[96];
  std::snprintf(shape, sizeof(shape), "E=%lld top%lld %s (P=%lld)", (long long)E, (long long)topk, route_name(kind),
                (long long)P);
  compare_outs(dev, tag("moe_sort_pairs", shape, T), outs);
}

void check_all(CudaDevice& dev) {
  uint64_t seed = 1000;
  // gdn_prepare: the model shapes; odd widths (narrow: Dk, Dv <= 128 not multiples of 32; wide: > 128)
  for (const GdnShape& g : {k35, k27})
    for (int64_t T : kModelTs) check_gdn_prepare(dev, g, T, seed += 10);
  for (const GdnShape& g : {GdnShape{"odd", 3, 80, 6, 100}, GdnShape{"wide", 2, 200, 3, 72},
                            GdnShape{"wide-v", 1, 64, 2, 300}, GdnShape{"tiny", 1, 1, 40, 5}})
    for (int64_t T : {1, 7, 33}) check_gdn_prepare(dev, g, T, seed += 10);
  // gated_rms_norm (T < 16: the block form, T >= 16: the warp form)
  for (int64_t T : kModelTs) {
    check_gated_rms_norm(dev, "35B", 32, 128, T, seed += 10);
    check_gated_rms_norm(dev, "27B", 48, 128, T, seed += 10);
  }
  for (int64_t T : {7, 16, 33}) {
    check_gated_rms_norm(dev, "odd", 5, 50, T, seed += 10);
    check_gated_rms_norm(dev, "wide", 3, 200, T, seed += 10);
    check_gated_rms_norm(dev, "64", 4, 64, T, seed += 10);
  }
  // conv_silu_rows (history rows come in for t < K-1: T = 1 and 7 read it, T = 1 also shifts it)
  for (int64_t T : kModelTs) {
    check_conv(dev, "35B", 8192, 4, T, seed += 10, false);
    check_conv(dev, "27B", 10240, 4, T, seed += 10, false);
  }
  for (int64_t K : {1, 2, 3, 8}) check_conv(dev, "K", 8192, K, 33, seed += 10, false);
  for (int64_t T : {1, 7, 33}) {
    check_conv(dev, "odd C", 1030, 3, T, seed += 10, false);
    check_conv(dev, "35B", 8192, 4, T, seed += 10, true);
    check_conv(dev, "small C", 36, 8, T, seed += 10, false);
  }
  // moe_sort_pairs: 35B routing (E 256, top-8) at the model Ts and every routing kind; P > 4096
  // takes the multi-chunk passes (T = 513: P = 4104)
  for (int64_t T : kModelTs)
    for (Route r : {Route::Uniform, Route::Skewed, Route::Single, Route::Few, Route::Last})
      check_moe_sort(dev, T, 8, 256, r, seed += 10);
  check_moe_sort(dev, 2048, 8, 256, Route::Uniform, seed += 10);  // 4 chunks
  check_moe_sort(dev, 2048, 8, 256, Route::Skewed, seed += 10);
  check_moe_sort(dev, 4097, 1, 128, Route::Uniform, seed += 10);  // one pair past a chunk
  check_moe_sort(dev, 4096, 1, 128, Route::Few, seed += 10);      // exactly one chunk
  check_moe_sort(dev, 513, 8, 1024, Route::Uniform, seed += 10);  // E at its limit
  check_moe_sort(dev, 300, 10, 512, Route::Last, seed += 10);
  check_moe_sort(dev, 5, 1, 1, Route::Single, seed += 10);
  check_moe_sort(dev, 100, 3, 7, Route::Uniform, seed += 10);
}

// ---------------------------------------------------------------- benchmarks
struct Timing {
  double median_us = 0, min_us = 0, max_us = 0;
};

// Reads a buffer larger than L2 (its lines replace everything, clean), so the next launch starts cold.
__global__ void l2_flush_kernel(const float4* p, size_t n, float* sink) {
  float4 acc = make_float4(0, 0, 0, 0);
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float4 v = p[i];
    acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
  }
  if (acc.x + acc.y + acc.z + acc.w == 1.2345f) *sink = acc.x;  // keeps the loads
}
struct Flusher {
  DeviceBuffer buf, sink;
  void operator()(CudaDevice& dev) const {
    l2_flush_kernel<<<dev.sm_count() * 4, 512, 0, dev.stream()>>>(buf.as<float4>(), buf.bytes() / 16, sink.as<float>());
    MERE_CUDA_CHECK_LAUNCH("l2_flush_kernel");
  }
};
Flusher* g_flush = nullptr;

// Each rep: [flush when cold] event, launch, event; median and range of the launch alone.
Timing time_launches(CudaDevice& dev, bool cold, int warm, int reps, const std::function<void()>& launch) {
  for (int i = 0; i < warm; ++i) launch();
  std::vector<cudaEvent_t> ev(static_cast<size_t>(2 * reps));
  for (auto& e : ev) MERE_CUDA_CHECK(cudaEventCreate(&e));
  for (int i = 0; i < reps; ++i) {
    if (cold) (*g_flush)(dev);
    MERE_CUDA_CHECK(cudaEventRecord(ev[2 * i], dev.stream()));
    launch();
    MERE_CUDA_CHECK(cudaEventRecord(ev[2 * i + 1], dev.stream()));
  }
  dev.synchronize("bench");
  std::vector<double> us;
  for (int i = 0; i < reps; ++i) {
    float ms = 0;
    MERE_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
    us.push_back(ms * 1000.0);
  }
  for (auto& e : ev) cudaEventDestroy(e);
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us.front(), us.back()};
}

int g_reps = 30;

// old vs new of one kernel, cold and warm; `bytes` = the unavoidable DRAM traffic (floor = bytes / copy)
void bench_pair(CudaDevice& dev, const std::string& name, double bytes, const std::function<void()>& old_fn,
                const std::function<void()>& new_fn) {
  const double floor_us = g_copy_gbs > 0 ? bytes / (g_copy_gbs * 1e3) : 0;
  for (bool cold : {true, false}) {
    const Timing to = time_launches(dev, cold, 3, g_reps, old_fn);
    const Timing tn = time_launches(dev, cold, 3, g_reps, new_fn);
    for (int fresh = 0; fresh < 2; ++fresh) {
      const Timing& t = fresh ? tn : to;
      const double gbs = bytes / (t.median_us * 1e-6) / 1e9;
      std::ostringstream o;
      o << "{\"name\":\"" << name << "\",\"variant\":\"" << (fresh ? "new" : "old") << "\",\"cache\":\""
        << (cold ? "cold" : "warm") << "\",\"bytes\":" << jnum(bytes) << ",\"floor_us\":" << jnum(floor_us)
        << ",\"median_us\":" << jnum(t.median_us) << ",\"min_us\":" << jnum(t.min_us) << ",\"max_us\":"
        << jnum(t.max_us) << ",\"gbs\":" << jnum(gbs) << ",\"reps\":" << g_reps << "}";
      g_report.bench.push_back(o.str());
      std::printf("%-44s %s %s %9.2f us [%8.2f-%8.2f] %7.1f GB/s (floor %.2f us)%s\n", name.c_str(),
                  fresh ? "new" : "old", cold ? "cold" : "warm", t.median_us, t.min_us, t.max_us, gbs, floor_us,
                  fresh ? (" x" + std::to_string(to.median_us / tn.median_us).substr(0, 5)).c_str() : "");
    }
  }
  std::fflush(stdout);
}

void bench_all(CudaDevice& dev) {
  {  // copy bandwidth (read + write), the floors' reference
    const size_t bytes = size_t{1} << 30;
    DeviceBuffer a = dev.alloc(bytes, "copy src"), b = dev.alloc(bytes, "copy dst");
    dev.fill_bytes(a.get(), 0, bytes);
    const Timing t = time_launches(dev, false, 3, 20, [&] {
      MERE_CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, dev.stream()));
    });
    g_copy_gbs = 2.0 * bytes / (t.median_us * 1e-6) / 1e9;
    std::printf("d2d copy 1 GiB: %.1f us, %.1f GB/s (read + write)\n", t.median_us, g_copy_gbs);
    std::ostringstream o;
    o << "{\"name\":\"d2d copy 1 GiB\",\"median_us\":" << jnum(t.median_us) << ",\"gbs\":" << jnum(g_copy_gbs) << "}";
    g_report.bench.push_back(o.str());
  }
  Flusher flush{dev.alloc(std::max<size_t>(4 * dev.l2_bytes(), size_t{256} << 20), "l2 flush"), dev.alloc(4, "sink")};
  dev.fill_bytes(flush.buf.get(), 0, flush.buf.bytes());
  g_flush = &flush;
  const int64_t T = 512;
  cudaStream_t s = dev.stream();
  for (const GdnShape& g : {k35, k27}) {
    const int64_t C = g.C(), kd = g.Hk * g.Dk, vd = g.Hv * g.Dv;
    {
      const GdnPrepIn in = gdn_prep_inputs(dev, g, T, 7);
      DeviceBuffer q = dev.alloc(T * kd * 4, "q"), k = dev.alloc(T * kd * 4, "k"), v = dev.alloc(T * vd * 4, "v"),
                   gg = dev.alloc(T * g.Hv * 4, "g"), beta = dev.alloc(T * g.Hv * 4, "beta");
      auto call = [&](auto fn) {
        return [&, fn] {
          fn(s, in.mixed.as<float>(), in.a.as<float>(), in.b.as<float>(), in.neg_a.as<float>(), in.dt_bias.as<float>(),
             T, g.Hk, g.Dk, g.Hv, g.Dv, q.as<float>(), k.as<float>(), v.as<float>(), gg.as<float>(), beta.as<float>());
        };
      };
      bench_pair(dev, std::string("gdn_prepare ") + g.name + " T=512 C=" + std::to_string(C),
                 8.0 * T * C + 16.0 * T * g.Hv, call(ref::gdn_prepare), call(k::gdn_prepare));
    }
    {
      const int64_t K = 4;
      const DeviceBuffer w = to_device(dev, random_vec(static_cast<size_t>(C * K), 8, -1.0f, 1.0f), "w");
      const DeviceBuffer raw = to_device(dev, random_vec(static_cast<size_t>(T * C), 9, -3.0f, 3.0f), "raw");
      DeviceBuffer state = dev.alloc((K - 1) * C * 4, "state"), out = dev.alloc(T * C * 4, "out");
      dev.fill_bytes(state.get(), 0, state.bytes());
      const double bytes = 8.0 * T * C + 4.0 * C * K + 8.0 * (K - 1) * C;
      bench_pair(dev, std::string("conv_silu_rows (rows+shift) ") + g.name + " T=512 C=" + std::to_string(C), bytes,
                 [&] { ref::conv_silu_rows(s, state.as<float>(), w.as<float>(), raw.as<float>(), T, C, K, out.as<float>()); },
                 [&] { k::conv_silu_rows(s, state.as<float>(), w.as<float>(), raw.as<float>(), T, C, K, out.as<float>()); });
      const Timing ts = time_launches(dev, true, 3, g_reps, [&] {
        ref::conv_shift(s, state.as<float>(), raw.as<float>(), T, C, K);
      });
      std::printf("%-44s (unchanged, in both rows above) %.2f us cold\n",
                  (std::string("  conv_shift_kernel ") + g.name).c_str(), ts.median_us);
      std::ostringstream o;
      o << "{\"name\":\"conv_shift_kernel " << g.name << "\",\"cache\":\"cold\",\"median_us\":" << jnum(ts.median_us)
        << "}";
      g_report.bench.push_back(o.str());
    }
    {
      const size_t n = static_cast<size_t>(T * vd);
      const DeviceBuffer x = to_device(dev, random_vec(n, 10, -2.0f, 2.0f), "x");
      const DeviceBuffer z = to_device(dev, random_vec(n, 11, -6.0f, 6.0f), "z");
      const DeviceBuffer w = to_device(dev, random_vec(static_cast<size_t>(g.Dv), 12, 0.5f, 1.5f), "w");
      DeviceBuffer y = dev.alloc(n * 4, "y");
      bench_pair(dev, std::string("gated_rms_norm ") + g.name + " T=512 Hv=" + std::to_string(g.Hv), 12.0 * n + 4.0 * g.Dv,
                 [&] { ref::gated_rms_norm(s, x.as<float>(), z.as<float>(), w.as<float>(), T, g.Hv, g.Dv, 1e-6f, y.as<float>()); },
                 [&] { k::gated_rms_norm(s, x.as<float>(), z.as<float>(), w.as<float>(), T, g.Hv, g.Dv, 1e-6f, y.as<float>()); });
    }
  }
  for (Route r : {Route::Uniform, Route::Skewed}) {
    for (int64_t Ts : {int64_t{512}, int64_t{513}}) {
      const int64_t topk = 8, E = 256, P = Ts * topk;
      const DeviceBuffer ids = to_device(dev, route(Ts, topk, E, r, 13), "ids");
      DeviceBuffer off = dev.alloc((E + 1) * 4, "off"), rt = dev.alloc(P * 4, "rt"), pr = dev.alloc(P * 4, "pr");
      bench_pair(dev, std::string("moe_sort_pairs T=") + std::to_string(Ts) + " top8 E=256 " + route_name(r),
                 12.0 * P + 4.0 * (E + 1),
                 [&] { ref::moe_sort_pairs(s, ids.as<int32_t>(), Ts, topk, E, off.as<int32_t>(), rt.as<int32_t>(), pr.as<int32_t>()); },
                 [&] { moe_sort_pairs(dev, ids.as<int32_t>(), Ts, topk, E, off.as<int32_t>(), rt.as<int32_t>(), pr.as<int32_t>()); });
    }
  }
  g_flush = nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  bool bench = true, checks = true;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-bench") bench = false;
    else if (a == "--bench-only") checks = false;
    else if (a == "--reps" && i + 1 < argc) g_reps = std::max(20, std::atoi(argv[++i]));
    else if (a == "--json" && i + 1 < argc) json = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--no-bench] [--bench-only] [--reps N (20..; default 30)] [--json PATH]\n", argv[0]);
      return 2;
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    if (CudaDevice::device_count() == 0) {
      std::fprintf(stderr, "[mere_glue_check] no CUDA device: expected at least 1, got 0\n");
      return 3;
    }
    CudaDevice dev(0);
    dev.make_current();  // the k:: entry points launch on the current device
    g_report.device = dev.describe();
    std::printf("%s\n", g_report.device.c_str());
    auto phase = [&](const char* name, const std::function<void()>& f) { run_phase(dev, name, f); };
    if (checks) phase("checks", [&] { check_all(dev); });
    if (bench) phase("bench", [&] { bench_all(dev); });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    ++g_report.failures;
  }
  return finish_report(json, t0);
}
