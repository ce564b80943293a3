// Affine 4/8-bit group-64 matrix x skinny-rows kernels (see qmatvec.h for the exact contracts).
// 4-bit runs on the integer kernel by default (qmatvec_int.cu; tensor cores: qmatvec_tc.cu); this
// file holds the SIMT kernel (8-bit, and 4-bit with MERE_CUDA_QMATVEC=simt) and the dispatch. SIMT: a warp owns R rows; lane l streams 16-byte code chunks j = l, l+32, ... of each, U chunks in
// flight, reusing the x slice it loads for all R rows. Codes become floats without conversions:
// (code bits | 0x4B000000) - 2^23 = q * 16^p exactly, and x was prescaled by 16^-p (prepare step).
// The prepared x is stored lane-interleaved ([span of 32 chunks][float4 unit][lane]) so that each
// x load of a warp reads 512 contiguous bytes (v1 read 32 scattered lines per load: L1-bound).
#include "backend/cuda/qmatvec.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <tuple>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/env_choice.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/qmatvec_common.cuh"
#include "backend/cuda/qmatvec_int.h"
#include "backend/cuda/qmatvec_prep.cuh"
#include "backend/cuda/qmatvec_tc.h"

namespace mere::cuda {
namespace {

constexpr uint32_t kMagic = 0x4B000000u;  // 2^23 as float bits
constexpr float kMagicF = 8388608.0f;
constexpr int kWarpsPerBlock = 4;

using qm::ld_stream;
using qm::word_of;
__device__ __forceinline__ float bf16_bits_to_f32(uint16_t b) { return qm::bf16_to_f32(b); }

// (w & mask) | 2^23-magic in one LOP3 (plain C++ gave two), then the exact subtraction.
template <uint32_t kMask>
__device__ __forceinline__ float magic_minus(uint32_t w, uint32_t magic) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(w), "n"(kMask), "r"(magic));
  return __fsub_rn(__uint_as_float(r), kMagicF);
}

// One 32-bit word of codes -> 32/BITS floats q * 2^(BITS*p) (p: the code's slot inside its field).
template <int BITS>
__device__ __forceinline__ void dequant_word(uint32_t w, uint32_t magic, float* d) {
  if constexpr (BITS == 4) {
    d[0] = magic_minus<0x0000000Fu>(w, magic);
    d[1] = magic_minus<0x000000F0u>(w, magic);
    d[2] = magic_minus<0x00000F00u>(w, magic);
    d[3] = magic_minus<0x0000F000u>(w, magic);
    d[4] = magic_minus<0x000F0000u>(w, magic);
    const uint32_t h = w >> 20;
    d[5] = magic_minus<0x0000000Fu>(h, magic);
    d[6] = magic_minus<0x000000F0u>(h, magic);
    d[7] = magic_minus<0x00000F00u>(h, magic);
  } else {
    d[0] = magic_minus<0x000000FFu>(w, magic);
    d[1] = magic_minus<0x0000FF00u>(w, magic);
    const uint32_t h = w >> 16;
    d[2] = magic_minus<0x000000FFu>(h, magic);
    d[3] = magic_minus<0x0000FF00u>(h, magic);
  }
}

using prep::xs_stride;

// One thread per (t, chunk of 16 columns): the 8-bit prepare (4-bit: detail::q4_prepare).
__global__ void q8_prepare_kernel(const float* __restrict__ x, int T, int cols, prep::Layout L) {
  pdl_begin();
  const int nchunk = cols / 16;
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= T * nchunk) return;
  const int t = idx / nchunk, j = idx - t * nchunk;
  const float4* xr = reinterpret_cast<const float4*>(x + static_cast<size_t>(t) * cols + static_cast<size_t>(j) * 16);
  float v[16];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float4 f = xr[i];
    v[4 * i] = f.x, v[4 * i + 1] = f.y, v[4 * i + 2] = f.z, v[4 * i + 3] = f.w;
  }
  prep::q8_emit(v, t, j, L);
}

