// mere_prefill_check: correctness checks and benchmarks of the CUDA prefill kernels (qgemm on the
// tensor cores, its cuBLASLt alternative, grouped MoE qgemm, gdn_prefill, attention_prefill) on a real GPU. A plain main (the
// GPU machine has no gtest). Every check: random inputs, outputs NaN-poisoned before the launch,
// NMSE + element-wise bounds against the CPU reference ops, a non-finite output always fails.
// Usage: mere_prefill_check [--quick] [--no-bench] [--bench-only] [--only wgemm|gdn|moe|attn] [--json PATH]. Exit 1 on
// any failure.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backend/cuda/attention_prefill.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "backend/cuda/gdn.h"
#include "backend/cuda/gdn_chunked.h"
#include "backend/cuda/gdn_prefill.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/gemm_moe.h"
#include "backend/cuda/gemm_blas.h"
#include "backend/cuda/gemm_wgmma.h"
#include "backend/cuda/gemm_wgmma_ws.h"
#include "backend/cuda/engine/kernels.h"
#include "backend/cuda/qmatvec.h"
#include "core/dtype.h"
#include "model/matrix.h"
#include "ops/ops.h"
#include "check_report.h"

using namespace mere;
using namespace mere::cuda;
using namespace mere::cuda::checktool;