// One matrix of a SIMT launch: warps [previous warp_end, warp_end) own its rows, R a warp.
struct SimtMat {
  const uint4* codes;
  const uint16_t* scales;
  const uint16_t* biases;
  float* y;
  int rows, warp_end, accumulate;
};
struct SimtArgs {
  SimtMat m[kMaxMultiMatrices];
  int n;
};

// y[t, r] for R rows per warp, U chunks per row in flight per lane; the warp's matrix is the one
// whose warp range holds it (each row's arithmetic is the same whatever shares the launch).
template <int BITS, int T, int R, int U>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    qmatvec_kernel(const SimtArgs args, const float* __restrict__ ws, int cols) {
  pdl_begin();
  constexpr int E = 128 / BITS;  // columns per 16-byte chunk
  constexpr int PW = 32 / BITS;  // columns per word
  constexpr int UPC = E / 4;     // float4 units of x per chunk
  const int nchunk = cols / E;
  const int ngroups = cols / 64;
  const int lane = threadIdx.x & 31;
  const int warp = blockIdx.x * kWarpsPerBlock + static_cast<int>(threadIdx.x >> 5);
  // the warp's matrix (constant indices only: the arguments stay in the parameter bank)
  const uint4* codes = args.m[0].codes;
  const uint16_t *scales = args.m[0].scales, *biases = args.m[0].biases;
  float* y = args.m[0].y;
  int rows = args.m[0].rows, warp_end = args.m[0].warp_end, accumulate = args.m[0].accumulate, warp_begin = 0;
#pragma unroll
  for (int i = 1; i < kMaxMultiMatrices; ++i) {
    if (i < args.n && warp >= args.m[i - 1].warp_end) {
      codes = args.m[i].codes, scales = args.m[i].scales, biases = args.m[i].biases, y = args.m[i].y;
      rows = args.m[i].rows, warp_begin = args.m[i - 1].warp_end, warp_end = args.m[i].warp_end;
      accumulate = args.m[i].accumulate;
    }
  }
  if (warp >= warp_end) return;
  const int row0 = (warp - warp_begin) * R;
  const int stride = static_cast<int>(xs_stride(cols, BITS));
  const float* sx = ws + static_cast<size_t>(T) * stride;
  uint32_t magic;
  asm("mov.b32 %0, %1;" : "=r"(magic) : "n"(kMagic));

  const uint4* wrow[R];
  int srow[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int rr = min(row0 + r, rows - 1);  // tail rows repeat the last row; their results are dropped
    wrow[r] = codes + static_cast<size_t>(rr) * nchunk;
    srow[r] = rr * ngroups;
  }

  float acc[R][T];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t) acc[r][t] = 0.0f;

  for (int base = lane; base < nchunk; base += 32 * U) {
    uint4 wv[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int j = base + 32 * u;
      if (j < nchunk) {
#pragma unroll
        for (int r = 0; r < R; ++r) wv[u][r] = ld_stream(wrow[r] + j);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int j = base + 32 * u;
      if (j < nchunk) {
        const int g = (j * E) / 64;
        float s[R], b[R];
#pragma unroll
        for (int r = 0; r < R; ++r) {
          s[r] = bf16_bits_to_f32(__ldg(scales + srow[r] + g));
          b[r] = bf16_bits_to_f32(__ldg(biases + srow[r] + g));
        }
        // x units of chunk j: (j/32)*UPC*32 + j%32 + u*32 (lane-consecutive: coalesced)
        const float4* xj = reinterpret_cast<const float4*>(ws) + (j >> 5) * UPC * 32 + (j & 31);
        float qx[R][T];
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int t = 0; t < T; ++t) qx[r][t] = 0.0f;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          float d[R][PW];
#pragma unroll
          for (int r = 0; r < R; ++r) dequant_word<BITS>(word_of(wv[u][r], k), magic, d[r]);
#pragma unroll
          for (int t = 0; t < T; ++t) {
            const float4* xp = xj + static_cast<size_t>(t) * (stride / 4) + (k * PW / 4) * 32;
            float xv[PW];
#pragma unroll
            for (int e = 0; e < PW; e += 4) {
              const float4 v4 = __ldg(xp + (e / 4) * 32);
              xv[e] = v4.x;
              xv[e + 1] = v4.y;
              xv[e + 2] = v4.z;
              xv[e + 3] = v4.w;
            }
#pragma unroll
            for (int r = 0; r < R; ++r)
#pragma unroll
              for (int e = 0; e < PW; ++e) qx[r][t] = __fmaf_rn(d[r][e], xv[e], qx[r][t]);
          }
        }
#pragma unroll
        for (int t = 0; t < T; ++t) {
          const float sxt = __ldg(sx + static_cast<size_t>(t) * nchunk + j);
#pragma unroll
          for (int r = 0; r < R; ++r) acc[r][t] = __fmaf_rn(s[r], qx[r][t], __fmaf_rn(b[r], sxt, acc[r][t]));
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t) acc[r][t] = qm::butterfly_sum(acc[r][t]);
  // lane (r*T + t) % 32 stores (r, t): spreads the stores over the warp
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t)
      if (lane == (r * T + t) % 32 && row0 + r < rows) {
        float* yp = y + static_cast<size_t>(t) * rows + row0 + r;
        *yp = accumulate ? __fadd_rn(*yp, acc[r][t]) : acc[r][t];
      }
}

using KernelFn = void (*)(SimtArgs, const float*, int);

struct Variant {
  int bits, R, U;
  int t_lo, t_hi;  // T range compiled for this variant
  KernelFn fns[kMaxSkinnyRows];
};

template <int BITS, int R, int U, int TLO, int THI>
Variant make_variant() {
  Variant v{BITS, R, U, TLO, THI, {}};
  qm::fill_by_T<TLO, THI>(v.fns, [](auto t) { return &qmatvec_kernel<BITS, decltype(t)::value, R, U>; });
  return v;
}

// Compiled configurations: R=4, U=2 for T <= 4, R=4, U=1 above (register pressure); 4-bit T <= 2
// also R=8/U=1 and R=2/U=2 (the T = 1 defaults) and R=4/U=4, R=2/U=4 (the benchmark's sweep);
// 8-bit T <= 4 also R=1/U=4 and R=2/U=2 (more warps for the MoE router's ~257 rows: MERE_CUDA_Q8_SHAPE).
const Variant* variants(int* count) {
  static const Variant table[] = {
      make_variant<4, 4, 2, 1, 4>(), make_variant<4, 4, 1, 5, 9>(), make_variant<8, 4, 2, 1, 4>(),
      make_variant<8, 4, 1, 5, 9>(), make_variant<4, 4, 4, 1, 2>(), make_variant<4, 2, 4, 1, 2>(),
      make_variant<4, 8, 1, 1, 2>(), make_variant<4, 2, 2, 1, 2>(), make_variant<8, 1, 4, 1, 4>(),
      make_variant<8, 2, 2, 1, 4>(),
  };
  *count = static_cast<int>(sizeof(table) / sizeof(table[0]));
  return table;
}

const Variant* find_variant(int bits, int64_t T, int R, int U) {
  int n = 0;
  const Variant* v = variants(&n);
  for (int i = 0; i < n; ++i)
    if (v[i].bits == bits && v[i].R == R && v[i].U == U && T >= v[i].t_lo && T <= v[i].t_hi) return &v[i];
  return nullptr;
}

void check_shape(const char* where, int bits, int64_t T, int64_t cols) {
  MERE_CHECK(bits == 4 || bits == 8, where, "unsupported bits: expected 4 or 8, got ", bits);
  MERE_CHECK(T >= 1 && T <= kMaxSkinnyRows, where, "row count out of range: expected 1..", kMaxSkinnyRows, ", got ", T);
  MERE_CHECK(cols > 0 && cols % 64 == 0, where, "input width must be a positive multiple of the group (64), got ", cols);
  MERE_CHECK(T * cols < (int64_t{1} << 31), where, "input too large: expected T*cols < 2^31, got ", T * cols);
}

// SIMT part of the workspace, then (4-bit) the tensor-core part at a 16-byte-aligned offset.
using prep::simt_floats;
using prep::tc_offset;