namespace {

bool record(const std::string& name, const Metrics& m, double nmse_tol) {
  const bool ok = m.nonfinite == 0 && m.out_of_bound == 0 && m.nmse <= nmse_tol && m.n > 0;
  std::ostringstream o;
  o << "{\"check\":\"" << name << "\",\"pass\":" << (ok ? "true" : "false") << ",\"n\":" << m.n
    << ",\"nmse\":" << jnum(m.nmse) << ",\"nmse_tol\":" << jnum(nmse_tol) << ",\"max_abs_err\":" << jnum(m.max_abs)
    << ",\"rms_ref\":" << jnum(m.rms_ref) << ",\"nonfinite\":" << m.nonfinite << ",\"out_of_bound\":" << m.out_of_bound
    << "}";
  g_report.checks.push_back(o.str());
  if (ok) ++g_report.passes;
  else ++g_report.failures;
  std::printf("%s %s: nmse %.3g (tol %.3g) max_abs %.3g rms_ref %.3g nonfinite %zu oob %zu\n", ok ? "ok  " : "FAIL",
              name.c_str(), m.nmse, nmse_tol, m.max_abs, m.rms_ref, m.nonfinite, m.out_of_bound);
  return ok;
}

// parallel for over [0, n)
void pfor(int64_t n, const std::function<void(int64_t)>& f) {
  const int nt = static_cast<int>(std::max(1u, std::min(32u, std::thread::hardware_concurrency())));
  std::vector<std::thread> th;
  std::atomic<int64_t> next{0};
  for (int i = 0; i < nt; ++i)
    th.emplace_back([&] {
      for (int64_t j; (j = next.fetch_add(1)) < n;) f(j);
    });
  for (auto& t : th) t.join();
}

struct HostQ {
  int64_t rows, cols;
  int bits;
  std::vector<uint32_t> codes;
  std::vector<uint16_t> scales, biases;
  Matrix view() const {
    Matrix m;
    m.rows = rows;
    m.cols = cols;
    m.bits = bits;
    m.group = 64;
    m.scale_dtype = DType::BF16;
    m.data = codes.data();
    m.scales = scales.data();
    m.biases = biases.data();
    return m;
  }
};
HostQ random_q(int64_t rows, int64_t cols, int bits, uint64_t seed) {
  HostQ q{rows, cols, bits, {}, {}, {}};
  q.codes.resize(static_cast<size_t>(rows * cols * bits / 32));
  q.scales.resize(static_cast<size_t>(rows * cols / 64));
  q.biases.resize(q.scales.size());
  Rng r(seed);
  for (auto& w : q.codes) w = static_cast<uint32_t>(r.next());
  const float half = static_cast<float>((1 << bits) - 1) * 0.5f;
  for (size_t i = 0; i < q.scales.size(); ++i) {
    const float s = r.uniform(0.004f, 0.02f) * ((r.next() & 1) ? 1.0f : -1.0f);
    q.scales[i] = f32_to_bf16(s);
    q.biases[i] = f32_to_bf16(-half * s + r.uniform(-0.01f, 0.01f));
  }
  return q;
}
struct DevQ {
  DeviceBuffer codes, scales, biases;
  QWeightView view;
};
DevQ upload_q(CudaDevice& dev, const HostQ& q) {
  DevQ d;
  d.codes = to_device(dev, q.codes, "test codes");
  d.scales = to_device(dev, q.scales, "test scales");
  d.biases = to_device(dev, q.biases, "test biases");
  d.view = QWeightView{d.codes.as<uint32_t>(), d.scales.as<uint16_t>(), d.biases.as<uint16_t>(), q.rows, q.cols, q.bits};
  return d;
}
// ops::linear for the listed rows of x only, parallel over row slices of W. y: [ts.size(), rows]
std::vector<float> ref_linear_rows(const Matrix& W, const std::vector<float>& x, const std::vector<int64_t>& ts) {
  const int64_t cols = W.cols, nT = static_cast<int64_t>(ts.size());
  std::vector<float> xs(static_cast<size_t>(nT * cols)), y(static_cast<size_t>(nT * W.rows));
  for (int64_t i = 0; i < nT; ++i) std::memcpy(&xs[i * cols], &x[ts[i] * cols], cols * 4);
  const int64_t slice = 256, ns = (W.rows + slice - 1) / slice;
  pfor(ns, [&](int64_t s) {
    const int64_t r0 = s * slice, n = std::min(slice, W.rows - r0);
    std::vector<float> tmp(static_cast<size_t>(n * nT));
    ops::linear(W.row_slice(r0, n), xs.data(), nT, tmp.data());
    for (int64_t t = 0; t < nT; ++t) std::memcpy(&y[t * W.rows + r0], &tmp[t * n], n * 4);
  });
  return y;
}

// ---------------------------------------------------------------- qgemm checks
// Token rows a GEMM check compares with the CPU: all of them, or 5 spread over T (real shapes).
std::vector<int64_t> checked_rows(int64_t T, bool all_rows) {
  if (!all_rows) return {0, 1, T / 2, T - 2, T - 1};
  std::vector<int64_t> ts;
  for (int64_t t = 0; t < T; ++t) ts.push_back(t);
  return ts;
}
// qgemm's split-K workspace for the largest of Ts that splits
DeviceBuffer qgemm_ws(CudaDevice& dev, const QWeightView& v, const std::vector<int64_t>& Ts) {
  int64_t wsf = 4;
  for (int64_t T : Ts) wsf = std::max(wsf, qgemm_workspace_floats(dev, v, T));
  return dev.alloc(static_cast<size_t>(wsf) * 4, "ws");
}

constexpr double kGemmNmse = 1e-4, kGemmAtolRms = 3e-2, kGemmRtol = 1e-2;

void check_qgemm_shape(CudaDevice& dev, int64_t rows, int64_t cols, int bits, const std::vector<int64_t>& Ts,
                       uint64_t seed, bool all_rows = true) {
  const HostQ hq = random_q(rows, cols, bits, seed);
  DevQ dq = upload_q(dev, hq);
  const int64_t TM = *std::max_element(Ts.begin(), Ts.end());
  const std::vector<float> x = random_vec(static_cast<size_t>(TM * cols), seed + 1, -2.0f, 2.0f);
  DeviceBuffer dx = to_device(dev, x, "x");
  DeviceBuffer dxq = dev.alloc(static_cast<size_t>(TM * cols) * 2, "xq");
  DeviceBuffer dy = dev.alloc(static_cast<size_t>(TM * rows) * 4, "y");
  DeviceBuffer ws = qgemm_ws(dev, dq.view, Ts);
  char tag[96];
  std::snprintf(tag, sizeof(tag), "qgemm q%d[%lldx%lld]", bits, static_cast<long long>(rows), static_cast<long long>(cols));
  std::vector<float> y_big;  // result of the largest T, for the T-invariance check
  for (int64_t T : Ts) {
    const std::vector<int64_t> ts = checked_rows(T, all_rows);
    const auto ref = ref_linear_rows(hq.view(), x, ts);
    for (int split : {1, 0}) {  // 0: default (split-K where it would pay)
      poison(dev, dy);
      dev.fill_bytes(dxq.get(), 0xFF, dxq.bytes());
      qgemm_prepare_x(dev, dx.as<float>(), T, cols, cols, dxq.as<uint16_t>());
      QGemmConfig cfg;
      cfg.split_k = split;
      qgemm(dev, dq.view, dxq.as<uint16_t>(), T, dy.as<float>(), rows, ws.as<float>(), cfg);
      const auto got_all = from_device<float>(dev, dy, static_cast<size_t>(T * rows));
      std::vector<float> got(ref.size());
      for (size_t i = 0; i < ts.size(); ++i) std::memcpy(&got[i * rows], &got_all[ts[i] * rows], rows * 4);
      const QGemmConfig used = split == 1 ? QGemmConfig{0, 1} : qgemm_default_config(dev, dq.view, T, true);
      record(std::string(tag) + " T=" + std::to_string(T) + " split_k=" + std::to_string(used.split_k) +
                 (all_rows ? "" : " (5 rows)") + " vs ops::linear",
             compare(got.data(), ref.data(), got.size(), kGemmAtolRms, kGemmRtol), kGemmNmse);
      // no write past row T (the next row of y stays poisoned)
      if (split == 1 && T < TM) {
        const auto after = from_device<float>(dev, dy, static_cast<size_t>((T + 1) * rows));
        bool untouched = true;
        for (int64_t r = 0; r < rows; ++r) untouched &= !std::isfinite(after[T * rows + r]);
        record_bool(std::string(tag) + " T=" + std::to_string(T) + " writes no row >= T", untouched, "row T still NaN");
      }
      if (split == 1) {
        // the other scale path (cp.async ring) computes the same products: bitwise equal
        QGemmConfig c2;
        c2.split_k = 1;
        c2.scale_prefetch = 1;
        poison(dev, dy);
        qgemm(dev, dq.view, dxq.as<uint16_t>(), T, dy.as<float>(), rows, ws.as<float>(), c2);
        const auto got2 = from_device<float>(dev, dy, static_cast<size_t>(T * rows));
        int64_t bad2 = 0;
        for (int64_t i = 0; i < T * rows; ++i) bad2 += std::memcmp(&got2[i], &got_all[i], 4) != 0;
        record_bool(std::string(tag) + " T=" + std::to_string(T) + " scale_prefetch=1 bitwise equal", bad2 == 0,
                    std::to_string(bad2) + " mismatches");
        if (T == TM) y_big = got_all;
        else if (!y_big.empty()) {
          int64_t bad = 0;
          for (int64_t i = 0; i < T * rows; ++i) bad += std::memcmp(&got_all[i], &y_big[i], 4) != 0;
          record_bool(std::string(tag) + " T=" + std::to_string(T) + " rows bitwise equal to T=" + std::to_string(TM),
                      bad == 0, std::to_string(bad) + " mismatches");
        }
      }
    }
  }
}

void check_qgemm(CudaDevice& dev, bool quick) {
  uint64_t seed = 1000;
  // kernel-breaking: T around the 32/64/128 tiles, rows not multiples of 128, cols not of the 64-k tile pipeline depth
  check_qgemm_shape(dev, 257, 1088, 4, {513, 10, 17, 63, 64, 65, 511, 512}, ++seed);
  check_qgemm_shape(dev, 1, 64, 4, {65, 10}, ++seed);
  check_qgemm_shape(dev, 7, 192, 4, {17, 10}, ++seed);
  check_qgemm_shape(dev, 130, 320, 8, {513, 17, 64}, ++seed);
  check_qgemm_shape(dev, 33, 4160, 8, {65, 10}, ++seed);
  check_qgemm_shape(dev, 384, 5120, 4, {130, 33}, ++seed);  // split-K path (few blocks, long K)
  if (quick) return;
  // real shapes at T = 512 (5 token rows checked against the CPU, all rows against T-invariance)
  check_qgemm_shape(dev, 17408, 5120, 4, {512, 65}, ++seed, false);  // 27B gate/up
  check_qgemm_shape(dev, 5120, 17408, 4, {512, 10}, ++seed, false);  // 27B down (split-K)
  check_qgemm_shape(dev, 10240, 5120, 4, {512}, ++seed, false);      // 27B in_proj_qkv
  check_qgemm_shape(dev, 5120, 6144, 8, {512}, ++seed, false);       // 27B out_proj, 8-bit
  check_qgemm_shape(dev, 8192, 2048, 4, {512}, ++seed, false);       // 35B q_proj / in_proj_qkv
}

// ---------------------------------------------------------------- cuBLASLt path (gemm_blas.h)
// bf16 of an exact value v with round-to-nearest-even (the hardware fma's single rounding)
uint16_t bf16_rne(double v) {
  if (v == 0) return std::signbit(v) ? 0x8000 : 0;
  int e = 0;
  const double f = std::frexp(v, &e);  // v = f * 2^e, |f| in [0.5, 1)
  const float r = static_cast<float>(std::ldexp(std::nearbyint(std::ldexp(f, 8)), e - 8));
  uint32_t u;
  std::memcpy(&u, &r, 4);
  return static_cast<uint16_t>(u >> 16);
}
float bf16_f32(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// The dequantised matrix qgemm_dequant must produce: [rows, cols] bf16 in the prepared-X order.
std::vector<uint16_t> ref_dequant(const HostQ& q) {
  std::vector<uint16_t> w(static_cast<size_t>(q.rows * q.cols));
  const int64_t ng = q.cols / 64, per_word = 32 / q.bits;
  for (int64_t r = 0; r < q.rows; ++r)
    for (int64_t k = 0; k < q.cols; ++k) {
      const int pos = static_cast<int>(k & 7);
      const int64_t src = (k & ~int64_t{7}) + (pos >> 1) + ((pos & 1) << 2);
      const int64_t idx = r * q.cols + src;
      const uint32_t word = q.codes[static_cast<size_t>(idx / per_word)];
      const uint32_t code = (word >> (q.bits * (idx % per_word))) & ((1u << q.bits) - 1);
      const float s = bf16_f32(q.scales[static_cast<size_t>(r * ng + src / 64)]);
      const float b = bf16_f32(q.biases[static_cast<size_t>(r * ng + src / 64)]);
      w[static_cast<size_t>(r * q.cols + k)] =
          q.bits == 4 ? bf16_rne(static_cast<double>(code) * s + b) : bf16_rne(std::fmaf(static_cast<float>(code), s, b));
    }
  return w;
}

// Records whether n floats of a and b are bitwise equal.
bool record_bitwise(const std::string& name, const float* a, const float* b, size_t n) {
  const bool same = std::memcmp(a, b, n * 4) == 0;
  return record_bool(name, same, same ? "bitwise equal" : "differ");
}

// A prompt GEMM's output rows against ops::linear (rows ts of the [T + 1, rows] result, qgemm's
// bounds) and the poisoned row T untouched; records both under `name`.
void check_gemm_rows(const std::string& name, const std::vector<float>& got_all, const std::vector<float>& ref,
                     const std::vector<int64_t>& ts, int64_t rows, int64_t T) {
  std::vector<float> got(ref.size());
  for (size_t i = 0; i < ts.size(); ++i) std::memcpy(&got[i * rows], &got_all[ts[i] * rows], rows * 4);
  record(name + " vs ops::linear", compare(got.data(), ref.data(), got.size(), kGemmAtolRms, kGemmRtol), kGemmNmse);
  bool untouched = true;
  for (int64_t r = 0; r < rows; ++r) untouched &= !std::isfinite(got_all[T * rows + r]);
  record_bool(name + " writes no row >= T", untouched, "row T still NaN");
}

void check_blas_shape(CudaDevice& dev, BlasGemm& blas, int64_t rows, int64_t cols, int bits, const std::vector<int64_t>& Ts,
                      uint64_t seed, bool all_rows = true) {
  const HostQ hq = random_q(rows, cols, bits, seed);
  DevQ dq = upload_q(dev, hq);
  char tag[96];
  std::snprintf(tag, sizeof(tag), "blas q%d[%lldx%lld]", bits, static_cast<long long>(rows), static_cast<long long>(cols));
  // dequantisation: bitwise the reference values (MLX layout; tiled 4-bit too)
  DeviceBuffer dw = dev.alloc(static_cast<size_t>(rows * cols) * 2, "dequantised W");
  const std::vector<uint16_t> want = ref_dequant(hq);
  auto check_dequant = [&](const QWeightView& v, const char* layout) {
    poison(dev, dw);
    qgemm_dequant(dev, v, dw.as<uint16_t>());
    const auto got = from_device<uint16_t>(dev, dw, want.size());
    int64_t bad = 0;
    for (size_t i = 0; i < want.size(); ++i) bad += got[i] != want[i];
    record_bool(std::string(tag) + " dequant (" + layout + ") bitwise the reference bf16", bad == 0,
                std::to_string(bad) + " mismatches of " + std::to_string(want.size()));
  };
  check_dequant(dq.view, "MLX");
  DeviceBuffer tc, ts;  // the tiled copy (4-bit)
  QWeightView tv{};
  if (bits == 4) {
    const QTiledBytes tb = qmatvec_tiled_bytes(rows, cols);
    tc = dev.alloc(tb.codes, "tiled codes"), ts = dev.alloc(tb.sb, "tiled sb");
    const size_t staging_bytes = std::max<size_t>(qmatvec_tile_staging_min(cols), size_t{8} << 20);
    DeviceBuffer staging = dev.alloc(staging_bytes, "tile staging");
    qmatvec_tile_upload(dev, hq.codes.data(), hq.scales.data(), hq.biases.data(), rows, cols, tc.get(), ts.get(),
                        staging.get(), staging_bytes);
    tv = QWeightView{tc.as<uint32_t>(), ts.as<uint16_t>(), nullptr, rows, cols, 4};
    tv.tiled = true;
    check_dequant(tv, "tiled");
  }
  // the GEMM: vs ops::linear (qgemm's bounds) and vs qgemm (the same bf16 operands: only the order of
  // the fp32 sums differs)
  const int64_t TM = *std::max_element(Ts.begin(), Ts.end());
  const std::vector<float> x = random_vec(static_cast<size_t>(TM * cols), seed + 1, -2.0f, 2.0f);
  DeviceBuffer dx = to_device(dev, x, "x");
  DeviceBuffer dxq = dev.alloc(static_cast<size_t>(TM * cols) * 2, "xq");
  DeviceBuffer dy = dev.alloc(static_cast<size_t>((TM + 1) * rows) * 4, "y");
  DeviceBuffer dyq = dev.alloc(static_cast<size_t>(TM * rows) * 4, "y qgemm");
  DeviceBuffer ws = qgemm_ws(dev, dq.view, Ts);
  for (int64_t T : Ts) {
    const std::vector<int64_t> ts = checked_rows(T, all_rows);
    const auto ref = ref_linear_rows(hq.view(), x, ts);
    poison(dev, dy);
    qgemm_prepare_x(dev, dx.as<float>(), T, cols, cols, dxq.as<uint16_t>());
    blas.run(dq.view, dxq.as<uint16_t>(), T, dy.as<float>(), rows);
    const auto got_all = from_device<float>(dev, dy, static_cast<size_t>((T + 1) * rows));
    const std::string name = std::string(tag) + " T=" + std::to_string(T) + (all_rows ? "" : " (5 rows)");
    check_gemm_rows(name, got_all, ref, ts, rows, T);
    qgemm(dev, dq.view, dxq.as<uint16_t>(), T, dyq.as<float>(), rows, ws.as<float>());
    const auto yq = from_device<float>(dev, dyq, static_cast<size_t>(T * rows));
    // fp32 sums of the same products in another order (and qgemm's split-K): ~1e-10 NMSE at K = 17408;
    // a wrong column order or dequantised value would be ~1
    record(name + " vs qgemm (same bf16 operands)", compare(got_all.data(), yq.data(), yq.size(), 1e-3, 1e-3), 1e-8);
    if (bits == 4) {  // the tiled layout: bitwise the MLX run (the same bf16 operands and plan)
      poison(dev, dy);
      blas.run(tv, dxq.as<uint16_t>(), T, dy.as<float>(), rows);
      const auto got_t = from_device<float>(dev, dy, static_cast<size_t>(T * rows));
      record_bitwise(name + " tiled weights == MLX weights (bitwise)", got_t.data(), got_all.data(), got_t.size());
    }
  }
}

// qgemm_prepare_x_swiglu against k::swiglu's rounding then qgemm_prepare_x: bitwise, over gate values
// where silu saturates both ways and the product overflows to inf, and the rows past T untouched.
void check_prepare_swiglu(CudaDevice& dev) {
  for (const auto& [T, K] : std::vector<std::pair<int64_t, int64_t>>{{1, 64}, {37, 1088}, {512, 17408}}) {
    std::vector<float> g = random_vec(static_cast<size_t>(T * K), 91 + T, -12.0f, 12.0f);
    const std::vector<float> u = random_vec(static_cast<size_t>(T * K), 92 + T, -3.0f, 3.0f);
    g[0] = -100.0f;
    if (g.size() > 2) g[1] = 100.0f, g[2] = 3.0e38f;
    DeviceBuffer dg = to_device(dev, g, "g"), du = to_device(dev, u, "u");
    DeviceBuffer xq = dev.alloc(static_cast<size_t>((T + 1) * K) * 2, "xq fused");
    DeviceBuffer want = dev.alloc(static_cast<size_t>(T * K) * 2, "xq two launches");
    poison(dev, xq);
    qgemm_prepare_x_swiglu(dev, dg.as<float>(), du.as<float>(), T, K, xq.as<uint16_t>());
    k::swiglu(dev.stream(), dg.as<float>(), du.as<float>(), T * K);  // g <- silu(g) * u (the engine's launch)
    qgemm_prepare_x(dev, dg.as<float>(), T, K, K, want.as<uint16_t>());
    const auto a = from_device<uint16_t>(dev, xq, static_cast<size_t>((T + 1) * K));
    const auto b = from_device<uint16_t>(dev, want, static_cast<size_t>(T * K));
    int64_t bad = 0, touched = 0;
    for (int64_t i = 0; i < T * K; ++i) bad += a[static_cast<size_t>(i)] != b[static_cast<size_t>(i)];
    for (int64_t i = T * K; i < (T + 1) * K; ++i) touched += a[static_cast<size_t>(i)] != 0xFFFFu;  // poisoned
    record_bool("prepare_x_swiglu [" + std::to_string(T) + "x" + std::to_string(K) + "] bitwise swiglu + prepare_x",
                bad == 0, std::to_string(bad) + " mismatches of " + std::to_string(T * K));
    record_bool("prepare_x_swiglu [" + std::to_string(T) + "x" + std::to_string(K) + "] writes no row >= T", touched == 0,
                std::to_string(touched) + " changed");
  }
}

void check_blas(CudaDevice& dev, bool quick) {
  BlasGemm blas(dev, int64_t{17408} * 5120);
  uint64_t seed = 7000;
  check_blas_shape(dev, blas, 257, 1088, 4, {513, 10, 17, 64, 512}, ++seed);
  check_blas_shape(dev, blas, 1, 64, 4, {65, 10}, ++seed);
  check_blas_shape(dev, blas, 7, 192, 4, {17}, ++seed);
  check_blas_shape(dev, blas, 130, 320, 8, {513, 17}, ++seed);
  check_blas_shape(dev, blas, 33, 4160, 8, {65}, ++seed);
  {  // a matrix larger than the scratch is an error, not an overrun
    BlasGemm small(dev, 64 * 64);
    const HostQ hq = random_q(128, 64, 4, 9);
    DevQ dq = upload_q(dev, hq);
    bool threw = false;
    try {
      small.run(dq.view, nullptr, 16, nullptr, 128);
    } catch (const std::exception&) {
      threw = true;
    }
    record_bool("blas: a matrix over the scratch size throws", threw, threw ? "threw" : "did not throw");
  }
  if (quick) return;
  check_blas_shape(dev, blas, 17408, 5120, 4, {512}, ++seed, false);  // 27B gate/up
  check_blas_shape(dev, blas, 5120, 17408, 4, {512}, ++seed, false);  // 27B down
  check_blas_shape(dev, blas, 5120, 6144, 8, {512}, ++seed, false);   // 8-bit
}

// ---------------------------------------------------------------- wgmma path (gemm_wgmma.h)
// One wgmma GEMM output (got_all: [T + 1, rows], row T poisoned before the run) against ops::linear
// (ref: rows ts) and the cuBLASLt path on the same operands (xq, W; db: scratch of T x rows floats),
// and `again`, a second run's first T rows, bitwise.
void check_wgemm_output(CudaDevice& dev, BlasGemm& blas, const std::string& name, const QWeightView& W,
                        const DeviceBuffer& xq, int64_t T, const std::vector<float>& got_all, const std::vector<float>& ref,
                        const std::vector<int64_t>& ts, DeviceBuffer& db, const std::vector<float>& again) {
  check_gemm_rows(name, got_all, ref, ts, W.rows, T);
  blas.run(W, xq.as<uint16_t>(), T, db.as<float>(), W.rows);
  const auto yb = from_device<float>(dev, db, static_cast<size_t>(T * W.rows));
  record(name + " vs cuBLASLt (same bf16 operands)", compare(got_all.data(), yb.data(), yb.size(), 1e-3, 1e-3), 1e-8);
  record_bitwise(name + " deterministic (two runs bitwise)", again.data(), got_all.data(), again.size());
}

// wgemm against ops::linear (qgemm's bounds), against the cuBLASLt path (the same bf16 operands:
// only the fp32 summation order differs, a wrong fragment layout or column order would be ~1),
// rows >= T untouched, two runs bitwise equal, and each row independent of T (the rows of the
// smallest T bitwise those of the largest).
void check_wgemm_shape(CudaDevice& dev, BlasGemm& blas, WgemmStreamK* sk, int64_t rows, int64_t cols,
                       const std::vector<int64_t>& Ts, uint64_t seed, bool all_rows = true) {
  const HostQ hq = random_q(rows, cols, 4, seed);
  DevQ dq = upload_q(dev, hq);
  char tag[96];
  std::snprintf(tag, sizeof(tag), "wgemm%s q4[%lldx%lld]", sk ? (std::string(" ") + wgemm_form_name(sk->form())).c_str() : "", static_cast<long long>(rows),
                static_cast<long long>(cols));
  const int64_t TM = *std::max_element(Ts.begin(), Ts.end());
  const std::vector<float> x = random_vec(static_cast<size_t>(TM * cols), seed + 1, -2.0f, 2.0f);
  DeviceBuffer dx = to_device(dev, x, "x");
  DeviceBuffer dxq = dev.alloc(static_cast<size_t>(TM * cols) * 2, "xq");
  DeviceBuffer dy = dev.alloc(static_cast<size_t>((TM + 1) * rows) * 4, "y");
  DeviceBuffer db = dev.alloc(static_cast<size_t>(TM * rows) * 4, "y blas");
  std::vector<float> y_big;
  int64_t t_big = 0;
  std::vector<std::pair<int64_t, std::vector<float>>> small;
  for (int64_t T : Ts) {
    const std::vector<int64_t> ts = checked_rows(T, all_rows);
    const auto ref = ref_linear_rows(hq.view(), x, ts);
    poison(dev, dy);
    qgemm_prepare_x(dev, dx.as<float>(), T, cols, cols, dxq.as<uint16_t>());
    wgemm(dev, dq.view, dxq.as<uint16_t>(), T, dy.as<float>(), rows, sk);
    const auto got_all = from_device<float>(dev, dy, static_cast<size_t>((T + 1) * rows));
    const std::string name = std::string(tag) + " T=" + std::to_string(T) + (all_rows ? "" : " (5 rows)");
    wgemm(dev, dq.view, dxq.as<uint16_t>(), T, dy.as<float>(), rows, sk);
    const auto again = from_device<float>(dev, dy, static_cast<size_t>(T * rows));
    check_wgemm_output(dev, blas, name, dq.view, dxq, T, got_all, ref, ts, db, again);
    std::vector<float> y(got_all.begin(), got_all.begin() + T * rows);
    if (T > t_big) y_big = y, t_big = T;
    small.emplace_back(T, std::move(y));
  }
  for (const auto& [T, y] : small) {
    if (T == t_big || sk) continue;  // stream-K moves its split with T
    record_bitwise(std::string(tag) + " T=" + std::to_string(T) + " rows bitwise those of T=" + std::to_string(t_big),
                   y.data(), y_big.data(), y.size());
  }
}

// v6f (wsd) computes v6d's (ws) products in v6d's order: bitwise equal outputs, also where it falls
// back to v6d (an odd number of groups a row).
void check_wsd_bitwise(CudaDevice& dev, WgemmStreamK& ws, WgemmStreamK& wsd, int64_t rows, int64_t cols, int64_t T,
                       uint64_t seed) {
  const HostQ hq = random_q(rows, cols, 4, seed);
  DevQ dq = upload_q(dev, hq);
  const std::vector<float> x = random_vec(static_cast<size_t>(T * cols), seed + 1, -2.0f, 2.0f);
  DeviceBuffer dx = to_device(dev, x, "x");
  DeviceBuffer dxq = dev.alloc(static_cast<size_t>(T * cols) * 2, "xq");
  DeviceBuffer da = dev.alloc(static_cast<size_t>(T * rows) * 4, "y ws"), db = dev.alloc(da.bytes(), "y wsd");
  qgemm_prepare_x(dev, dx.as<float>(), T, cols, cols, dxq.as<uint16_t>());
  poison(dev, da);
  poison(dev, db);
  wgemm(dev, dq.view, dxq.as<uint16_t>(), T, da.as<float>(), rows, &ws);
  wgemm(dev, dq.view, dxq.as<uint16_t>(), T, db.as<float>(), rows, &wsd);
  const auto a = from_device<float>(dev, da, static_cast<size_t>(T * rows));
  const auto b = from_device<float>(dev, db, static_cast<size_t>(T * rows));
  char name[96];
  std::snprintf(name, sizeof(name), "wgemm wsd q4[%lldx%lld] T=%lld bitwise ws%s", static_cast<long long>(rows),
                static_cast<long long>(cols), static_cast<long long>(T),
                wgemm_ws_dequant_fits(dq.view, T) ? "" : " (its fallback)");
  record_bitwise(name, b.data(), a.data(), a.size());
}

// wgemm_group: several matrices of the same cols in one launch (their row tiles one stream-K space):
// each matrix's rows against ops::linear and the cuBLASLt path, rows >= T untouched, two runs bitwise.
void check_wgemm_group(CudaDevice& dev, BlasGemm& blas, WgemmStreamK& sk, const std::vector<int64_t>& rows,
                       int64_t cols, const std::vector<int64_t>& Ts, uint64_t seed, bool all_rows = true) {
  const int n = static_cast<int>(rows.size());
  std::vector<HostQ> hq;
  std::vector<DevQ> dq;
  std::vector<DeviceBuffer> dy;
  std::string shape;
  const int64_t TM = *std::max_element(Ts.begin(), Ts.end());
  for (int i = 0; i < n; ++i) {
    hq.push_back(random_q(rows[static_cast<size_t>(i)], cols, 4, seed + 10 * i));
    dq.push_back(upload_q(dev, hq.back()));
    dy.push_back(dev.alloc(static_cast<size_t>((TM + 1) * rows[static_cast<size_t>(i)]) * 4, "y"));
    shape += (i ? "+" : "") + std::to_string(rows[static_cast<size_t>(i)]);
  }
  const std::string tag = std::string("wgemm_group ") + wgemm_form_name(sk.form()) + " q4[" + shape + "x" + std::to_string(cols) + "]";
  const std::vector<float> x = random_vec(static_cast<size_t>(TM * cols), seed + 1, -2.0f, 2.0f);
  DeviceBuffer dx = to_device(dev, x, "x");
  DeviceBuffer dxq = dev.alloc(static_cast<size_t>(TM * cols) * 2, "xq");
  DeviceBuffer db = dev.alloc(static_cast<size_t>(TM * *std::max_element(rows.begin(), rows.end())) * 4, "y blas");
  for (const WsGrid grid : {WsGrid::StreamK, WsGrid::WholeTiles})
  for (int64_t T : Ts) {
    const std::vector<int64_t> ts = checked_rows(T, all_rows);
    WgemmOut outs[kWgemmMaxGroup];
    for (int i = 0; i < n; ++i) {
      poison(dev, dy[static_cast<size_t>(i)]);
      outs[i] = WgemmOut{dq[static_cast<size_t>(i)].view, dy[static_cast<size_t>(i)].as<float>(), rows[static_cast<size_t>(i)]};
    }
    qgemm_prepare_x(dev, dx.as<float>(), T, cols, cols, dxq.as<uint16_t>());
    wgemm_group(dev, outs, n, dxq.as<uint16_t>(), T, sk, grid);
    std::vector<std::vector<float>> got(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i)
      got[static_cast<size_t>(i)] = from_device<float>(dev, dy[static_cast<size_t>(i)], static_cast<size_t>((T + 1) * rows[static_cast<size_t>(i)]));
    wgemm_group(dev, outs, n, dxq.as<uint16_t>(), T, sk, grid);
    for (int i = 0; i < n; ++i) {
      const size_t u = static_cast<size_t>(i);
      const int64_t r = rows[u];
      const std::string name = tag + (grid == WsGrid::WholeTiles ? " whole tiles" : "") + " T=" + std::to_string(T) +
                               " matrix " + std::to_string(i) + (all_rows ? "" : " (5 rows)");
      const auto again = from_device<float>(dev, dy[u], static_cast<size_t>(T * r));
      check_wgemm_output(dev, blas, name, dq[u].view, dxq, T, got[u], ref_linear_rows(hq[u].view(), x, ts), ts, db, again);
    }
  }
}

void check_wgemm(CudaDevice& dev, bool quick) {
  if (dev.props().major != 9) {
    std::printf("skip wgemm: sm_%d%d is not Hopper\n", dev.props().major, dev.props().minor);
    return;
  }
  BlasGemm blas(dev, int64_t{17408} * 5120);
  WgemmStreamK streamk(dev), wide(dev, WgemmForm::Wide), ws(dev, WgemmForm::WarpSpecialized),
      wst(dev, WgemmForm::WarpSpecializedTall), wsd(dev, WgemmForm::WarpSpecializedDequant);
  for (WgemmStreamK* sk : {static_cast<WgemmStreamK*>(nullptr), &streamk, &wide, &ws, &wst, &wsd}) {
    uint64_t seed = 7500;
    check_wgemm_shape(dev, blas, sk, 257, 1088, {513, 10, 17, 64, 129}, ++seed);  // row and token tails
    check_wgemm_shape(dev, blas, sk, 257, 1152, {513, 10, 129}, ++seed);          // the same, 18 groups (wsd's own)
    check_wgemm_shape(dev, blas, sk, 1, 64, {65, 10}, ++seed);                     // one row, one group
    check_wgemm_shape(dev, blas, sk, 7, 192, {17}, ++seed);
    check_wgemm_shape(dev, blas, sk, 48, 5120, {300, 12}, ++seed);  // the 27B GDN b/a rows
    if (quick) continue;
    check_wgemm_shape(dev, blas, sk, 17408, 5120, {512, 37}, ++seed, false);  // 27B gate/up
    check_wgemm_shape(dev, blas, sk, 5120, 17408, {512}, ++seed, false);      // 27B down
    check_wgemm_shape(dev, blas, sk, 1024, 5120, {2048}, ++seed, false);      // k/v, several token tiles
    check_wgemm_shape(dev, blas, sk, 5120, 6144, {300}, ++seed, false);       // out_proj, one partial token tile
  }
  for (WgemmStreamK* sk : {&ws, &wst, &wsd}) {  // several matrices a launch (the engine's grouped projections)
    uint64_t seed = 7700;
    check_wgemm_group(dev, blas, *sk, {257}, 1088, {513, 10}, ++seed);  // one matrix (wgemm's own path), both grids
    check_wgemm_group(dev, blas, *sk, {257, 1, 7, 130}, 1088, {513, 10}, ++seed);  // 4 matrices, a tail in each
    check_wgemm_group(dev, blas, *sk, {300, 48}, 192, {129}, ++seed);
    check_wgemm_group(dev, blas, *sk, {257, 64}, 1152, {300}, ++seed);  // an even group count (wsd's own path)
    if (quick) continue;
    check_wgemm_group(dev, blas, *sk, {10240, 6144, 48, 48}, 5120, {512}, ++seed, false);  // 27B GDN in_proj
    check_wgemm_group(dev, blas, *sk, {512, 512}, 2048, {512, 37}, ++seed, false);         // 35B-A3B shared gate/up
  }
  {  // a group of mixed cols or of too many matrices is an error naming it
    const HostQ ha = random_q(64, 128, 4, 11), hb = random_q(64, 192, 4, 12);
    DevQ da = upload_q(dev, ha), dbq = upload_q(dev, hb);
    DeviceBuffer y = dev.alloc(64 * 16 * 4, "y"), xq = dev.alloc(192 * 16 * 2, "xq");
    auto throws = [&](const WgemmOut* o, int n) {
      try {
        wgemm_group(dev, o, n, xq.as<uint16_t>(), 16, ws);
      } catch (const std::exception&) {
        return true;
      }
      return false;
    };
    const WgemmOut mixed[2] = {{da.view, y.as<float>(), 64}, {dbq.view, y.as<float>(), 64}};
    const WgemmOut five[5] = {mixed[0], mixed[0], mixed[0], mixed[0], mixed[0]};
    record_bool("wgemm_group: mixed cols throw", throws(mixed, 2), "no error");
    record_bool("wgemm_group: 5 matrices throw", throws(five, 5), "no error");
  }
  uint64_t seed = 7600;
  for (const auto& [r, c, t] : std::vector<std::array<int64_t, 3>>{
           {257, 1152, 513}, {1, 128, 10}, {33, 64 * 36, 300}, {257, 1088, 129}, {17408, 5120, 512}, {5120, 17408, 37}})
    if (!quick || r * c < 10'000'000) check_wsd_bitwise(dev, ws, wsd, r, c, t, ++seed);
  {  // refusals: 8-bit and tiled weights are an error naming them, not a wrong result
    const HostQ h8 = random_q(64, 128, 8, 9);
    DevQ d8 = upload_q(dev, h8);
    bool threw = false;
    try {
      wgemm(dev, d8.view, nullptr, 16, nullptr, 64);
    } catch (const std::exception&) {
      threw = true;
    }
    record_bool("wgemm: 8-bit weights throw", threw, threw ? "threw" : "did not throw");
  }
}

// moe_stream (gemm_moe.h) on check_moe's routing: vs ops::linear (same refs), vs qgemm_grouped (same
// bf16 operands: only the fp32 summation order differs), and the fused gate/up form against
// silu(X G^T) * (X U^T) from ops::linear with a second random matrix U. Outputs poisoned first.
void check_moe_stream(CudaDevice& dev, const HostQ& hq, DevQ& dq, int64_t E, int64_t Ne, int64_t K,
                      const std::vector<float>& x, const std::vector<int32_t>& off, const std::vector<int32_t>& row_token,
                      const std::vector<int64_t>& experts, const std::vector<std::vector<float>>& refs,
                      const std::vector<float>& y_grouped, DeviceBuffer& dxq, DeviceBuffer& doff, int64_t P, uint64_t seed,
                      const char* tag) {
  DeviceBuffer dy = dev.alloc(P * Ne * 4, "y stream");
  poison(dev, dy);
  moe_stream(dev, dq.view, E, Ne, dxq.as<uint16_t>(), doff.as<int32_t>(), P, dy.as<float>(), Ne);
  const auto ys = from_device<float>(dev, dy, P * Ne);
  // the rows of the checked experts in y against their ops::linear references
  auto vs_linear = [&](const std::string& name, const std::vector<float>& y) {
    std::vector<float> got, ref;
    for (size_t i = 0; i < experts.size(); ++i) {
      const int64_t e = experts[i];
      if (off[e + 1] == off[e]) continue;
      got.insert(got.end(), y.begin() + off[e] * Ne, y.begin() + off[e + 1] * Ne);
      ref.insert(ref.end(), refs[i].begin(), refs[i].end());
    }
    record(std::string(tag) + " " + name + " vs ops::linear",
           compare(got.data(), ref.data(), got.size(), kGemmAtolRms, kGemmRtol), kGemmNmse);
  };
  vs_linear("moe_stream", ys);
  // every row (all experts) against qgemm_grouped: fp32 reassociation only
  record(std::string(tag) + " moe_stream vs qgemm_grouped (all rows)",
         compare(ys.data(), y_grouped.data(), ys.size(), 1e-5, 1e-5), 1e-10);
  // fused gate/up: G = this matrix, U = another random one. (1) the fusion itself: against silu(y_G)
  // * y_U from two moe_stream launches (same products; only silu's expf, device vs host, differs);
  // (2) against ops::linear: a product of two GEMM outputs, so the element-wise bound is twice the
  // GEMM's (the relative errors of the factors add)
  const HostQ hu = random_q(E * Ne, K, hq.bits, seed + 17);
  DevQ du = upload_q(dev, hu);
  poison(dev, dy);
  moe_stream(dev, du.view, E, Ne, dxq.as<uint16_t>(), doff.as<int32_t>(), P, dy.as<float>(), Ne);
  const auto yu = from_device<float>(dev, dy, P * Ne);
  poison(dev, dy);
  moe_stream_gate_up(dev, dq.view, du.view, E, Ne, dxq.as<uint16_t>(), doff.as<int32_t>(), P, dy.as<float>(), Ne);
  const auto yp = from_device<float>(dev, dy, P * Ne);
  {  // the shared-memory ring variant: only the loads differ, so bitwise the register variant
    poison(dev, dy);
    moe_stream(dev, dq.view, E, Ne, dxq.as<uint16_t>(), doff.as<int32_t>(), P, dy.as<float>(), Ne, MoeStreamLoads::Ring);
    const auto r1 = from_device<float>(dev, dy, P * Ne);
    poison(dev, dy);
    moe_stream_gate_up(dev, dq.view, du.view, E, Ne, dxq.as<uint16_t>(), doff.as<int32_t>(), P, dy.as<float>(), Ne,
                       MoeStreamLoads::Ring);
    const auto r2 = from_device<float>(dev, dy, P * Ne);
    const bool same = std::memcmp(r1.data(), ys.data(), ys.size() * 4) == 0 &&
                      std::memcmp(r2.data(), yp.data(), yp.size() * 4) == 0;
    record_bool(std::string(tag) + " moe_stream ring loads == register loads (bitwise, single and gate/up)", same,
                same ? "bitwise equal" : "differ");
  }
  {  // the tight variant (128 registers, the engine's default): only the loads differ, so bitwise too
    poison(dev, dy);
    moe_stream(dev, dq.view, E, Ne, dxq.as<uint16_t>(), doff.as<int32_t>(), P, dy.as<float>(), Ne, MoeStreamLoads::Tight);
    const auto r1 = from_device<float>(dev, dy, P * Ne);
    poison(dev, dy);
    moe_stream_gate_up(dev, dq.view, du.view, E, Ne, dxq.as<uint16_t>(), doff.as<int32_t>(), P, dy.as<float>(), Ne,
                       MoeStreamLoads::Tight);
    const auto r2 = from_device<float>(dev, dy, P * Ne);
    const bool same = std::memcmp(r1.data(), ys.data(), ys.size() * 4) == 0 &&
                      std::memcmp(r2.data(), yp.data(), yp.size() * 4) == 0;
    record_bool(std::string(tag) + " moe_stream tight == register loads (bitwise, single and gate/up)", same,
                same ? "bitwise equal" : "differ");
  }
  if (wgemm_moe_supported(dev, dq.view, Ne)) {  // the wgmma experts: the same bf16 operands as moe_stream
    poison(dev, dy);
    wgemm_moe(dev, dq.view, E, Ne, dxq.as<uint16_t>(), doff.as<int32_t>(), P, dy.as<float>(), Ne);
    const auto yw = from_device<float>(dev, dy, P * Ne);
    record(std::string(tag) + " wgemm_moe vs moe_stream (all rows, same bf16 operands)",
           compare(yw.data(), ys.data(), ys.size(), 1e-3, 1e-3), 1e-8);
    vs_linear("wgemm_moe", yw);
    poison(dev, dy);
    wgemm_moe_gate_up(dev, dq.view, du.view, E, Ne, dxq.as<uint16_t>(), doff.as<int32_t>(), P, dy.as<float>(), Ne);
    const auto ywp = from_device<float>(dev, dy, P * Ne);
    record(std::string(tag) + " wgemm_moe_gate_up vs moe_stream_gate_up (all rows, same operands)",
           compare(ywp.data(), yp.data(), yp.size(), 2e-3, 2e-3), 1e-8);
    poison(dev, dy);
    wgemm_moe(dev, dq.view, E, Ne, dxq.as<uint16_t>(), doff.as<int32_t>(), P, dy.as<float>(), Ne);
    const auto again = from_device<float>(dev, dy, P * Ne);
    record_bitwise(std::string(tag) + " wgemm_moe deterministic (two runs bitwise)", again.data(), yw.data(), yw.size());
  }
  std::vector<float> fused_ref(yp.size());
  for (size_t i = 0; i < yp.size(); ++i) fused_ref[i] = ys[i] / (1.0f + std::exp(-ys[i])) * yu[i];
  record(std::string(tag) + " moe_stream_gate_up vs silu(moe_stream G) * moe_stream U",
         compare(yp.data(), fused_ref.data(), yp.size(), 1e-6, 1e-5), 1e-10);
  std::vector<std::vector<float>> pref(experts.size()), pgot(experts.size());
  pfor(static_cast<int64_t>(experts.size()), [&](int64_t i) {
    const int64_t e = experts[i];
    const int64_t n = off[e + 1] - off[e];
    if (n == 0) return;
    std::vector<float> xs(static_cast<size_t>(n * K)), u(static_cast<size_t>(n * Ne));
    for (int64_t j = 0; j < n; ++j) std::memcpy(&xs[j * K], &x[row_token[off[e] + j] * K], K * 4);
    ops::linear(hu.view().row_slice(e * Ne, Ne), xs.data(), n, u.data());
    pref[i].resize(u.size());
    for (size_t k = 0; k < u.size(); ++k) {
      const float gv = refs[i][k];
      pref[i][k] = gv / (1.0f + std::exp(-gv)) * u[k];
    }
    pgot[i].assign(yp.begin() + off[e] * Ne, yp.begin() + off[e + 1] * Ne);
  });
  std::vector<float> got, ref;
  for (size_t i = 0; i < experts.size(); ++i) {
    got.insert(got.end(), pgot[i].begin(), pgot[i].end());
    ref.insert(ref.end(), pref[i].begin(), pref[i].end());
  }
  record(std::string(tag) + " moe_stream_gate_up (fused SwiGLU) vs ops::linear",
         compare(got.data(), ref.data(), got.size(), 2 * kGemmAtolRms, 2 * kGemmRtol), kGemmNmse);
}

// grouped MoE: random top-k routing, sort, gather-prepare, grouped qgemm, combine; vs per-pair ops::linear
void check_moe(CudaDevice& dev, int64_t E, int64_t Ne, int64_t K, int64_t T, int64_t topk, int bits, uint64_t seed,
               int64_t check_every_expert) {
  const HostQ hq = random_q(E * Ne, K, bits, seed);
  DevQ dq = upload_q(dev, hq);
  const auto x = random_vec(static_cast<size_t>(T * K), seed + 1, -2.0f, 2.0f);
  std::vector<int32_t> ids(static_cast<size_t>(T * topk));
  Rng r(seed + 2);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < topk; ++j) {
      int32_t e;
      bool dup;
      do {  // distinct experts per token, skewed a little towards low ids
        e = static_cast<int32_t>((r.next() % E) * (r.next() % 4 == 0 ? 1 : 1) % E);
        if (r.next() % 8 == 0) e = static_cast<int32_t>(r.next() % std::min<int64_t>(E, 4));
        dup = false;
        for (int64_t i = 0; i < j; ++i) dup |= ids[t * topk + i] == e;
      } while (dup);
      ids[t * topk + j] = e;
    }
  const auto wts = random_vec(static_cast<size_t>(T * topk), seed + 3, 0.0f, 0.5f);
  const int64_t P = T * topk;
  DeviceBuffer dids = to_device(dev, ids, "ids"), dx = to_device(dev, x, "x"), dw = to_device(dev, wts, "w");
  DeviceBuffer doff = dev.alloc((E + 1) * 4, "offsets"), drow = dev.alloc(P * 4, "row_token"),
               dpair = dev.alloc(P * 4, "pair_row");
  DeviceBuffer dxq = dev.alloc(P * K * 2, "xq"), dy = dev.alloc(P * Ne * 4, "y"), dout = dev.alloc(T * Ne * 4, "out");
  poison(dev, doff);
  poison(dev, dy);
  poison(dev, dout);
  moe_sort_pairs(dev, dids.as<int32_t>(), T, topk, E, doff.as<int32_t>(), drow.as<int32_t>(), dpair.as<int32_t>());
  qgemm_prepare_x_gather(dev, dx.as<float>(), drow.as<int32_t>(), P, K, K, dxq.as<uint16_t>());
  qgemm_grouped(dev, dq.view, E, Ne, dxq.as<uint16_t>(), doff.as<int32_t>(), P, dy.as<float>(), Ne);
  moe_combine(dev, dy.as<float>(), Ne, dpair.as<int32_t>(), dw.as<float>(), T, topk, Ne, dout.as<float>(), false);
  const auto off = from_device<int32_t>(dev, doff, E + 1);
  const auto row_token = from_device<int32_t>(dev, drow, P);
  const auto pair_row = from_device<int32_t>(dev, dpair, P);
  const auto y = from_device<float>(dev, dy, P * Ne);
  const auto out = from_device<float>(dev, dout, T * Ne);
  char tag[128];
  std::snprintf(tag, sizeof(tag), "moe q%d E=%lld Ne=%lld K=%lld T=%lld top%lld", bits, (long long)E, (long long)Ne,
                (long long)K, (long long)T, (long long)topk);
  // sort: offsets monotone, each pair placed in its expert's range, stable
  bool sort_ok = off[0] == 0 && off[E] == P;
  for (int64_t e = 0; e < E && sort_ok; ++e) sort_ok &= off[e] <= off[e + 1];
  std::vector<int32_t> last(static_cast<size_t>(E), -1);
  for (int64_t p = 0; p < P && sort_ok; ++p) {
    const int32_t rr = pair_row[p], e = ids[p];
    sort_ok &= rr >= off[e] && rr < off[e + 1] && row_token[rr] == p / topk && rr > last[e];
    last[e] = rr;
  }
  record_bool(std::string(tag) + " moe_sort_pairs", sort_ok, "offsets, placement, stability");
  // grouped gemm vs ops::linear on each pair (experts e % check_every_expert == 0)
  std::vector<float> got, ref;
  std::vector<int64_t> experts;
  for (int64_t e = 0; e < E; e += check_every_expert) experts.push_back(e);
  std::vector<std::vector<float>> refs(experts.size()), gots(experts.size());
  pfor(static_cast<int64_t>(experts.size()), [&](int64_t i) {
    const int64_t e = experts[i];
    const int64_t n = off[e + 1] - off[e];
    if (n == 0) return;
    std::vector<float> xs(static_cast<size_t>(n * K));
    for (int64_t j = 0; j < n; ++j) std::memcpy(&xs[j * K], &x[row_token[off[e] + j] * K], K * 4);
    refs[i].resize(static_cast<size_t>(n * Ne));
    ops::linear(hq.view().row_slice(e * Ne, Ne), xs.data(), n, refs[i].data());
    gots[i].assign(y.begin() + off[e] * Ne, y.begin() + off[e + 1] * Ne);
  });
  for (size_t i = 0; i < experts.size(); ++i) {
    got.insert(got.end(), gots[i].begin(), gots[i].end());
    ref.insert(ref.end(), refs[i].begin(), refs[i].end());
  }
  record(std::string(tag) + " qgemm_grouped vs ops::linear", compare(got.data(), ref.data(), got.size(), kGemmAtolRms, kGemmRtol),
         kGemmNmse);
  if (moe_stream_supported(dq.view, Ne)) check_moe_stream(dev, hq, dq, E, Ne, K, x, off, row_token, experts, refs, y, dxq,
                                                             doff, P, seed, tag);
  // combine vs host sum over the device y
  std::vector<float> cref(static_cast<size_t>(T * Ne));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < Ne; ++n) {
      float s = 0.0f;
      for (int64_t j = 0; j < topk; ++j) s = std::fma(wts[t * topk + j], y[pair_row[t * topk + j] * Ne + n], s);
      cref[t * Ne + n] = s;
    }
  record(std::string(tag) + " moe_combine", compare(out.data(), cref.data(), cref.size(), 1e-6, 1e-6), 1e-12);
}

// ---------------------------------------------------------------- gdn prefill
// gdn_prefill (recurrent) and gdn_prefill_chunked (WY/UT chunks of 64) on the same random inputs, each
// on its own copies with NaN-poisoned outputs (and, for the chunked one, poisoned scratch), against
// ops::gdn_step token by token. The chunked form reassociates the sums and uses e^(Γ_r - Γ_s), so it
// gets looser bounds than the recurrent kernel (NMSE 1e-9 instead of 1e-10).
void check_gdn_prefill(CudaDevice& dev, bool quick) {
  // g in [g_lo, g_hi] (log decay), beta in [b_lo, b_hi]
  struct Case { int64_t Hk, Hv, T; float g_lo = -3.0f, g_hi = -0.01f, b_lo = 0.05f, b_hi = 0.95f; };
  std::vector<Case> cases = {{2, 4, 1}, {2, 2, 17}, {1, 3, 33}, {2, 4, 100}, {16, 32, 64}};
  if (!quick) {
    cases.push_back({16, 48, 512});
    cases.push_back({16, 32, 513});
  }
  // chunk boundaries of the chunked kernel (C = 64): one short chunk, exactly one, one + 1 token,
  // exactly two, two + 2 tokens; slow decay with beta near 1 (the least damped (I + A) solves);
  // fast decay (e^Γ underflows to 0 inside a chunk)
  for (const Case& c : std::vector<Case>{{2, 4, 63}, {2, 4, 64}, {1, 2, 65}, {2, 6, 128}, {4, 8, 130},
                                         {2, 6, 130, -0.05f, 0.0f, 0.9f, 1.0f}, {2, 4, 200, -20.0f, -5.0f}})
    cases.push_back(c);
  const Case dflt{0, 0, 0};
  int ci = 0;
  for (const auto& c : cases) {
    const int64_t D = 128;
    auto S = random_vec(static_cast<size_t>(c.Hv * D * D), 2700 + ci, -0.5f, 0.5f);
    auto q = random_vec(static_cast<size_t>(c.T * c.Hk * D), 2710 + ci);
    auto k = random_vec(static_cast<size_t>(c.T * c.Hk * D), 2720 + ci);
    for (int64_t r = 0; r < c.T * c.Hk; ++r) {
      ops::l2_normalize(q.data() + r * D, D, 1e-6f);
      ops::l2_normalize(k.data() + r * D, D, 1e-6f);
      for (int64_t j = 0; j < D; ++j) q[r * D + j] *= 1.0f / std::sqrt(128.0f);
    }
    auto v = random_vec(static_cast<size_t>(c.T * c.Hv * D), 2730 + ci);
    auto g = random_vec(static_cast<size_t>(c.T * c.Hv), 2740 + ci, c.g_lo, c.g_hi);
    auto beta = random_vec(static_cast<size_t>(c.T * c.Hv), 2750 + ci, c.b_lo, c.b_hi);
    DeviceBuffer dq = to_device(dev, q, "q"), dk = to_device(dev, k, "k"), dv = to_device(dev, v, "v"),
                 dg = to_device(dev, g, "g"), db = to_device(dev, beta, "beta");
    // one form on a fresh copy of S with a NaN-poisoned o; o_guard / s_guard > 0: o and the form's
    // scratch get a poisoned tail that must survive (the inputs are read-only for every form)
    struct Run {
      std::vector<float> o, S;
      size_t guard_bad = 0;
    };
    auto run_form = [&](size_t o_guard, size_t scratch, size_t s_guard, auto&& launch) {
      DeviceBuffer fS = to_device(dev, S, "S"), fo = dev.alloc((v.size() + o_guard) * 4, "o"),
                   fscr = dev.alloc(std::max<size_t>(scratch + s_guard, 1) * 4, "gdn scratch");
      poison(dev, fo);
      poison(dev, fscr);
      launch(fS.as<float>(), fscr.as<float>(), fo.as<float>());
      const auto raw_o = from_device<uint32_t>(dev, fo, v.size() + o_guard);
      Run r;
      r.o.resize(v.size());
      std::memcpy(r.o.data(), raw_o.data(), v.size() * 4);
      r.S = from_device<float>(dev, fS, S.size());
      for (size_t i = v.size(); i < raw_o.size(); ++i) r.guard_bad += raw_o[i] != 0xFFFFFFFFu;
      if (s_guard > 0) {
        const auto raw_s = from_device<uint32_t>(dev, fscr, scratch + s_guard);
        for (size_t i = scratch; i < raw_s.size(); ++i) r.guard_bad += raw_s[i] != 0xFFFFFFFFu;
      }
      return r;
    };
    const float *fq = dq.as<float>(), *fk = dk.as<float>(), *fv = dv.as<float>(), *fg = dg.as<float>(), *fb = db.as<float>();
    const Run rec = run_form(0, 0, 0, [&](float* fS, float*, float* o) {
      gdn_prefill(dev, fS, fq, fk, fv, fg, fb, c.T, c.Hk, c.Hv, D, D, o);
    });
    // the lazy-decay form (S = c R) with 4 and 8 rows a warp
    Run lazy[2];
    for (int rw = 0; rw < 2; ++rw)
      lazy[rw] = run_form(0, 0, 0, [&](float* fS, float*, float* o) {
        gdn_prefill_lazy(dev, fS, fq, fk, fv, fg, fb, c.T, c.Hk, c.Hv, D, D, o, 4 << rw);
      });
    // 4 tokens an exchange (its Gram entries in the scratch)
    const Run c4 = run_form(4096, static_cast<size_t>(gdn_c4_scratch_floats(c.T, c.Hk)), 4096,
                            [&](float* fS, float* scr, float* o) {
                              gdn_prefill_c4(dev, fS, fq, fk, fv, fg, fb, c.T, c.Hk, c.Hv, D, D, scr, o);
                            });
    // c4's math with the products on the tensor cores (3xTF32), 1, 2 and 4 warps a 16 rows
    Run tc[3];
    for (int w = 0; w < 3; ++w)
      tc[w] = run_form(4096, static_cast<size_t>(gdn_c4_scratch_floats(c.T, c.Hk)), 4096,
                       [&](float* fS, float* scr, float* o) {
                         gdn_prefill_tc(dev, fS, fq, fk, fv, fg, fb, c.T, c.Hk, c.Hv, D, D, scr, o, 1 << w);
                       });
    // the chunked WY/UT form
    const Run chunked = run_form(static_cast<size_t>(64 * c.Hv * D), static_cast<size_t>(gdn_chunked_scratch_floats(c.T, c.Hv)),
                                 4096, [&](float* fS, float* scr, float* o) {
                                   gdn_prefill_chunked(dev, fS, fq, fk, fv, fg, fb, c.T, c.Hk, c.Hv, D, D, scr, o);
                                 });
    std::vector<float> ref_o(v.size());
    const int64_t rep = c.Hv / c.Hk;
    pfor(c.Hv, [&](int64_t h) {
      std::vector<float> ob(D);
      for (int64_t t = 0; t < c.T; ++t) {
        ops::gdn_step(S.data() + h * D * D, q.data() + (t * c.Hk + h / rep) * D, k.data() + (t * c.Hk + h / rep) * D,
                      v.data() + (t * c.Hv + h) * D, g[t * c.Hv + h], beta[t * c.Hv + h], D, D, ob.data());
        std::memcpy(&ref_o[(t * c.Hv + h) * D], ob.data(), D * 4);
      }
    });
    std::string shape = "[Hk=" + std::to_string(c.Hk) + ",Hv=" + std::to_string(c.Hv) + ",T=" + std::to_string(c.T);
    if (c.g_lo != dflt.g_lo || c.g_hi != dflt.g_hi || c.b_lo != dflt.b_lo || c.b_hi != dflt.b_hi) {
      char r[96];
      std::snprintf(r, sizeof(r), ",g=%g..%g,beta=%g..%g", c.g_lo, c.g_hi, c.b_lo, c.b_hi);
      shape += r;
    }
    shape += "]";
    // o and S against ops::gdn_step (the chunked form reassociates more: looser bounds), the guard
    // words where the form has them
    auto check = [&](const std::string& name, const Run& r, double el_abs, double el_rel, double nmse, bool guards) {
      const std::string tag = name + shape;
      record(tag + " o vs ops::gdn_step", compare(r.o.data(), ref_o.data(), ref_o.size(), el_abs, el_rel), nmse);
      record(tag + " S vs ops::gdn_step", compare(r.S.data(), S.data(), S.size(), el_abs, el_rel), nmse);
      if (guards)
        record_bool(tag + " writes stay inside o and the scratch", r.guard_bad == 0,
                    std::to_string(r.guard_bad) + " guard words past o / the scratch overwritten");
    };
    check("gdn_prefill", rec, 1e-5, 1e-4, 1e-10, false);
    check("gdn_prefill_c4", c4, 1e-5, 1e-4, 1e-10, true);
    for (int w = 0; w < 3; ++w) check("gdn_prefill_tc w" + std::to_string(1 << w), tc[w], 1e-5, 1e-4, 1e-10, true);
    for (int rw = 0; rw < 2; ++rw) check("gdn_prefill_lazy rw" + std::to_string(4 << rw), lazy[rw], 1e-5, 1e-4, 1e-10, false);
    check("gdn_prefill_chunked", chunked, 1e-4, 1e-3, 1e-9, true);
    ++ci;
  }
}