bool is_tc(int bits, const QMatvecConfig& c) { return bits == 4 && c.integer == 0 && c.rows_per_warp >= 16; }
bool is_int(int bits, const QMatvecConfig& c) { return bits == 4 && c.integer != 0; }

int current_sm_count() {
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
    return 132;
  return sms;
}

// 4-bit default kernel, read once for the whole process (one kernel for every T keeps batch-width
// invariance): the integer kernel; MERE_CUDA_QMATVEC=simt the fp32 SIMT kernel, =tc the tensor-core
// one (both slower at T = 1 on the H200: docs/cuda-kernels.md §1). Any other value is an error.
// =int-reg / =int-pipe / =int-mma force one implementation of the integer contract (same bits;
// benchmarks); =mma the group-integer tensor-core kernel (its own contract, qmatvec.h).
enum class Q4Kernel { Integer, IntegerRegister, IntegerPipelined, IntegerMma, GroupMma, Simt, TensorCore };
Q4Kernel q4_kernel() {
  static const Q4Kernel v = [] {
    const char* e = std::getenv("MERE_CUDA_QMATVEC");
    if (e == nullptr || *e == 0 || std::string_view(e) == "int") return Q4Kernel::Integer;
    if (std::string_view(e) == "int-reg") return Q4Kernel::IntegerRegister;
    if (std::string_view(e) == "int-pipe") return Q4Kernel::IntegerPipelined;
    if (std::string_view(e) == "int-mma") return Q4Kernel::IntegerMma;
    if (std::string_view(e) == "mma") return Q4Kernel::GroupMma;
    if (std::string_view(e) == "simt") return Q4Kernel::Simt;
    if (std::string_view(e) == "tc") return Q4Kernel::TensorCore;
    MERE_CHECK(false, "MERE_CUDA_QMATVEC", "expected int, int-reg, int-pipe, int-mma, mma, simt or tc, got '", e, "'");
    return Q4Kernel::Integer;
  }();
  return v;
}
// The integer implementation of the default 4-bit shape at T (H200 sweep: docs/cuda-kernels.md §1 v7).
detail::IntImpl int_impl(int64_t T) {
  switch (q4_kernel()) {
    case Q4Kernel::IntegerRegister: return detail::IntImpl::Register;
    case Q4Kernel::IntegerPipelined: return detail::IntImpl::Pipelined;
    case Q4Kernel::IntegerMma: return detail::IntImpl::Mma;
    case Q4Kernel::GroupMma: return detail::IntImpl::Register;  // MLX-layout matrices; tiled ones: qmatvec_multi
    default: return detail::IntImpl::Register;  // the fastest in the engine (sweep of session 7)
  }
}
bool tensor_core_default() { return q4_kernel() == Q4Kernel::TensorCore; }

}  // namespace

// The 4-bit parts the engine's producers write (qmatvec_prep.cuh): the integer kernels read only the
// integer layout; =mma adds the group-integer one (tiled matrices; MLX-layout ones stay on the integer
// kernel); =simt and =tc, whose launches may fall back to one another, get every part, as does
// MERE_CUDA_PREP_PARTS=all (the A/B switch: the same bits in every part that is read).
int prep::producer_parts() {
  static const int parts = [] {
    if (env_choice("MERE_CUDA_PREP_PARTS", {"used", "all"}) == 1) return prep::kPartsAll;
    switch (q4_kernel()) {
      case Q4Kernel::GroupMma: return prep::kPartInt | prep::kPartGm;
      case Q4Kernel::Simt:
      case Q4Kernel::TensorCore: return prep::kPartsAll;
      default: return prep::kPartInt;
    }
  }();
  return parts;
}