// ---------------------------------------------------------------- attention prefill
// tc: attention_prefill_tc (bf16 hi + lo operands on the tensor cores: ~2^-16 relative a product, so
// its bounds are NMSE 1e-9 and |d| <= 2e-4 rms + 1e-4 |ref| instead of the fp32 kernel's 1e-10 and
// 1e-5 rms: s22c measured NMSE <= 2.6e-11 and |d| up to 8.8e-5 rms at outputs near zero)
void check_attention_prefill(CudaDevice& dev, bool quick, bool tc = false) {
  struct Case { int64_t nh, nkv, T, pos0; KvType kv; };
  std::vector<Case> cases = {{8, 8, 17, 0, KvType::F32},  {24, 4, 10, 5, KvType::BF16}, {16, 2, 65, 0, KvType::F32},
                             {6, 2, 63, 31, KvType::BF16}, {8, 2, 64, 100, KvType::F32}};
  if (!quick) {
    cases.push_back({24, 4, 512, 0, KvType::BF16});
    cases.push_back({24, 4, 511, 0, KvType::F32});
    cases.push_back({16, 2, 513, 0, KvType::BF16});
    cases.push_back({16, 2, 512, 700, KvType::F32});
  }
  int ci = 0;
  for (const auto& c : cases) {
    const int64_t hd = 256, len = c.pos0 + c.T;
    const float scale = 1.0f / 16.0f;
    const auto q = random_vec(static_cast<size_t>(c.T * c.nh * hd), 3800 + ci);
    auto k = random_vec(static_cast<size_t>(len * c.nkv * hd), 3810 + ci, -2.0f, 2.0f);
    auto v = random_vec(static_cast<size_t>(len * c.nkv * hd), 3820 + ci);
    DeviceBuffer dk, dv;
    if (c.kv == KvType::BF16) {
      std::vector<uint16_t> kb(k.size()), vb(v.size());
      for (size_t i = 0; i < k.size(); ++i) {
        kb[i] = f32_to_bf16(k[i]);
        k[i] = bf16_to_f32(kb[i]);
        vb[i] = f32_to_bf16(v[i]);
        v[i] = bf16_to_f32(vb[i]);
      }
      dk = to_device(dev, kb, "k bf16");
      dv = to_device(dev, vb, "v bf16");
    } else {
      dk = to_device(dev, k, "k f32");
      dv = to_device(dev, v, "v f32");
    }
    DeviceBuffer dq = to_device(dev, q, "q");
    DeviceBuffer dout = dev.alloc(q.size() * 4, "out");
    poison(dev, dout);
    (tc ? attention_prefill_tc : attention_prefill)(dev, dq.as<float>(), dk.get(), dv.get(), c.kv, c.T, c.pos0, c.nh, c.nkv,
                                                    hd, scale, dout.as<float>());
    const auto got = from_device<float>(dev, dout, q.size());
    std::vector<float> ref(q.size());
    pfor(c.T, [&](int64_t t) {
      ops::attention(q.data() + t * c.nh * hd, k.data(), v.data(), c.pos0 + t + 1, c.nh, c.nkv, hd, scale,
                     ref.data() + t * c.nh * hd);
    });
    record(std::string(tc ? "attention_prefill_tc" : "attention_prefill") + "[nh=" + std::to_string(c.nh) +
               ",nkv=" + std::to_string(c.nkv) + ",T=" + std::to_string(c.T) + ",pos0=" + std::to_string(c.pos0) +
               (c.kv == KvType::BF16 ? ",bf16]" : ",f32]") + " vs ops::attention",
           compare(got.data(), ref.data(), ref.size(), tc ? 2e-4 : 1e-5, 1e-4), tc ? 1e-9 : 1e-10);
    if (tc) {  // a row's result does not depend on the launch: a second run is bitwise the first
      poison(dev, dout);
      attention_prefill_tc(dev, dq.as<float>(), dk.get(), dv.get(), c.kv, c.T, c.pos0, c.nh, c.nkv, hd, scale, dout.as<float>());
      const auto again = from_device<float>(dev, dout, q.size());
      record_bitwise("attention_prefill_tc[nh=" + std::to_string(c.nh) + ",T=" + std::to_string(c.T) + "] two runs bitwise",
                     again.data(), got.data(), got.size());
    }
    ++ci;
  }
}