namespace {

// MERE_CUDA_Q8_SHAPE=R,U: the 8-bit SIMT shape for T <= 4 launches of every size; unset: 1,4 (4x
// the warps) for launches of at most kSmallRows rows (the 35B-A3B router + shared-expert gate, 257
// rows: H100 35B-A3B decode 379.8 -> 395.6 tok/s, session 15; 2,2 gave 391.8), 4,2 above. The same
// bits whatever the shape (the SIMT contract). Any other value is an error. Read once per process.
std::pair<int, int> q8_shape(int64_t rows) {
  static const std::pair<int, int> shape = [] {
    const char* e = std::getenv("MERE_CUDA_Q8_SHAPE");
    if (e == nullptr || *e == '\0') return std::pair<int, int>{0, 0};
    int R = 0, U = 0;
    char tail = 0;
    const int n = std::sscanf(e, "%d,%d%c", &R, &U, &tail);
    MERE_CHECK(n == 2 && find_variant(8, 1, R, U) != nullptr && find_variant(8, 4, R, U) != nullptr,
               "MERE_CUDA_Q8_SHAPE", "expected R,U of a compiled 8-bit shape for T = 1..4 (4,2 1,4 2,2), got '", e, "'");
    return std::pair<int, int>{R, U};
  }();
  if (shape.first != 0) return shape;
  return rows <= detail::kSmallRows ? std::pair<int, int>{1, 4} : std::pair<int, int>{4, 2};
}

QMatvecConfig default_config(int bits, int64_t T, int64_t rows, int sms) {
  if (bits == 4 && q4_kernel() != Q4Kernel::Simt && q4_kernel() != Q4Kernel::TensorCore) {
    QMatvecConfig c = detail::q4int_default(T, int_impl(T));
    // 1-token launches of few rows (the 27B's out_proj and down): MERE_CUDA_MV_SMALL's shape
    if (T == 1 && c.integer == 1 && c.rows_per_warp == 4 && c.unroll == 1 && rows <= detail::kSmallRows)
      std::tie(c.rows_per_warp, c.unroll) = detail::q4int_small_shape();
    return c;
  }
  if (bits == 4 && tensor_core_default()) return detail::q4tc_default(T, rows, sms);
  // SIMT, H200 sweep (v2): 4-bit T = 1: 8 rows a warp when there are enough rows to fill the chip
  // (>= 8192: 1024+ warps), else 2 rows a warp with 2 chunks in flight (more warps)
  if (bits == 4 && T == 1) return rows >= 8192 ? QMatvecConfig{8, 1} : QMatvecConfig{2, 2};
  if (bits == 8 && T <= 4) {
    const auto [R, U] = q8_shape(rows);
    return QMatvecConfig{R, U};
  }
  return T <= 4 ? QMatvecConfig{4, 2} : QMatvecConfig{4, 1};
}

}  // namespace

int64_t qmatvec_workspace_floats(int64_t T, int64_t cols, int bits) {
  if (bits == 4) return prep::q4_floats(T, cols);
  return simt_floats(T, cols, bits);
}

QMatvecConfig qmatvec_default_config(int bits, int64_t T, int64_t rows) {
  return default_config(bits, T, rows, current_sm_count());
}

QMatvecConfig qmatvec_tc_config(int64_t T, int64_t rows) {
  MERE_CHECK(T >= 1 && T <= kMaxSkinnyRows, "qmatvec_tc_config", "row count out of range: expected 1..", kMaxSkinnyRows,
             ", got ", T);
  return detail::q4tc_default(T, rows, current_sm_count());
}

bool qmatvec_config_available(int bits, int64_t T, QMatvecConfig cfg) {
  if (cfg.rows_per_warp == 0 || cfg.unroll == 0) return T >= 1 && T <= kMaxSkinnyRows;
  if (is_int(bits, cfg)) return detail::q4int_available(T, cfg);
  if (is_tc(bits, cfg)) return detail::q4tc_available(T, cfg);
  return find_variant(bits, T, cfg.rows_per_warp, cfg.unroll) != nullptr;
}

void qmatvec_prepare(CudaDevice& dev, const float* x, int64_t T, int64_t cols, int bits, float* ws) {
  check_shape("qmatvec_prepare", bits, T, cols);
  DeviceGuard guard(dev.ordinal());
  if (bits == 4) {  // both layouts: the tensor-core kernel's and the SIMT fallback's
    detail::q4_prepare(dev.stream(), x, static_cast<int>(T), static_cast<int>(cols), ws);
    return;
  }
  const int n = static_cast<int>(T * (cols / 16));
  const int threads = 128, blocks = (n + threads - 1) / threads;
  launch("q8_prepare_kernel", q8_prepare_kernel, blocks, threads, 0, dev.stream(), x, static_cast<int>(T),
         static_cast<int>(cols), prep::layout(ws, T, cols, 8));
}