// ---------------------------------------------------------------- benchmarks
struct Timing {
  double median_us = 0, min_us = 0, max_us = 0;
};
Timing time_launches(CudaDevice& dev, int warm, int reps, const std::function<void(int)>& launch) {
  for (int i = 0; i < warm; ++i) launch(i);
  std::vector<cudaEvent_t> ev(static_cast<size_t>(reps) + 1);
  for (auto& e : ev) MERE_CUDA_CHECK(cudaEventCreate(&e));
  for (int i = 0; i < reps; ++i) {
    MERE_CUDA_CHECK(cudaEventRecord(ev[i], dev.stream()));
    launch(warm + i);
  }
  MERE_CUDA_CHECK(cudaEventRecord(ev[reps], dev.stream()));
  dev.synchronize("bench");
  std::vector<double> us;
  for (int i = 0; i < reps; ++i) {
    float ms = 0;
    MERE_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
    us.push_back(ms * 1000.0);
  }
  for (auto& e : ev) cudaEventDestroy(e);
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us.front(), us.back()};
}

void add_bench(const std::string& name, double bytes, double flops, double pred_us, const Timing& t,
               const std::string& extra = "") {
  const double gbs = bytes / (t.median_us * 1e-6) / 1e9, tf = flops / (t.median_us * 1e-6) / 1e12;
  std::ostringstream o;
  o << "{\"name\":\"" << name << "\",\"bytes\":" << jnum(bytes) << ",\"flops\":" << jnum(flops)
    << ",\"pred_us\":" << jnum(pred_us) << ",\"median_us\":" << jnum(t.median_us) << ",\"min_us\":" << jnum(t.min_us)
    << ",\"max_us\":" << jnum(t.max_us) << ",\"gbs\":" << jnum(gbs) << ",\"tflops\":" << jnum(tf) << extra << "}";
  g_report.bench.push_back(o.str());
  std::printf("%-52s %9.2f us [%8.2f-%8.2f] pred %8.2f  %7.1f GB/s  %6.1f TFLOP/s\n", name.c_str(), t.median_us,
              t.min_us, t.max_us, pred_us, gbs, tf);
  std::fflush(stdout);
}

__global__ void fill_u32_kernel(uint32_t* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint64_t z = (i + seed) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    p[i] = static_cast<uint32_t>(z ^ (z >> 31));
  }
}
__global__ void fill_bf16_kernel(uint16_t* p, size_t n, uint64_t seed, float base, float spread) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint64_t z = (i + seed) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 29)) * 0xBF58476D1CE4E5B9ull;
    const float u = static_cast<float>((z >> 40) & 0xFFFFFF) / 16777216.0f;
    p[i] = static_cast<uint16_t>(__float_as_uint(base + spread * u) >> 16);
  }
}
__global__ void fill_f32_kernel(float* p, size_t n, uint64_t seed, float a, float b) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint64_t z = (i + seed) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 29)) * 0xBF58476D1CE4E5B9ull;
    p[i] = a + (b - a) * static_cast<float>((z >> 40) & 0xFFFFFF) / 16777216.0f;
  }
}
void fill_f32(CudaDevice& dev, void* p, size_t n, uint64_t seed, float a, float b) {
  fill_f32_kernel<<<1024, 256, 0, dev.stream()>>>(static_cast<float*>(p), n, seed, a, b);
  MERE_CUDA_CHECK_LAUNCH("fill_f32");
}

// rotating weight copies (>= 256 MB together) so L2 never holds the next launch's weights
struct QBank {
  DeviceBuffer codes, scales, biases;
  std::vector<QWeightView> views;
};
QBank make_bank(CudaDevice& dev, int64_t rows, int64_t cols, int bits, size_t min_total) {
  QBank b;
  const size_t cb = static_cast<size_t>(rows * cols * bits / 8), sb = static_cast<size_t>(rows * (cols / 64) * 2);
  const int n = static_cast<int>(std::clamp<size_t>((min_total + cb + 2 * sb - 1) / (cb + 2 * sb), 1, 64));
  b.codes = dev.alloc(cb * n, "bench codes");
  b.scales = dev.alloc(sb * n, "bench scales");
  b.biases = dev.alloc(sb * n, "bench biases");
  fill_u32_kernel<<<1024, 256, 0, dev.stream()>>>(b.codes.as<uint32_t>(), cb * n / 4, rows * 7 + cols);
  fill_bf16_kernel<<<1024, 256, 0, dev.stream()>>>(b.scales.as<uint16_t>(), sb * n / 2, 11, 0.004f, 0.016f);
  fill_bf16_kernel<<<1024, 256, 0, dev.stream()>>>(b.biases.as<uint16_t>(), sb * n / 2, 12, -0.1f, 0.02f);
  MERE_CUDA_CHECK_LAUNCH("fill bank");
  for (int i = 0; i < n; ++i)
    b.views.push_back(QWeightView{reinterpret_cast<const uint32_t*>(b.codes.as<uint8_t>() + cb * i),
                                  b.scales.as<uint16_t>() + sb / 2 * i, b.biases.as<uint16_t>() + sb / 2 * i, rows, cols,
                                  bits});
  return b;
}

double g_mma_tflops = 660.0;  // assumed mma.sync bf16 rate for predictions (dense wgmma ~790 measured by torch)

// returns the median µs
double bench_qgemm(CudaDevice& dev, const char* what, int64_t rows, int64_t cols, int bits, int64_t T, int split = 0,
                   int bm = 0, int sp = 0) {
  QBank bank = make_bank(dev, rows, cols, bits, size_t{256} << 20);
  DeviceBuffer x = dev.alloc(static_cast<size_t>(T * cols) * 4, "x");
  fill_f32(dev, x.get(), static_cast<size_t>(T * cols), 5, -2.0f, 2.0f);
  DeviceBuffer xq = dev.alloc(static_cast<size_t>(T * cols) * 2, "xq");
  qgemm_prepare_x(dev, x.as<float>(), T, cols, cols, xq.as<uint16_t>());
  DeviceBuffer y = dev.alloc(static_cast<size_t>(T * rows) * 4, "y");
  const int64_t wsf = std::max<int64_t>(qgemm_workspace_floats(dev, bank.views[0], T), 4 * T * rows);
  DeviceBuffer ws = dev.alloc(static_cast<size_t>(wsf) * 4, "ws");
  QGemmConfig cfg;
  cfg.split_k = split;
  cfg.bm = bm;
  cfg.scale_prefetch = sp;
  QGemmConfig used = qgemm_default_config(dev, bank.views[0], T, true);
  if (split) used.split_k = split;
  if (bm) used.bm = bm;
  const Timing t = time_launches(dev, 3, 20, [&](int i) {
    qgemm(dev, bank.views[static_cast<size_t>(i) % bank.views.size()], xq.as<uint16_t>(), T, y.as<float>(), rows,
          ws.as<float>(), cfg);
  });
  const double bytes = static_cast<double>(bank.views[0].bytes()) + T * cols * 2.0 + T * rows * 4.0;
  const double flops = 2.0 * T * rows * cols;
  const double pred = std::max(bytes / (g_copy_gbs * 1e3), flops / (g_mma_tflops * 1e6));
  char name[160];
  std::snprintf(name, sizeof(name), "qgemm q%d %s [%lldx%lld] T=%lld bm=%d split=%d%s", bits, what, (long long)rows,
                (long long)cols, (long long)T, used.bm, used.split_k, sp == 1 ? " cp.async-scales" : "");
  add_bench(name, bytes, flops, pred, t);
  return t.median_us;
}

double bench_prepare(CudaDevice& dev, int64_t T, int64_t cols) {
  DeviceBuffer x = dev.alloc(static_cast<size_t>(T * cols) * 4, "x");
  fill_f32(dev, x.get(), static_cast<size_t>(T * cols), 5, -2.0f, 2.0f);
  DeviceBuffer xq = dev.alloc(static_cast<size_t>(T * cols) * 2, "xq");
  const Timing t = time_launches(dev, 3, 20, [&](int) { qgemm_prepare_x(dev, x.as<float>(), T, cols, cols, xq.as<uint16_t>()); });
  const double bytes = T * cols * 6.0;
  add_bench("qgemm_prepare_x [" + std::to_string(T) + "x" + std::to_string(cols) + "]", bytes, 0, bytes / (g_copy_gbs * 1e3), t);
  return t.median_us;
}