bool qmatvec_tensor_cores(int bits) { return bits == 4 && tensor_core_default(); }

bool qmatvec_tiled_weights() { return q4_kernel() == Q4Kernel::GroupMma; }

void qmatvec_multi(CudaDevice& dev, const QMatvecOut* outs, int n, const float* ws, int64_t T, QMatvecConfig cfg) {
  MERE_CHECK(n >= 1 && n <= kMaxMultiMatrices, "qmatvec", "matrix count out of range: expected 1..", kMaxMultiMatrices,
             ", got ", n);
  const int bits = outs[0].W.bits;
  const int64_t cols = outs[0].W.cols;
  check_shape("qmatvec", bits, T, cols);
  int64_t total_rows = 0;
  for (int i = 0; i < n; ++i) {
    const QWeightView& W = outs[i].W;
    MERE_CHECK(W.bits == bits && W.cols == cols, "qmatvec", "matrices of one launch must share bits and width: matrix ",
               i, " is ", W.bits, "-bit [", W.rows, ", ", W.cols, "], matrix 0 ", bits, "-bit with ", cols, " columns");
    MERE_CHECK(W.rows > 0 && W.rows < (int64_t{1} << 31) && W.rows * (W.cols / 64) < (int64_t{1} << 31), "qmatvec",
               "row count out of range: expected 1..2^31 rows with rows*cols/64 < 2^31, got ", W.rows);
    MERE_CHECK(W.tiled == outs[0].W.tiled, "qmatvec", "matrices of one launch must share a layout: matrix ", i,
               W.tiled ? " is tiled, matrix 0 is not" : " is not tiled, matrix 0 is");
    total_rows += W.rows;
  }
  if (outs[0].W.tiled) {  // tiled 4-bit weights: only the group-integer kernel reads them
    if (cfg.rows_per_warp == 0 || cfg.unroll == 0) cfg = detail::q4int_default(T, detail::IntImpl::GroupMma);
    MERE_CHECK(cfg.integer == detail::kGroupMma, "qmatvec",
               "tiled 4-bit weights run only on the group-integer kernel, got a config for another kernel");
    DeviceGuard guard(dev.ordinal());
    detail::q4gm_launch(dev.stream(), outs, n, ws, T, cols, cfg, dev.sm_count());
    return;
  }
  if (cfg.rows_per_warp == 0 || cfg.unroll == 0) cfg = default_config(bits, T, total_rows, dev.sm_count());
  MERE_CHECK(cfg.integer != detail::kGroupMma, "qmatvec",
             "the group-integer kernel needs tiled 4-bit weights (qmatvec_tile_upload / qmatvec_tile_device)");
  DeviceGuard guard(dev.ordinal());
  if (is_int(bits, cfg)) {
    detail::q4int_launch(dev.stream(), outs, n, ws, T, cols, cfg, dev.sm_count());
    return;
  }
  if (is_tc(bits, cfg)) {
    for (int i = 0; i < n; ++i) {
      MERE_CHECK(!outs[i].accumulate, "qmatvec", "accumulating into y needs the SIMT kernel (tensor cores selected)");
      detail::q4tc_launch(dev.stream(), outs[i].W, ws + tc_offset(T, cols), T, outs[i].y, cfg);
    }
    return;
  }
  const Variant* v = find_variant(bits, T, cfg.rows_per_warp, cfg.unroll);
  MERE_CHECK(v != nullptr, "qmatvec", "no compiled kernel for bits=", bits, " T=", T, " rows_per_warp=",
             cfg.rows_per_warp, " unroll=", cfg.unroll);
  SimtArgs args{};
  args.n = n;
  int64_t warps = 0;
  for (int i = 0; i < n; ++i) {
    const QWeightView& W = outs[i].W;
    warps += (W.rows + cfg.rows_per_warp - 1) / cfg.rows_per_warp;
    MERE_CHECK(warps < (int64_t{1} << 30), "qmatvec", "too many rows for one launch: ", total_rows);
    args.m[i] = SimtMat{reinterpret_cast<const uint4*>(W.codes), W.scales, W.biases, outs[i].y,
                        static_cast<int>(W.rows), static_cast<int>(warps), outs[i].accumulate ? 1 : 0};
  }
  const int64_t blocks = (warps + kWarpsPerBlock - 1) / kWarpsPerBlock;
  launch("qmatvec_kernel", v->fns[T - 1], static_cast<unsigned>(blocks), kWarpsPerBlock * 32, 0, dev.stream(), args, ws,
         static_cast<int>(cols));
}