// MoE layer's routed experts: sort + gather-prepare + grouped gate_up + (prepare) + grouped down + combine
struct MoeTimes { double sort, gather, gate_up, prep_down, down, combine, s_gate_up, s_down, r_gate_up, r_down, w_gate_up, w_down; };
MoeTimes bench_moe(CudaDevice& dev, int64_t E, int64_t Ie, int64_t H, int64_t T, int64_t topk) {
  MoeTimes r{};
  const int64_t P = T * topk;
  QBank gu = make_bank(dev, E * 2 * Ie, H, 4, size_t{600} << 20), dn = make_bank(dev, E * H, Ie, 4, size_t{300} << 20);
  std::vector<int32_t> ids(static_cast<size_t>(P));
  Rng rng(77);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < topk; ++j) {
      int32_t e;
      bool dup;
      do {
        e = static_cast<int32_t>(rng.next() % E);
        dup = false;
        for (int64_t i = 0; i < j; ++i) dup |= ids[t * topk + i] == e;
      } while (dup);
      ids[t * topk + j] = e;
    }
  DeviceBuffer dids = to_device(dev, ids, "ids");
  DeviceBuffer x = dev.alloc(T * H * 4, "x"), w = dev.alloc(P * 4, "w");
  fill_f32(dev, x.get(), T * H, 3, -2.0f, 2.0f);
  fill_f32(dev, w.get(), P, 4, 0.0f, 0.3f);
  DeviceBuffer off = dev.alloc((E + 1) * 4, "off"), rt = dev.alloc(P * 4, "rt"), pr = dev.alloc(P * 4, "pr");
  DeviceBuffer xq = dev.alloc(P * H * 2, "xq"), ygu = dev.alloc(P * 2 * Ie * 4, "ygu"), hq = dev.alloc(P * Ie * 2, "hq"),
               yd = dev.alloc(P * H * 4, "yd"), out = dev.alloc(T * H * 4, "out");
  fill_f32(dev, ygu.get(), P * 2 * Ie, 6, -1.0f, 1.0f);
  moe_sort_pairs(dev, dids.as<int32_t>(), T, topk, E, off.as<int32_t>(), rt.as<int32_t>(), pr.as<int32_t>());
  const double gu_bytes = gu.views[0].bytes(), dn_bytes = dn.views[0].bytes();
  char nm[160];
  Timing t = time_launches(dev, 2, 10, [&](int) {
    moe_sort_pairs(dev, dids.as<int32_t>(), T, topk, E, off.as<int32_t>(), rt.as<int32_t>(), pr.as<int32_t>());
  });
  add_bench("moe_sort_pairs T=" + std::to_string(T) + " top" + std::to_string(topk) + " E=" + std::to_string(E), P * 12.0, 0, 2, t);
  r.sort = t.median_us;
  t = time_launches(dev, 3, 20, [&](int) {
    qgemm_prepare_x_gather(dev, x.as<float>(), rt.as<int32_t>(), P, H, H, xq.as<uint16_t>());
  });
  add_bench("qgemm_prepare_x_gather P=" + std::to_string(P) + " K=" + std::to_string(H), P * H * 6.0, 0, P * H * 6.0 / (g_copy_gbs * 1e3), t);
  r.gather = t.median_us;
  t = time_launches(dev, 3, 20, [&](int i) {
    qgemm_grouped(dev, gu.views[static_cast<size_t>(i) % gu.views.size()], E, 2 * Ie, xq.as<uint16_t>(), off.as<int32_t>(),
                  P, ygu.as<float>(), 2 * Ie);
  });
  std::snprintf(nm, sizeof(nm), "qgemm_grouped q4 gate_up E=%lld [%lldx%lld] P=%lld", (long long)E, (long long)(2 * Ie),
                (long long)H, (long long)P);
  double fl = 2.0 * P * 2 * Ie * H, by = gu_bytes + P * H * 2.0 + P * 2 * Ie * 4.0;
  add_bench(nm, by, fl, std::max(by / (g_copy_gbs * 1e3), fl / (g_mma_tflops * 1e6)), t);
  r.gate_up = t.median_us;
  t = time_launches(dev, 3, 20, [&](int) { qgemm_prepare_x(dev, ygu.as<float>(), P, Ie, 2 * Ie, hq.as<uint16_t>()); });
  add_bench("qgemm_prepare_x (down input) P=" + std::to_string(P) + " K=" + std::to_string(Ie), P * Ie * 6.0, 0,
            P * Ie * 6.0 / (g_copy_gbs * 1e3), t);
  r.prep_down = t.median_us;
  t = time_launches(dev, 3, 20, [&](int i) {
    qgemm_grouped(dev, dn.views[static_cast<size_t>(i) % dn.views.size()], E, H, hq.as<uint16_t>(), off.as<int32_t>(), P,
                  yd.as<float>(), H);
  });
  std::snprintf(nm, sizeof(nm), "qgemm_grouped q4 down E=%lld [%lldx%lld] P=%lld", (long long)E, (long long)H,
                (long long)Ie, (long long)P);
  fl = 2.0 * P * H * Ie;
  by = dn_bytes + P * Ie * 2.0 + P * H * 4.0;
  add_bench(nm, by, fl, std::max(by / (g_copy_gbs * 1e3), fl / (g_mma_tflops * 1e6)), t);
  r.down = t.median_us;
  // the routed-expert kernels that replace qgemm_grouped: gate and up as the two halves of the bank
  // matrix with the SwiGLU fused, then down; each pair timed on the same inputs, µs (median)
  auto half = [](QWeightView v, int64_t r0, int64_t n) {
    v.codes += r0 * v.cols * v.bits / 32;
    v.scales += r0 * (v.cols / 64);
    v.biases += r0 * (v.cols / 64);
    v.rows = n;
    return v;
  };
  using GateUpFn = std::function<void(const QWeightView&, const QWeightView&)>;
  using DownFn = std::function<void(const QWeightView&)>;
  auto bench_pair = [&](const std::string& gate_up_name, const std::string& down_name, const GateUpFn& gate_up,
                        const DownFn& down) {
    Timing tg = time_launches(dev, 3, 20, [&](int i) {
      const QWeightView& v = gu.views[static_cast<size_t>(i) % gu.views.size()];
      gate_up(half(v, 0, E * Ie), half(v, E * Ie, E * Ie));
    });
    double f = 2.0 * P * 2 * Ie * H, b = gu_bytes + P * H * 2.0 + P * Ie * 4.0;
    add_bench(gate_up_name, b, f, std::max(b / (g_copy_gbs * 1e3), f / (g_mma_tflops * 1e6)), tg);
    Timing td = time_launches(dev, 3, 20, [&](int i) { down(dn.views[static_cast<size_t>(i) % dn.views.size()]); });
    f = 2.0 * P * H * Ie, b = dn_bytes + P * Ie * 2.0 + P * H * 4.0;
    add_bench(down_name, b, f, std::max(b / (g_copy_gbs * 1e3), f / (g_mma_tflops * 1e6)), td);
    return std::pair<double, double>{tg.median_us, td.median_us};
  };
  const std::string ep = " E=" + std::to_string(E) + " P=" + std::to_string(P);
  for (const MoeStreamLoads loads : {MoeStreamLoads::Registers, MoeStreamLoads::Ring, MoeStreamLoads::Tight}) {
    const char* vname = loads == MoeStreamLoads::Ring ? " ring" : loads == MoeStreamLoads::Tight ? " tight" : "";
    std::snprintf(nm, sizeof(nm), "moe_stream_gate_up q4 (SwiGLU fused) E=%lld 2x[%lldx%lld] P=%lld", (long long)E,
                  (long long)Ie, (long long)H, (long long)P);
    const std::string gname = loads == MoeStreamLoads::Registers ? std::string(nm)
                                                                 : std::string("moe_stream_gate_up") + vname + " q4" + ep;
    std::snprintf(nm, sizeof(nm), "moe_stream q4 down E=%lld [%lldx%lld] P=%lld", (long long)E, (long long)H,
                  (long long)Ie, (long long)P);
    const std::string dname = loads == MoeStreamLoads::Registers ? std::string(nm)
                                                                 : std::string("moe_stream") + vname + " q4 down" + ep;
    const auto [g_us, d_us] = bench_pair(
        gname, dname,
        [&](const QWeightView& g, const QWeightView& u) {
          moe_stream_gate_up(dev, g, u, E, Ie, xq.as<uint16_t>(), off.as<int32_t>(), P, ygu.as<float>(), Ie, loads);
        },
        [&](const QWeightView& d) {
          moe_stream(dev, d, E, H, hq.as<uint16_t>(), off.as<int32_t>(), P, yd.as<float>(), H, loads);
        });
    if (loads == MoeStreamLoads::Registers) r.s_gate_up = g_us, r.s_down = d_us;
    if (loads == MoeStreamLoads::Ring) r.r_gate_up = g_us, r.r_down = d_us;
  }
  if (wgemm_moe_supported(dev, gu.views[0], 2 * Ie) && Ie % 128 == 0 && H % 128 == 0) {  // the wgmma experts
    const auto [g_us, d_us] = bench_pair(
        "wgemm_moe_gate_up q4 (SwiGLU fused)" + ep, "wgemm_moe q4 down" + ep,
        [&](const QWeightView& g, const QWeightView& u) {
          wgemm_moe_gate_up(dev, g, u, E, Ie, xq.as<uint16_t>(), off.as<int32_t>(), P, ygu.as<float>(), Ie);
        },
        [&](const QWeightView& d) { wgemm_moe(dev, d, E, H, hq.as<uint16_t>(), off.as<int32_t>(), P, yd.as<float>(), H); });
    r.w_gate_up = g_us, r.w_down = d_us;
  }
  t = time_launches(dev, 3, 20, [&](int) {
    moe_combine(dev, yd.as<float>(), H, pr.as<int32_t>(), w.as<float>(), T, topk, H, out.as<float>(), true);
  });
  add_bench("moe_combine T=" + std::to_string(T) + " N=" + std::to_string(H), P * H * 4.0 + T * H * 8.0, 0,
            (P * H * 4.0 + T * H * 8.0) / (g_copy_gbs * 1e3), t);
  r.combine = t.median_us;
  return r;
}

// the GDN benches' inputs (random, decode-like ranges) and their flop / byte counts: the recurrent
// form's work (mul + 3 fma a state element a token) and the unavoidable traffic
struct GdnBenchIo {
  int64_t Hk, Hv, T;
  DeviceBuffer S, q, k, v, g, b, o;
  GdnBenchIo(CudaDevice& dev, int64_t hk, int64_t hv, int64_t t) : Hk(hk), Hv(hv), T(t) {
    const int64_t D = 128;
    S = dev.alloc(Hv * D * D * 4, "S"), q = dev.alloc(T * Hk * D * 4, "q"), k = dev.alloc(T * Hk * D * 4, "k");
    v = dev.alloc(T * Hv * D * 4, "v"), g = dev.alloc(T * Hv * 4, "g"), b = dev.alloc(T * Hv * 4, "b");
    o = dev.alloc(T * Hv * D * 4, "o");
    fill_f32(dev, S.get(), Hv * D * D, 1, -0.5f, 0.5f);
    fill_f32(dev, q.get(), T * Hk * D, 2, -0.09f, 0.09f);
    fill_f32(dev, k.get(), T * Hk * D, 3, -0.15f, 0.15f);
    fill_f32(dev, v.get(), T * Hv * D, 4, -1.0f, 1.0f);
    fill_f32(dev, g.get(), T * Hv, 5, -3.0f, -0.01f);
    fill_f32(dev, b.get(), T * Hv, 6, 0.05f, 0.95f);
  }
  double flops() const { return 6.0 * Hv * 128 * 128 * T; }
  double bytes() const { return 2.0 * Hv * 128 * 128 * 4 + T * (2.0 * Hk * 128 + 2.0 * Hv * 128 + 2.0 * Hv) * 4; }
  std::string shape() const { return "Hk=" + std::to_string(Hk) + " Hv=" + std::to_string(Hv) + " T=" + std::to_string(T); }
};

enum class GdnBench { Recurrent, Lazy4, Lazy8, C4, Tc1, Tc2, Tc4, Decode };
// gdn_prefill_tc's warps a 16 rows of a bench form (0: not tc)
int tc_warps_of(GdnBench f) { return f == GdnBench::Tc1 ? 1 : f == GdnBench::Tc2 ? 2 : f == GdnBench::Tc4 ? 4 : 0; }
double bench_gdn(CudaDevice& dev, int64_t Hk, int64_t Hv, int64_t T, GdnBench form) {
  const int64_t D = 128;
  GdnBenchIo io(dev, Hk, Hv, T);
  DeviceBuffer scr = dev.alloc(static_cast<size_t>(gdn_c4_scratch_floats(T, Hk)) * 4, "gdn c4 scratch");
  const Timing t = time_launches(dev, 2, 10, [&](int) {
    float *S = io.S.as<float>(), *q = io.q.as<float>(), *k = io.k.as<float>(), *v = io.v.as<float>(), *g = io.g.as<float>(),
          *b = io.b.as<float>(), *o = io.o.as<float>();
    if (form == GdnBench::Decode) gdn_decode(dev, S, q, k, v, g, b, T, Hk, Hv, D, D, o);
    else if (form == GdnBench::Recurrent) gdn_prefill(dev, S, q, k, v, g, b, T, Hk, Hv, D, D, o);
    else if (form == GdnBench::C4) gdn_prefill_c4(dev, S, q, k, v, g, b, T, Hk, Hv, D, D, scr.as<float>(), o);
    else if (tc_warps_of(form) != 0)
      gdn_prefill_tc(dev, S, q, k, v, g, b, T, Hk, Hv, D, D, scr.as<float>(), o, tc_warps_of(form));
    else gdn_prefill_lazy(dev, S, q, k, v, g, b, T, Hk, Hv, D, D, o, form == GdnBench::Lazy8 ? 8 : 4);
  });
  // prediction, recurrent: issue-bound SIMT, ~95 warp instructions a token per 4 rows of S, 4 issues/clk/SM
  // at 1.98 GHz; lazy with 8 rows a warp: the token's dependency chain (LDS, 4-FMA dots, 5 shuffle
  // levels, d, a broadcast shuffle, the update: ~300 cycles) with <= 1.5 warps a scheduler issuing
  // ~170 instructions a token each; with 4 rows: 156 instructions a token a warp (ncu) at 60% issue
  double pred = (Hv * D / 4.0) * 95.0 * T / (dev.sm_count() * 4.0 * 1.98e9) * 1e6;
  if (form == GdnBench::Lazy8) pred = 300.0 * T / 1.98e9 * 1e6;
  if (form == GdnBench::Lazy4) pred = (Hv * D / 4.0) * 156.0 / 0.6 * T / (dev.sm_count() * 4.0 * 1.98e9) * 1e6;
  // c4: ~94 warp instructions a token per 4 rows (v1: 124) at ~70% issue (v1: 53%; the chain is paid
  // once a 4 tokens), the Gram kernel included
  if (form == GdnBench::C4) pred = (Hv * D / 4.0) * 94.0 / 0.7 * T / (dev.sm_count() * 4.0 * 1.98e9) * 1e6;
  // tc with one warp a 16 rows: s20b (H100) 818 instructions a 4-token block at 0.41 issued a cycle
  // (one warp a scheduler: ~2,000 cycles a block); with P warps a 16 rows (each 1 / P of the columns,
  // the recurrence in each) ~(440 / P + 250) instructions a warp, min(P Hv 8 / (4 SMs), 3) warps a
  // scheduler at ~0.4 issued a cycle a warp
  if (tc_warps_of(form) != 0) {
    const double P = tc_warps_of(form);
    const double wps = std::max(1.0, std::min(P * Hv * 8 / (4.0 * dev.sm_count()), 3.0));
    pred = (440.0 / P + 250.0) * wps / std::min(1.0, 0.4 * wps) * (T / 4.0) / 1.98e9 * 1e6;
  }
  const char* name = form == GdnBench::Decode      ? "gdn_decode (existing) "
                     : form == GdnBench::Lazy4     ? "gdn_prefill_lazy rw4 "
                     : form == GdnBench::Lazy8     ? "gdn_prefill_lazy rw8 "
                     : form == GdnBench::C4        ? "gdn_prefill_c4 "
                     : form == GdnBench::Tc1       ? "gdn_prefill_tc w1 "
                     : form == GdnBench::Tc2       ? "gdn_prefill_tc w2 "
                     : form == GdnBench::Tc4       ? "gdn_prefill_tc w4 "
                                                   : "gdn_prefill ";
  add_bench(std::string(name) + io.shape(), io.bytes(), io.flops(), form == GdnBench::Decode ? 0 : pred, t);
  return t.median_us;
}

// gdn_prefill_chunked (both kernels, scratch included) on bench_gdn's inputs, counted as bench_gdn
// counts (the recurrent form's work and the unavoidable traffic), so the two lines compare.
double bench_gdn_chunked(CudaDevice& dev, int64_t Hk, int64_t Hv, int64_t T) {
  const int64_t D = 128;
  GdnBenchIo io(dev, Hk, Hv, T);
  DeviceBuffer scr = dev.alloc(static_cast<size_t>(gdn_chunked_scratch_floats(T, Hv)) * 4, "gdn chunked scratch");
  const Timing t = time_launches(dev, 2, 10, [&](int) {
    gdn_prefill_chunked(dev, io.S.as<float>(), io.q.as<float>(), io.k.as<float>(), io.v.as<float>(), io.g.as<float>(),
                        io.b.as<float>(), T, Hk, Hv, D, D, scr.as<float>(), io.o.as<float>());
  });
  // prediction (gdn_chunked.h): prep ~54k warp FMA issues a (head, chunk) at 60% of 4 issues/clk/SM;
  // state: the busiest SM runs ceil(4 Hv / SMs) blocks of 8 warps x 3072 FMA a chunk, at 75%; 1.98 GHz
  const double nch = static_cast<double>((T + 63) / 64);
  const double prep = Hv * nch * 54e3 / (dev.sm_count() * 4.0 * 0.6 * 1.98e9) * 1e6;
  const double state = std::ceil(4.0 * Hv / dev.sm_count()) * nch * 8.0 * 3072.0 / (4.0 * 0.75 * 1.98e9) * 1e6;
  add_bench("gdn_prefill_chunked " + io.shape(), io.bytes(), io.flops(), prep + state, t);
  return t.median_us;
}

double bench_attention(CudaDevice& dev, int64_t nh, int64_t nkv, int64_t T, KvType kv, bool tc = false) {
  const int64_t hd = 256;
  const size_t es = kv == KvType::BF16 ? 2 : 4;
  DeviceBuffer q = dev.alloc(T * nh * hd * 4, "q"), k = dev.alloc(T * nkv * hd * es, "k"), v = dev.alloc(T * nkv * hd * es, "v"),
               o = dev.alloc(T * nh * hd * 4, "o");
  fill_f32(dev, q.get(), T * nh * hd, 1, -1.0f, 1.0f);
  if (kv == KvType::BF16) {
    fill_bf16_kernel<<<1024, 256, 0, dev.stream()>>>(k.as<uint16_t>(), T * nkv * hd, 2, -1.0f, 2.0f);
    fill_bf16_kernel<<<1024, 256, 0, dev.stream()>>>(v.as<uint16_t>(), T * nkv * hd, 3, -1.0f, 2.0f);
  } else {
    fill_f32(dev, k.get(), T * nkv * hd, 2, -1.0f, 1.0f);
    fill_f32(dev, v.get(), T * nkv * hd, 3, -1.0f, 1.0f);
  }
  const Timing t = time_launches(dev, 2, 10, [&](int) {
    (tc ? attention_prefill_tc : attention_prefill)(dev, q.as<float>(), k.get(), v.get(), kv, T, 0, nh, nkv, hd, 1.0f / 16.0f,
                                                    o.as<float>());
  });
  const double flops = 4.0 * nh * hd * (T * (T + 1) / 2.0);
  const double bytes = T * nh * hd * 8.0 + 2.0 * T * nkv * hd * es;
  // SIMT: half the fp32 FMA rate; tc: three bf16 products an fp32 one at a third of the dense bf16 mma.sync rate
  const double pred = tc ? 3.0 * flops / (g_mma_tflops * 1e12 / 3.0) * 1e6 : flops / (67e12 * 0.5) * 1e6;
  add_bench(std::string(tc ? "attention_prefill_tc" : "attention_prefill") + " nh=" + std::to_string(nh) +
                " nkv=" + std::to_string(nkv) + " T=" + std::to_string(T) + (kv == KvType::BF16 ? " bf16" : " f32"),
            bytes, flops, pred, t);
  return t.median_us;
}

// cuBLASLt path: dequantisation alone, the GEMM alone, both (what the engine runs). Returns both's median µs.
double bench_blas(CudaDevice& dev, BlasGemm& blas, const char* what, int64_t rows, int64_t cols, int bits, int64_t T) {
  QBank bank = make_bank(dev, rows, cols, bits, size_t{256} << 20);
  DeviceBuffer x = dev.alloc(static_cast<size_t>(T * cols) * 4, "x");
  fill_f32(dev, x.get(), static_cast<size_t>(T * cols), 5, -2.0f, 2.0f);
  DeviceBuffer xq = dev.alloc(static_cast<size_t>(T * cols) * 2, "xq");
  qgemm_prepare_x(dev, x.as<float>(), T, cols, cols, xq.as<uint16_t>());
  DeviceBuffer y = dev.alloc(static_cast<size_t>(T * rows) * 4, "y");
  DeviceBuffer wq = dev.alloc(static_cast<size_t>(rows * cols) * 2, "wq");
  const size_t nb = bank.views.size();
  const double qbytes = static_cast<double>(bank.views[0].bytes()), wbytes = rows * cols * 2.0;
  const double flops = 2.0 * T * rows * cols;
  char name[160];
  const Timing td = time_launches(dev, 3, 20, [&](int i) { qgemm_dequant(dev, bank.views[static_cast<size_t>(i) % nb], wq.as<uint16_t>()); });
  std::snprintf(name, sizeof(name), "blas dequant q%d %s [%lldx%lld]", bits, what, (long long)rows, (long long)cols);
  add_bench(name, qbytes + wbytes, 0, (qbytes + wbytes) / (g_copy_gbs * 1e3), td);
  qgemm_dequant(dev, bank.views[0], wq.as<uint16_t>());
  const Timing tg = time_launches(dev, 3, 20, [&](int) { blas.gemm(wq.as<uint16_t>(), rows, cols, xq.as<uint16_t>(), T, y.as<float>(), rows); });
  std::snprintf(name, sizeof(name), "blas gemm bf16 %s [%lldx%lld] T=%lld", what, (long long)rows, (long long)cols, (long long)T);
  add_bench(name, wbytes + T * cols * 2.0 + T * rows * 4.0, flops, flops / (775.0 * 1e6), tg);
  const Timing tb = time_launches(dev, 3, 20, [&](int i) {
    blas.run(bank.views[static_cast<size_t>(i) % nb], xq.as<uint16_t>(), T, y.as<float>(), rows);
  });
  std::snprintf(name, sizeof(name), "blas dequant+gemm q%d %s [%lldx%lld] T=%lld", bits, what, (long long)rows, (long long)cols,
                (long long)T);
  add_bench(name, qbytes + 2 * wbytes, flops, td.median_us + tg.median_us, tb);
  return tb.median_us;
}

// wgmma path on 4-bit MLX weights (rotating copies, so the weights come from HBM): median µs.
double bench_wgemm(CudaDevice& dev, const char* what, int64_t rows, int64_t cols, int64_t T, WgemmStreamK* sk = nullptr) {
  QBank bank = make_bank(dev, rows, cols, 4, size_t{256} << 20);
  DeviceBuffer x = dev.alloc(static_cast<size_t>(T * cols) * 4, "x");
  fill_f32(dev, x.get(), static_cast<size_t>(T * cols), 5, -2.0f, 2.0f);
  DeviceBuffer xq = dev.alloc(static_cast<size_t>(T * cols) * 2, "xq");
  qgemm_prepare_x(dev, x.as<float>(), T, cols, cols, xq.as<uint16_t>());
  DeviceBuffer y = dev.alloc(static_cast<size_t>(T * rows) * 4, "y");
  const size_t nb = bank.views.size();
  const double flops = 2.0 * T * rows * cols;
  const Timing t = time_launches(dev, 3, 20, [&](int i) {
    wgemm(dev, bank.views[static_cast<size_t>(i) % nb], xq.as<uint16_t>(), T, y.as<float>(), rows, sk);
  });
  char name[160];
  std::snprintf(name, sizeof(name), "wgemm%s q4 %s [%lldx%lld] T=%lld", sk ? (std::string(" ") + wgemm_form_name(sk->form())).c_str() : "", what, (long long)rows,
                (long long)cols, (long long)T);
  add_bench(name, static_cast<double>(bank.views[0].bytes()) + T * cols * 2.0 + T * rows * 4.0, flops,
            flops / (700.0 * 1e6), t);
  return t.median_us;
}

// wgemm_group on a set of matrices sharing X (rotating copies of each): median µs of the one launch.
double bench_wgemm_group(CudaDevice& dev, const char* what, const std::vector<int64_t>& rows, int64_t cols, int64_t T,
                         WgemmStreamK& sk, WsGrid grid = WsGrid::StreamK) {
  const int n = static_cast<int>(rows.size());
  std::vector<QBank> banks;
  std::vector<DeviceBuffer> ys;
  double wbytes = 0, flops = 0;
  std::string shape;
  for (const int64_t r : rows) {
    banks.push_back(make_bank(dev, r, cols, 4, size_t{256} << 20));
    ys.push_back(dev.alloc(static_cast<size_t>(T * r) * 4, "y"));
    wbytes += static_cast<double>(banks.back().views[0].bytes()) + T * r * 4.0;
    flops += 2.0 * T * r * cols;
    shape += (shape.empty() ? "" : "+") + std::to_string(r);
  }
  DeviceBuffer x = dev.alloc(static_cast<size_t>(T * cols) * 4, "x");
  fill_f32(dev, x.get(), static_cast<size_t>(T * cols), 5, -2.0f, 2.0f);
  DeviceBuffer xq = dev.alloc(static_cast<size_t>(T * cols) * 2, "xq");
  qgemm_prepare_x(dev, x.as<float>(), T, cols, cols, xq.as<uint16_t>());
  const Timing t = time_launches(dev, 3, 20, [&](int i) {
    WgemmOut outs[kWgemmMaxGroup];
    for (int m = 0; m < n; ++m) {
      const QBank& b = banks[static_cast<size_t>(m)];
      outs[m] = WgemmOut{b.views[static_cast<size_t>(i) % b.views.size()], ys[static_cast<size_t>(m)].as<float>(), rows[static_cast<size_t>(m)]};
    }
    wgemm_group(dev, outs, n, xq.as<uint16_t>(), T, sk, grid);
  });
  char name[192];
  std::snprintf(name, sizeof(name), "wgemm_group %s%s q4 %s [%sx%lld] T=%lld", wgemm_form_name(sk.form()),
                grid == WsGrid::WholeTiles ? " whole" : "", what, shape.c_str(), (long long)cols, (long long)T);
  add_bench(name, wbytes + T * cols * 2.0, flops, flops / (700.0 * 1e6), t);
  return t.median_us;
}

// A 27B GatedDeltaNet layer's dense matmuls in the engine's order (qkv, z, out_proj, gate, up, down)
// through BlasGemm with and without the dequantisation overlapped on a side stream; µs a layer.
void bench_blas_layer(CudaDevice& dev, int64_t T) {
  const int64_t shapes[6][2] = {{10240, 5120}, {6144, 5120}, {5120, 6144}, {17408, 5120}, {17408, 5120}, {5120, 17408}};
  std::vector<QBank> banks;
  for (const auto& sh : shapes) banks.push_back(make_bank(dev, sh[0], sh[1], 4, 1));
  DeviceBuffer x = dev.alloc(static_cast<size_t>(T * 17408) * 4, "x");
  fill_f32(dev, x.get(), static_cast<size_t>(T * 17408), 5, -2.0f, 2.0f);
  DeviceBuffer xq = dev.alloc(static_cast<size_t>(T * 17408) * 2, "xq");
  qgemm_prepare_x(dev, x.as<float>(), T, 17408, 17408, xq.as<uint16_t>());
  DeviceBuffer y = dev.alloc(static_cast<size_t>(T * 17408) * 4, "y");
  double bytes = 0, flops = 0;
  for (const auto& sh : shapes) bytes += sh[0] * sh[1] * 0.5625, flops += 2.0 * T * sh[0] * sh[1];
  for (int ov : {0, 24}) {
    BlasGemm blas(dev, int64_t{17408} * 5120, ov);
    const Timing t = time_launches(dev, 2, 10, [&](int) {
      blas.begin_pass();  // the same six matrices every pass (230 MB: no pass finds them in L2)
      for (size_t m = 0; m < banks.size(); ++m) {
        const QWeightView& v = banks[m].views[0];
        blas.run(v, xq.as<uint16_t>(), T, y.as<float>(), v.rows);
      }
    });
    char name[160];
    std::snprintf(name, sizeof(name), "blas 27B layer (6 matmuls) T=%lld overlap_sms=%d", (long long)T, ov);
    add_bench(name, bytes, flops, flops / (775.0 * 1e6), t);
  }
}

// The device's copy bandwidth (sets g_copy_gbs, the predictions' byte rate).
void bench_copy(CudaDevice& dev) {
  {
    const size_t bytes = size_t{1} << 30;
    DeviceBuffer a = dev.alloc(bytes, "copy src"), b = dev.alloc(bytes, "copy dst");
    fill_u32_kernel<<<1024, 256, 0, dev.stream()>>>(a.as<uint32_t>(), bytes / 4, 1);
    const Timing t = time_launches(dev, 3, 20, [&](int) {
      MERE_CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, dev.stream()));
    });
    g_copy_gbs = 2.0 * bytes / (t.median_us * 1e-6) / 1e9;
    add_bench("d2d copy 1 GiB (read+write)", 2.0 * bytes, 0, 0, t);
  }
}