void qmatvec(CudaDevice& dev, const QWeightView& W, const float* ws, int64_t T, float* y, QMatvecConfig cfg) {
  const QMatvecOut out{W, y, false};
  qmatvec_multi(dev, &out, 1, ws, T, cfg);
}

bool qmatvec_src_supported(const QMatvecOut* outs, int n, const QMatvecSource& in) {
  const Q4Kernel k = q4_kernel();
  if (n < 1 || n > kMaxMultiMatrices || (k != Q4Kernel::Integer && k != Q4Kernel::IntegerRegister &&
                                         k != Q4Kernel::IntegerPipelined))
    return false;
  auto al = [](const void* p) { return p != nullptr && (reinterpret_cast<uintptr_t>(p) & 15u) == 0; };
  const int64_t cols = outs[0].W.cols;
  int64_t rows = 0;
  for (int i = 0; i < n; ++i) {
    const QWeightView& W = outs[i].W;
    if (W.bits != 4 || W.tiled || W.cols != cols || W.rows <= 0) return false;
    rows += W.rows;
  }
  using K = QMatvecSource::Kind;
  const bool heads_ok = in.kind == K::RmsNorm ||
                        (in.head_dim >= 16 && in.head_dim % 16 == 0 && cols % in.head_dim == 0 &&
                         cols / in.head_dim <= detail::kSrcMaxHeads);
  const bool inputs = al(in.x) && (in.kind == K::SigmoidGate || al(in.w)) && (in.kind == K::RmsNorm || al(in.z));
  return cols % 64 == 0 && cols >= 64 && cols <= detail::kSrcMaxCols && rows < (int64_t{1} << 31) && heads_ok &&
         inputs && detail::q4int_src_smem(cols) <= 48 * 1024;
}

void qmatvec_src_multi(CudaDevice& dev, const QMatvecOut* outs, int n, const QMatvecSource& in, QMatvecConfig cfg) {
  MERE_CHECK(qmatvec_src_supported(outs, n, in), "qmatvec_src",
             "this launch does not compute its input inside: expected 1..", kMaxMultiMatrices,
             " 4-bit MLX-layout matrices of one width (a multiple of 64 up to ", detail::kSrcMaxCols,
             "), 16-byte aligned inputs, heads of a multiple of 16 columns (at most ", detail::kSrcMaxHeads,
             "), and the integer contract as the 4-bit kernel (MERE_CUDA_QMATVEC)");
  if (cfg.rows_per_warp == 0 || cfg.unroll == 0) {  // the default shape (MERE_CUDA_MV_SMALL's for few rows)
    int64_t rows = 0;
    for (int i = 0; i < n; ++i) rows += outs[i].W.rows;
    cfg = default_config(4, 1, rows, dev.sm_count());
  }
  DeviceGuard guard(dev.ordinal());
  detail::q4int_src_launch(dev.stream(), outs, n, in, outs[0].W.cols, cfg, dev.sm_count());
}

void qlinear(CudaDevice& dev, const QWeightView& W, const float* x, int64_t T, float* ws, float* y,
             QMatvecConfig cfg) {
  qmatvec_prepare(dev, x, T, W.cols, W.bits, ws);
  qmatvec(dev, W, ws, T, y, cfg);
}

}  // namespace mere::cuda