void bench_all(CudaDevice& dev) {
  bench_copy(dev);
  const int64_t T = 512;
  // ---- 27B geometry (64 layers: 48 GatedDeltaNet, 16 full attention), hidden 5120
  const double p_x = bench_prepare(dev, T, 5120);
  const double g_qkv = bench_qgemm(dev, "27B in_proj_qkv", 10240, 5120, 4, T);
  const double g_z = bench_qgemm(dev, "27B in_proj_z", 6144, 5120, 4, T);
  const double g_ba = bench_qgemm(dev, "27B in_proj_b+a", 96, 5120, 4, T);
  const double g_out = bench_qgemm(dev, "27B out_proj/o_proj", 5120, 6144, 4, T);
  const double g_q = bench_qgemm(dev, "27B q_proj(+gate)", 12288, 5120, 4, T);
  const double g_kv = bench_qgemm(dev, "27B k_proj/v_proj", 1024, 5120, 4, T);
  const double g_gate = bench_qgemm(dev, "27B gate/up", 17408, 5120, 4, T);
  bench_qgemm(dev, "27B gate+up fused", 34816, 5120, 4, T);
  const double g_down = bench_qgemm(dev, "27B down", 5120, 17408, 4, T);
  bench_qgemm(dev, "27B down no split", 5120, 17408, 4, T, 1);
  bench_qgemm(dev, "27B gate/up bm64", 17408, 5120, 4, T, 0, 64);
  bench_qgemm(dev, "27B gate/up", 17408, 5120, 4, T, 0, 0, 1);
  bench_qgemm(dev, "27B down", 5120, 17408, 4, T, 0, 0, 1);
  bench_qgemm(dev, "27B down split4", 5120, 17408, 4, T, 4);
  bench_qgemm(dev, "27B gate/up 8-bit", 17408, 5120, 8, T);
  bench_qgemm(dev, "27B gate/up T=64", 17408, 5120, 4, 64);
  bench_qgemm(dev, "27B gate/up T=2048", 17408, 5120, 4, 2048);
  const double p_down = bench_prepare(dev, T, 17408);
  bench_gdn(dev, 16, 48, T, GdnBench::Recurrent);
  bench_gdn(dev, 16, 48, T, GdnBench::C4);
  const double gdn27 = bench_gdn(dev, 16, 48, T, GdnBench::Tc1);  // the engine's default form (P by gdn_prefill_tc's rule)
  bench_gdn_chunked(dev, 16, 48, T);
  bench_gdn(dev, 16, 48, T, GdnBench::Decode);
  const double att27 = bench_attention(dev, 24, 4, T, KvType::BF16);
  bench_attention(dev, 24, 4, T, KvType::F32);
  double b27 = 0;  // the cuBLASLt path's matmuls of a prompt (dequant + gemm), for the estimate below
  {
    BlasGemm blas(dev, int64_t{17408} * 5120);
    const double b_qkv = bench_blas(dev, blas, "27B in_proj_qkv", 10240, 5120, 4, T);
    const double b_z = bench_blas(dev, blas, "27B in_proj_z", 6144, 5120, 4, T);
    const double b_out = bench_blas(dev, blas, "27B out_proj/o_proj", 5120, 6144, 4, T);
    const double b_q = bench_blas(dev, blas, "27B q_proj(+gate)", 12288, 5120, 4, T);
    const double b_kv = bench_blas(dev, blas, "27B k_proj/v_proj", 1024, 5120, 4, T);
    const double b_gate = bench_blas(dev, blas, "27B gate/up", 17408, 5120, 4, T);
    const double b_down = bench_blas(dev, blas, "27B down", 5120, 17408, 4, T);
    bench_blas(dev, blas, "27B gate/up T=2048", 17408, 5120, 4, 2048);
    bench_blas(dev, blas, "35B in_proj_qkv", 8192, 2048, 4, T);
    bench_blas_layer(dev, T);
    const double mlp = 2 * b_gate + b_down;
    b27 = 48 * (b_qkv + b_z + g_ba + b_out + mlp) + 16 * (b_q + 2 * b_kv + b_out + mlp);
  }
  if (dev.props().major == 9) {  // the wgmma path on the same shapes
    const double w_qkv = bench_wgemm(dev, "27B in_proj_qkv", 10240, 5120, T);
    const double w_z = bench_wgemm(dev, "27B in_proj_z", 6144, 5120, T);
    const double w_ba = bench_wgemm(dev, "27B in_proj_b+a", 96, 5120, T);
    const double w_out = bench_wgemm(dev, "27B out_proj/o_proj", 5120, 6144, T);
    const double w_q = bench_wgemm(dev, "27B q_proj(+gate)", 12288, 5120, T);
    const double w_kv = bench_wgemm(dev, "27B k_proj/v_proj", 1024, 5120, T);
    const double w_gate = bench_wgemm(dev, "27B gate/up", 17408, 5120, T);
    const double w_down = bench_wgemm(dev, "27B down", 5120, 17408, T);
    bench_wgemm(dev, "27B gate/up T=2048", 17408, 5120, 2048);
    bench_wgemm(dev, "35B in_proj_qkv", 8192, 2048, T);
    const double mlp = 2 * w_gate + w_down;
    const double w27 = 48 * (w_qkv + w_z + w_ba + w_out + mlp) + 16 * (w_q + 2 * w_kv + w_out + mlp);
    std::printf("27B T=512 matmuls a prompt: wgemm %.2f ms vs cuBLASLt path %.2f ms\n", w27 / 1e3, b27 / 1e3);
    std::ostringstream o;
    o << "{\"name\":\"27B matmuls a prompt (wgmma)\",\"T\":512,\"wgemm_ms\":" << jnum(w27 / 1e3)
      << ",\"blas_ms\":" << jnum(b27 / 1e3) << "}";
    g_report.bench.push_back(o.str());
  }
  const double mlp27 = 2 * g_gate + g_down + p_x + p_down;
  const double gdn_layer27 = g_qkv + g_z + g_ba + g_out + 2 * p_x + gdn27 + mlp27;
  const double att_layer27 = g_q + 2 * g_kv + g_out + 2 * p_x + att27 + mlp27;
  const double total27 = 48 * gdn_layer27 + 16 * att_layer27;
  const double q27mm = 48 * (g_qkv + g_z + g_ba + g_out + 2 * g_gate + g_down) + 16 * (g_q + 2 * g_kv + g_out + 2 * g_gate + g_down);
  std::printf("27B T=512 matmuls a prompt: qgemm %.2f ms, cuBLASLt path %.2f ms -> whole-prompt estimate with it %.2f ms, %.0f tok/s\n",
              q27mm / 1e3, b27 / 1e3, (total27 - q27mm + b27) / 1e3, T / ((total27 - q27mm + b27) * 1e-6));
  {
    std::ostringstream o;
    o << "{\"name\":\"27B matmuls a prompt\",\"T\":512,\"qgemm_ms\":" << jnum(q27mm / 1e3) << ",\"blas_ms\":" << jnum(b27 / 1e3)
      << ",\"q27_blas_tok_s\":" << jnum(T / ((total27 - q27mm + b27) * 1e-6)) << "}";
    g_report.bench.push_back(o.str());
  }
  // ---- 35B-A3B geometry (40 layers: 30 GatedDeltaNet, 10 attention), hidden 2048, 256 experts top-8
  const double p_x35 = bench_prepare(dev, T, 2048);
  const double h_qkv = bench_qgemm(dev, "35B in_proj_qkv", 8192, 2048, 4, T);
  const double h_z = bench_qgemm(dev, "35B in_proj_z", 4096, 2048, 4, T);
  const double h_ba = bench_qgemm(dev, "35B in_proj_b+a", 64, 2048, 4, T);
  const double h_out = bench_qgemm(dev, "35B out_proj/o_proj", 2048, 4096, 4, T);
  const double h_q = bench_qgemm(dev, "35B q_proj(+gate)", 8192, 2048, 4, T);
  const double h_kv = bench_qgemm(dev, "35B k_proj/v_proj", 512, 2048, 4, T);
  const double h_router = bench_qgemm(dev, "35B router (as 8-bit)", 256, 2048, 8, T);
  const double h_sgu = bench_qgemm(dev, "35B shared expert gate+up", 1024, 2048, 4, T);
  const double h_sdn = bench_qgemm(dev, "35B shared expert down", 2048, 512, 4, T);
  const MoeTimes mt = bench_moe(dev, 256, 512, 2048, T, 8);
  bench_gdn(dev, 16, 32, T, GdnBench::Recurrent);
  bench_gdn(dev, 16, 32, T, GdnBench::C4);
  const double gdn35 = bench_gdn(dev, 16, 32, T, GdnBench::Tc4);  // the engine's default form (P by gdn_prefill_tc's rule)
  bench_gdn_chunked(dev, 16, 32, T);
  const double att35 = bench_attention(dev, 16, 2, T, KvType::BF16);
  const double moe35 = h_router + h_sgu + h_sdn + 2 * p_x35 + mt.sort + mt.gather + mt.gate_up + mt.prep_down + mt.down +
                       mt.combine;
  const double gdn_layer35 = h_qkv + h_z + h_ba + h_out + 2 * p_x35 + gdn35 + moe35;
  const double att_layer35 = h_q + 2 * h_kv + h_out + 2 * p_x35 + att35 + moe35;
  const double total35 = 30 * gdn_layer35 + 10 * att_layer35;
  std::printf("\n27B  T=512: gdn layer %.1f us, attention layer %.1f us (mlp %.1f, gdn %.1f, attn %.1f) -> %.2f ms, %.0f tok/s "
              "(matmul+gdn+attention kernels only)\n",
              gdn_layer27, att_layer27, mlp27, gdn27, att27, total27 / 1e3, T / (total27 * 1e-6));
  std::printf("35B  T=512: gdn layer %.1f us, attention layer %.1f us (moe %.1f: gate_up %.1f down %.1f sort %.1f, gdn %.1f, "
              "attn %.1f) -> %.2f ms, %.0f tok/s (same scope)\n",
              gdn_layer35, att_layer35, moe35, mt.gate_up, mt.down, mt.sort, gdn35, att35, total35 / 1e3,
              T / (total35 * 1e-6));
  std::printf("35B  T=512 MoE experts: qgemm_grouped gate_up %.1f + down %.1f us; moe_stream gate_up+SwiGLU %.1f + down %.1f "
              "us (%.2f ms a prompt less)\n",
              mt.gate_up, mt.down, mt.s_gate_up, mt.s_down, 40 * (mt.gate_up + mt.down - mt.s_gate_up - mt.s_down) / 1e3);
  std::printf("35B  T=512 MoE experts, moe_stream with the shared-memory ring: gate_up+SwiGLU %.1f + down %.1f us\n",
              mt.r_gate_up, mt.r_down);
  std::ostringstream o;
  o << "{\"name\":\"model estimate\",\"T\":512,\"q27_ms\":" << jnum(total27 / 1e3) << ",\"q27_tok_s\":"
    << jnum(T / (total27 * 1e-6)) << ",\"q27_gdn_layer_us\":" << jnum(gdn_layer27) << ",\"q27_attn_layer_us\":"
    << jnum(att_layer27) << ",\"q35_ms\":" << jnum(total35 / 1e3) << ",\"q35_tok_s\":" << jnum(T / (total35 * 1e-6))
    << ",\"q35_gdn_layer_us\":" << jnum(gdn_layer35) << ",\"q35_attn_layer_us\":" << jnum(att_layer35)
    << ",\"scope\":\"sum of measured matmul, prepare, MoE, GDN and attention kernels; norms, conv, rope, gates not included\"}";
  g_report.bench.push_back(o.str());
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, bench = true, only_bench = false;
  std::string json, only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") quick = true, bench = false;
    else if (a == "--no-bench") bench = false;
    else if (a == "--bench-only") only_bench = true;
    else if (a == "--json" && i + 1 < argc) json = argv[++i];
    else if (a == "--only" && i + 1 < argc &&
             std::set<std::string>{"wgemm", "gdn", "moe", "attn"}.count(argv[i + 1]) == 1)
      only = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--quick] [--no-bench] [--bench-only] [--only wgemm|gdn|moe|attn] [--json PATH]\n", argv[0]);
      return 2;
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    if (CudaDevice::device_count() == 0) {
      std::fprintf(stderr, "[mere_prefill_check] no CUDA device: expected at least 1, got 0\n");
      return 3;
    }
    CudaDevice dev(0);
    g_report.device = dev.describe();
    std::printf("%s\n", g_report.device.c_str());
    auto phase = [&](const char* name, const std::function<void()>& f) { run_phase(dev, name, f); };
    if (only == "gdn") {  // the GatedDeltaNet prefill forms: checks, then each at the 27B and 35B-A3B shapes
      phase("gdn_prefill", [&] { check_gdn_prefill(dev, quick); });
      if (bench)
        phase("bench", [&] {
          for (const int64_t Hv : {48, 32})
            for (const GdnBench f : {GdnBench::Recurrent, GdnBench::C4, GdnBench::Tc1, GdnBench::Tc2, GdnBench::Tc4})
              bench_gdn(dev, 16, Hv, 512, f);
          bench_gdn_chunked(dev, 16, 48, 512);
        });
      return finish_report(json, t0);
    }
    if (only == "attn") {  // the prefill attention kernels: both checked, then both at the 27B and 35B-A3B heads
      phase("attention_prefill", [&] { check_attention_prefill(dev, quick); });
      phase("attention_prefill_tc", [&] { check_attention_prefill(dev, quick, true); });
      if (bench)
        phase("bench", [&] {
          for (const auto& [nh, nkv] : {std::pair<int64_t, int64_t>{24, 4}, std::pair<int64_t, int64_t>{16, 2}})
            for (const KvType kv : {KvType::F32, KvType::BF16})
              for (const bool tc : {false, true}) bench_attention(dev, nh, nkv, 512, kv, tc);
        });
      return finish_report(json, t0);
    }
    if (only == "moe") {  // the routed experts at the 35B-A3B shapes: checks, then every expert kernel's speed
      phase("moe", [&] {
        check_moe(dev, 256, 1024, 2048, 512, 8, 4, 4003, 8);  // 35B gate_up
        check_moe(dev, 256, 2048, 512, 512, 8, 4, 4004, 8);   // 35B down
      });
      if (bench)
        phase("bench", [&] {
          bench_copy(dev);
          bench_moe(dev, 256, 512, 2048, 512, 8);
        });
      return finish_report(json, t0);
    }
    if (only == "wgemm") {  // the wgmma GEMMs' checks, then them and the paths they replace on the real shapes
      phase("wgemm", [&] { check_wgemm(dev, quick); });
      phase("prepare swiglu", [&] { check_prepare_swiglu(dev); });
      phase("moe", [&] {  // moe_stream and wgemm_moe side by side (wgemm_moe needs 128 | rows an expert)
        check_moe(dev, 64, 1024, 2048, 512, 8, 4, 4002, 1);
        check_moe(dev, 32, 384, 640, 100, 4, 4, 4005, 1);
        if (!quick) {
          check_moe(dev, 256, 1024, 2048, 512, 8, 4, 4003, 8);  // 35B gate_up
          check_moe(dev, 256, 2048, 512, 512, 8, 4, 4004, 8);   // 35B down
        }
      });
      if (bench)
        phase("bench", [&] {
          bench_copy(dev);
          BlasGemm blas(dev, int64_t{17408} * 5120);
          const int64_t shapes[5][2] = {{17408, 5120}, {5120, 17408}, {10240, 5120}, {6144, 5120}, {5120, 6144}};
          // the earlier forms (tiles, stream-K, wide, wst) have their numbers in docs/cuda-kernels.md
          WgemmStreamK ws(dev, WgemmForm::WarpSpecialized), wsd(dev, WgemmForm::WarpSpecializedDequant);
          for (const auto& sh : shapes) {
            bench_blas(dev, blas, "27B", sh[0], sh[1], 4, 512);
            bench_wgemm(dev, "27B", sh[0], sh[1], 512, &ws);
            bench_wgemm(dev, "27B", sh[0], sh[1], 512, &wsd);
          }
          for (const int64_t T : {64, 2048}) {
            const std::string what = "27B gate/up T=" + std::to_string(T);
            bench_blas(dev, blas, what.c_str(), 17408, 5120, 4, T);
            bench_wgemm(dev, what.c_str(), 17408, 5120, T, &ws);
            bench_wgemm(dev, what.c_str(), 17408, 5120, T, &wsd);
          }
          bench_blas(dev, blas, "35B in_proj_qkv", 8192, 2048, 4, 512);
          bench_wgemm(dev, "35B in_proj_qkv", 8192, 2048, 512, &ws);
          bench_wgemm(dev, "35B in_proj_qkv", 8192, 2048, 512, &wsd);
          // the engine's grouped sets against their matrices one launch each (ws; cuBLASLt for the small ones)
          struct Set {
            const char* what;
            std::vector<int64_t> rows;
            int64_t cols;
          };
          for (const Set& set : {Set{"27B GDN qkv+z+b+a", {10240, 6144, 48, 48}, 5120}, Set{"27B attention q+k+v", {12288, 1024, 1024}, 5120},
                                 Set{"27B gate+up", {17408, 17408}, 5120}, Set{"35B GDN qkv+z+b+a", {8192, 4096, 32, 32}, 2048},
                                 Set{"35B attention q+k+v", {8192, 512, 512}, 2048}, Set{"35B shared gate+up", {512, 512}, 2048}}) {
            const double g = bench_wgemm_group(dev, set.what, set.rows, set.cols, 512, ws);
            const double gw = bench_wgemm_group(dev, set.what, set.rows, set.cols, 512, ws, WsGrid::WholeTiles);
            double sep = 0;
            for (const int64_t r : set.rows)
              sep += std::min(bench_wgemm(dev, set.what, r, set.cols, 512, &ws), bench_blas(dev, blas, set.what, r, set.cols, 4, 512));
            std::printf("%s: one launch %.1f us (whole tiles %.1f) vs one each (the faster path a matrix) %.1f us\n", set.what, g,
                        gw, sep);
          }
          bench_moe(dev, 256, 512, 2048, 512, 8);  // moe_stream vs wgemm_moe at the 35B-A3B shapes
        });
      return finish_report(json, t0);
    }
    if (!only_bench) {
      phase("qgemm", [&] { check_qgemm(dev, quick); });
      phase("blas", [&] { check_blas(dev, quick); });
      phase("prepare swiglu", [&] { check_prepare_swiglu(dev); });
      phase("wgemm", [&] { check_wgemm(dev, quick); });
      phase("moe", [&] {
        check_moe(dev, 8, 64, 128, 17, 2, 4, 4001, 1);
        check_moe(dev, 64, 1024, 2048, 512, 8, 4, 4002, 1);
        if (!quick) {
          check_moe(dev, 256, 1024, 2048, 512, 8, 4, 4003, 8);  // 35B gate_up
          check_moe(dev, 256, 2048, 512, 512, 8, 4, 4004, 8);   // 35B down
          check_moe(dev, 32, 384, 640, 100, 4, 8, 4005, 1);
        }
      });
      phase("gdn_prefill", [&] { check_gdn_prefill(dev, quick); });
      phase("attention_prefill", [&] { check_attention_prefill(dev, quick); });
      phase("attention_prefill_tc", [&] { check_attention_prefill(dev, quick, true); });
    }
    if (bench) phase("bench", [&] { bench_all(dev); });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    ++g_report.failures;
  }
  return finish_report(json, t0);
}
