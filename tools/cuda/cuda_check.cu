// mere_cuda_check: correctness checks and benchmarks of the CUDA kernels on a real GPU (a plain
// main, no gtest: the GPU machine has none). Checks every kernel against the CPU reference ops on
// random inputs (real Qwen3.5 shapes and kernel-breaking sizes), outputs poisoned with NaN first,
// plus bitwise batch-width invariance; then measures copy bandwidth and times the kernels.
// Usage: mere_cuda_check [--quick] [--no-bench] [--ncu] [--json PATH] [--kernels LIST] [--only PHASE];
// --kernels: benchmark only those matvec kernels (int, gmma, tc, simt); --quick: small shapes, no
// benchmarks (for compute-sanitizer); --ncu: only a few matvec launches to profile; --only: only the
// phases whose name contains PHASE (rms_norm, gdn, attention, argmax, qmatvec, bench, barrier). Exit 1 on
// failure.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "backend/cuda/attention.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "backend/cuda/engine/grid_sync.cuh"
#include "backend/cuda/engine/kernels.h"
#include "backend/cuda/gdn.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/norm.h"
#include "backend/cuda/qmatvec.h"
#include "backend/cuda/qmatvec_int.h"
#include "backend/cuda/qmatvec_prep.cuh"
#include "core/dtype.h"
#include "model/matrix.h"
#include "ops/ops.h"
#include "check_report.h"

using namespace mere;
using namespace mere::cuda;
using namespace mere::cuda::checktool;

namespace {

// ---------------------------------------------------------------- comparison (Metrics, compare: check_report.h)
bool record(const std::string& name, const Metrics& m, double nmse_tol) {
  const bool ok = m.nonfinite == 0 && m.out_of_bound == 0 && m.nmse <= nmse_tol;
  std::ostringstream o;
  o << "{\"check\":\"" << name << "\",\"pass\":" << (ok ? "true" : "false") << ",\"n\":" << m.n
    << ",\"nmse\":" << jnum(m.nmse) << ",\"nmse_tol\":" << jnum(nmse_tol) << ",\"max_abs_err\":" << jnum(m.max_abs)
    << ",\"rms_ref\":" << jnum(m.rms_ref) << ",\"nonfinite\":" << m.nonfinite << ",\"out_of_bound\":" << m.out_of_bound
    << "}";
  g_report.checks.push_back(o.str());
  if (ok) {
    ++g_report.passes;
  } else {
    ++g_report.failures;
    std::printf("FAIL %s: nmse %.3g (tol %.3g) max_abs %.3g rms_ref %.3g nonfinite %zu out_of_bound %zu\n",
                name.c_str(), m.nmse, nmse_tol, m.max_abs, m.rms_ref, m.nonfinite, m.out_of_bound);
  }
  return ok;
}


// ---------------------------------------------------------------- quantised matrices
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
    const float s = r.uniform(0.004f, 0.02f) * ((r.next() & 1) ? 1.0f : -1.0f);  // MLX allows negative scales
    q.scales[i] = f32_to_bf16(s);
    q.biases[i] = f32_to_bf16(-half * s + r.uniform(-0.01f, 0.01f));
  }
  return q;
}

// A test matrix on the device: the MLX upload (view) and, 4-bit, the tiled copy of the group-integer
// kernel (tview), made by qmatvec_tile_upload from the host bytes through a small staging buffer (so
// big matrices go up in several chunks).
struct DevQ {
  DeviceBuffer codes, scales, biases, tcodes, tsb;
  QWeightView view, tview;
};
DevQ upload_q(CudaDevice& dev, const HostQ& q) {
  DevQ d;
  d.codes = to_device(dev, q.codes, "test codes");
  d.scales = to_device(dev, q.scales, "test scales");
  d.biases = to_device(dev, q.biases, "test biases");
  d.view = QWeightView{d.codes.as<uint32_t>(), d.scales.as<uint16_t>(), d.biases.as<uint16_t>(), q.rows, q.cols, q.bits};
  if (q.bits == 4) {
    const QTiledBytes tb = qmatvec_tiled_bytes(q.rows, q.cols);
    d.tcodes = dev.alloc(tb.codes, "test tiled codes");
    d.tsb = dev.alloc(tb.sb, "test tiled scales");
    DeviceBuffer stage = dev.alloc(std::max<size_t>(qmatvec_tile_staging_min(q.cols), size_t{4} << 20), "test staging");
    qmatvec_tile_upload(dev, q.codes.data(), q.scales.data(), q.biases.data(), q.rows, q.cols, d.tcodes.get(), d.tsb.get(),
                        stage.get(), stage.bytes());
    d.tview = d.view;
    d.tview.codes = d.tcodes.as<uint32_t>();
    d.tview.scales = d.tsb.as<uint16_t>();
    d.tview.biases = nullptr;
    d.tview.tiled = true;
  }
  return d;
}
// The view a config reads: the group-integer kernel (integer 4) takes the tiled copy.
const QWeightView& view_for(const DevQ& d, const QMatvecConfig& c) { return c.integer == 4 ? d.tview : d.view; }

// ops::linear over row slices on all cores; y: [T, rows]
void ref_linear_parallel(const Matrix& W, const float* x, int64_t T, float* y) {
  const int nt = static_cast<int>(std::max(1u, std::min(32u, std::thread::hardware_concurrency())));
  const int64_t per = (W.rows + nt - 1) / nt;
  std::vector<std::thread> th;
  for (int i = 0; i < nt; ++i) {
    const int64_t r0 = i * per, n = std::min(per, W.rows - r0);
    if (n <= 0) break;
    th.emplace_back([&, r0, n] {
      std::vector<float> tmp(static_cast<size_t>(n * T));
      ops::linear(W.row_slice(r0, n), x, T, tmp.data());
      for (int64_t t = 0; t < T; ++t)
        std::memcpy(y + t * W.rows + r0, tmp.data() + t * n, static_cast<size_t>(n) * sizeof(float));
    });
  }
  for (auto& t : th) t.join();
}

// ---------------------------------------------------------------- matvec checks
// 4-bit launch shapes of the tensor-core kernels (shared-memory pipeline {rows a block, -, -,
// stages}; register pipeline {rows a block, groups in flight, warps}) and of the SIMT kernel {rows
// a warp, chunks in flight}; unavailable ones are skipped. kTcConfigs[0] runs for every T.
const QMatvecConfig kTcConfigs[] = {{16, 1, 4, 8}, {32, 1, 4, 8}, {32, 1, 4, 6},
                                    {32, 2, 4, 0}, {16, 4, 2, 0}, {16, 2, 4, 0}};
const QMatvecConfig kSimtConfigs[] = {{4, 2}, {4, 4}, {2, 4}, {8, 1}, {2, 2}, {4, 1}};
// 8-bit SIMT shapes {rows a warp, chunks in flight}: the T <= 4 default, the router shapes, T >= 5's
const QMatvecConfig kSimt8Configs[] = {{4, 2}, {1, 4}, {2, 2}, {4, 1}};
// integer kernel {rows a batch, chunks in flight}; kIntConfigs[0] is the reference shape of the bitwise checks (the default is R=fit)
// unavailable (shape, T) pairs are skipped
// (register kernel: integer 1; pipelined kernel: integer 2 {rows a batch, 1, 0, stages})
const QMatvecConfig kIntConfigs[] = {{4, 1, 0, 0, 1}, {2, 2, 0, 0, 1}, {2, 1, 0, 0, 1}, {3, 1, 0, 0, 1},
                                     {4, 2, 0, 0, 1}, {8, 1, 0, 0, 1}, {-1, 1, 0, 0, 1},  // -1: R picked per launch (fit)
                                     {4, 1, 0, 3, 2}, {2, 1, 0, 4, 2},
                                     // double-buffered register kernel (T = 1): {rows a batch, 1, 0, 2, 1}
                                     {2, 1, 0, 2, 1}, {4, 1, 0, 2, 1}, {8, 1, 0, 2, 1},
                                     // tensor-core integer kernel (integer 3): {16 rows a warp, 1, 0, ring stages}
                                     {16, 1, 0, 8, 3}, {16, 1, 0, 16, 3}};
// group-integer tensor-core kernel (integer 4, its own contract): {16, 1 ring / 2 two batches,
// groups a step (0: 1 ring, 2 batches), ring depth or batch size (0: by T)}; [6] = the batches'
// default (benched at every T)
const QMatvecConfig kGmConfigs[] = {{16, 1, 0, 0, 4}, {16, 1, 2, 6, 4}, {16, 1, 2, 4, 4}, {16, 1, 2, 8, 4},
                                    {16, 1, 4, 4, 4}, {16, 1, 4, 8, 4}, {16, 2, 0, 0, 4}, {16, 2, 4, 4, 4},
                                    {16, 2, 2, 2, 4}};
QMatvecConfig simt_config(int64_t T) { return T <= 4 ? QMatvecConfig{4, 2} : QMatvecConfig{4, 1}; }
std::string cfg_name(const QMatvecConfig& c) {
  char b[64];
  if (c.integer == 2)
    std::snprintf(b, sizeof(b), "pipe R=%d D=%d", c.rows_per_warp, c.stages);
  else if (c.integer == 3)
    std::snprintf(b, sizeof(b), "mma D=%d", c.stages);
  else if (c.integer == 4)
    std::snprintf(b, sizeof(b), "gmma P=%d G=%d%s", c.stages, c.warps, c.unroll == 2 ? " db" : "");
  else if (c.integer && c.rows_per_warp < 0)
    std::snprintf(b, sizeof(b), "R=fit U=%d", c.unroll);
  else if (c.integer)
    std::snprintf(b, sizeof(b), "R=%d U=%d", c.rows_per_warp, c.unroll);
  else if (c.stages > 0)
    std::snprintf(b, sizeof(b), "R=%d S=%d", c.rows_per_warp / 16, c.stages);
  else if (c.rows_per_warp >= 16)
    std::snprintf(b, sizeof(b), "W=%d R=%d U=%d", c.warps, c.rows_per_warp / 16, c.unroll);
  else
    std::snprintf(b, sizeof(b), "R=%d U=%d", c.rows_per_warp, c.unroll);
  return b;
}

// x for the matvec checks: uniform in [-1, 1), or (wide) each group of 64 scaled by 10^k, k in
// [-20, 20], with all-zero groups, a subnormal group and an all-zero row (the tensor-core kernel
// picks a power of two per token and group)
std::vector<float> matvec_x(int64_t T, int64_t cols, uint64_t seed, bool wide) {
  std::vector<float> x = random_vec(static_cast<size_t>(T * cols), seed);
  if (!wide) return x;
  Rng r(seed + 7);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t g = 0; g < cols / 64; ++g) {
      const int k = static_cast<int>(r.next() % 41) - 20;
      const uint64_t kind = r.next() % 16;
      const float f = kind == 0 ? 0.0f : (kind == 1 ? 1e-39f : std::pow(10.0f, static_cast<float>(k)));
      for (int64_t c = 0; c < 64; ++c) x[static_cast<size_t>(t * cols + g * 64 + c)] *= f;
    }
  for (int64_t c = 0; c < cols; ++c) x[static_cast<size_t>(2 * cols + c)] = 0.0f;  // row 2 all zero
  return x;
}

// The group-integer contract (qmatvec.h "4-bit, group integer") computed on the host from the
// digits and {2^-e, sum} that qmatvec_prepare left in ws for T rows: y [T, rows] exactly as the
// kernel must give it (exact integer digit sums a group, one fp32 fma chain a K-split in group
// order, the splits added in order), so every reshaping of the kernel is held to the same bits.
std::vector<float> gm_contract_host(CudaDevice& dev, const HostQ& q, const DeviceBuffer& ws, int64_t T) {
  const int64_t rows = q.rows, cols = q.cols, ng = cols / 64;
  const prep::Layout L = prep::layout(ws.as<float>(), T, cols, 4);
  std::vector<int8_t> dg(static_cast<size_t>(ng * 3 * T * 64));  // [group][digit][T][quarter] 16 bytes
  std::vector<float> sx(static_cast<size_t>(ng * T * 2));         // [group][T] {2^-e, sum}
  MERE_CUDA_CHECK(cudaMemcpy(dg.data(), L.gdg, dg.size(), cudaMemcpyDeviceToHost));
  MERE_CUDA_CHECK(cudaMemcpy(sx.data(), L.gsx2, sx.size() * 4, cudaMemcpyDeviceToHost));
  std::vector<int32_t> X(static_cast<size_t>(T * cols), 0);  // the exact integers x * 2^e
  for (int64_t G = 0; G < ng; ++G)
    for (int d = 0; d < 3; ++d)
      for (int64_t t = 0; t < T; ++t)
        for (int qq = 0; qq < 4; ++qq)
          for (int i = 0; i < 16; ++i) {  // qmatvec_prep.cuh gm_emit's byte order
            const int col = i & 7, word = 2 * (i >> 3) + (col & 1), byte = col >> 1;
            const int v = dg[static_cast<size_t>((((G * 3 + d) * T + t) * 4 + qq) * 16 + word * 4 + byte)];
            X[static_cast<size_t>(t * cols + G * 64 + qq * 16 + i)] += v * (1 << (8 * d));
          }
  const int S = mere::cuda::detail::q4gm_splits(rows, cols, dev.sm_count());
  std::vector<float> y(static_cast<size_t>(T * rows));
  const int nt = static_cast<int>(std::max(1u, std::min(32u, std::thread::hardware_concurrency())));
  std::vector<std::thread> th;
  for (int w = 0; w < nt; ++w)
    th.emplace_back([&, w] {
      for (int64_t r = w; r < rows; r += nt)
        for (int64_t t = 0; t < T; ++t) {
          float out = 0.0f;
          for (int s = 0; s < S; ++s) {
            float acc = 0.0f;
            for (int64_t G = ng * s / S; G < ng * (s + 1) / S; ++G) {
              int64_t V = 0;
              for (int c = 0; c < 64; ++c) {
                const int64_t col = G * 64 + c;
                const uint32_t code = (q.codes[static_cast<size_t>(r * cols / 8 + col / 8)] >> (4 * (col % 8))) & 15u;
                V += static_cast<int64_t>(code) * X[static_cast<size_t>(t * cols + col)];
              }
              const float* gs = &sx[static_cast<size_t>((G * T + t) * 2)];
              const float sc = bf16_to_f32(q.scales[static_cast<size_t>(r * ng + G)]);
              const float bi = bf16_to_f32(q.biases[static_cast<size_t>(r * ng + G)]);
              const float qx = static_cast<float>(static_cast<int32_t>(V)) * gs[0];
              acc = std::fma(sc, qx, std::fma(bi, gs[1], acc));
            }
            out = s == 0 ? acc : out + acc;
          }
          y[static_cast<size_t>(t * rows + r)] = out;
        }
    });
  for (auto& x : th) x.join();
  return y;
}

void check_qmatvec_shape(CudaDevice& dev, int64_t rows, int64_t cols, int bits, const std::vector<int>& ref_Ts,
                         uint64_t seed, bool wide = false) {
  const HostQ hq = random_q(rows, cols, bits, seed);
  DevQ dq = upload_q(dev, hq);
  const int64_t TM = kMaxSkinnyRows;
  const std::vector<float> x = matvec_x(TM, cols, seed + 1, wide);
  DeviceBuffer dx = to_device(dev, x, "test x");
  DeviceBuffer ws = dev.alloc(static_cast<size_t>(qmatvec_workspace_floats(TM, cols, bits)) * 4, "test workspace");
  DeviceBuffer dy = dev.alloc(static_cast<size_t>(TM * rows) * 4, "test y");
  char tag[112];
  std::snprintf(tag, sizeof(tag), "q%dmatvec%s[%lldx%lld]", bits, wide ? "-widex" : "", static_cast<long long>(rows),
                static_cast<long long>(cols));
  auto run = [&](int64_t T, const float* xin, const QMatvecConfig& c) {
    poison(dev, dy);
    if (c.rows_per_warp == 0) {
      qlinear(dev, dq.view, xin, T, ws.as<float>(), dy.as<float>());
    } else {
      qmatvec_prepare(dev, xin, T, cols, bits, ws.as<float>());
      qmatvec(dev, view_for(dq, c), ws.as<float>(), T, dy.as<float>(), c);
    }
    return from_device<float>(dev, dy, static_cast<size_t>(T * rows));
  };
  // rows of a T-row result that differ bitwise from the 1-row results y1 (first one named in `first`)
  auto mismatches = [&](const std::vector<float>& got, int64_t T, const std::vector<std::vector<float>>& y1,
                        std::string* first) {
    int64_t bad = 0;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t r = 0; r < rows; ++r)
        if (std::memcmp(&got[static_cast<size_t>(t * rows + r)], &y1[t][static_cast<size_t>(r)], 4) != 0) {
          if (bad++ == 0 && first) *first = "T=" + std::to_string(T) + " t=" + std::to_string(t) + " r=" + std::to_string(r);
        }
    return bad;
  };

  // 1-row results of the default path (4-bit: tensor cores) for each of the 9 inputs
  std::vector<std::vector<float>> y1(TM), y1s(TM);
  for (int64_t t = 0; t < TM; ++t) y1[t] = run(1, dx.as<float>() + t * cols, QMatvecConfig{});
  // against the CPU reference (4-bit: the SIMT fallback too)
  for (int T : ref_Ts) {
    std::vector<float> ref(static_cast<size_t>(T * rows));
    ref_linear_parallel(hq.view(), x.data(), T, ref.data());
    const std::vector<float> got = run(T, dx.as<float>(), QMatvecConfig{});
    record(std::string(tag) + " T=" + std::to_string(T) + " vs ops::linear", compare(got.data(), ref.data(), got.size(), 1e-4, 1e-3),
           1e-9);
    if (bits == 4) {  // both 4-bit kernels, whichever is the default
      const std::vector<float> gs = run(T, dx.as<float>(), simt_config(T));
      record(std::string(tag) + " SIMT T=" + std::to_string(T) + " vs ops::linear",
             compare(gs.data(), ref.data(), gs.size(), 1e-4, 1e-3), 1e-9);
      const std::vector<float> gt = run(T, dx.as<float>(), kTcConfigs[0]);
      record(std::string(tag) + " tensor cores T=" + std::to_string(T) + " vs ops::linear",
             compare(gt.data(), ref.data(), gt.size(), 1e-4, 1e-3), 1e-9);
      const std::vector<float> gg = run(T, dx.as<float>(), kGmConfigs[0]);
      record(std::string(tag) + " group mma T=" + std::to_string(T) + " vs ops::linear",
             compare(gg.data(), ref.data(), gg.size(), 1e-4, 1e-3), 1e-9);
    }
  }
  // batch-width invariance: every row of a T-row call equals the 1-row call, bitwise
  int64_t bad = 0;
  std::string first;
  for (int64_t T = 2; T <= TM; ++T) bad += mismatches(run(T, dx.as<float>(), QMatvecConfig{}), T, y1, &first);
  record_bool(std::string(tag) + " batch invariance T=1..9 bitwise", bad == 0,
              bad == 0 ? "all rows equal" : std::to_string(bad) + " mismatches, first " + first);
  // one kernel family: every compiled launch shape at T = 1..9 gives bitwise the 1-row results of
  // the family's first shape
  auto family_bitwise = [&](const char* what, const QMatvecConfig* cfgs, size_t ncfg) {
    std::vector<std::vector<float>> y1f(TM);
    for (int64_t t = 0; t < TM; ++t) y1f[t] = run(1, dx.as<float>() + t * cols, cfgs[0]);
    int64_t badf = 0;
    int calls = 0;
    std::string firstf;
    for (int T = 1; T <= TM; ++T)
      for (size_t k = 0; k < ncfg; ++k)
        if (qmatvec_config_available(bits, T, cfgs[k])) {
          ++calls;
          badf += mismatches(run(T, dx.as<float>(), cfgs[k]), T, y1f, &firstf);
        }
    record_bool(std::string(tag) + " " + what + ": all launch shapes x T=1..9 bitwise", badf == 0,
                std::to_string(calls) + " calls, " + std::to_string(badf) + " mismatches" +
                    (badf ? ", first " + firstf : std::string()));
  };
  if (bits == 8) {  // the 8-bit SIMT shapes (MERE_CUDA_Q8_SHAPE picks one for T <= 4)
    family_bitwise("8-bit SIMT", kSimt8Configs, std::size(kSimt8Configs));
    return;
  }
  // each 4-bit kernel family on its own (whichever is the default): the integer kernel (the
  // default), the tensor cores (both pipelines), SIMT (T = 2..9 of its default shapes and all shapes
  // at T = 1, 2)
  family_bitwise("integer", kIntConfigs, std::size(kIntConfigs));
  family_bitwise("tensor cores", kTcConfigs, std::size(kTcConfigs));
  family_bitwise("group mma", kGmConfigs, std::size(kGmConfigs));
  // the group-integer kernel (the ring default and the two batches) against its contract on the host
  if (rows <= 17408) {
    int64_t badc = 0;
    std::string firstc;
    for (int64_t T : {int64_t{1}, int64_t{8}, TM}) {
      std::vector<float> want;  // from the digits the first run leaves in ws (every run prepares the same)
      for (const QMatvecConfig& c : {kGmConfigs[0], kGmConfigs[6]}) {
        const std::vector<float> got = run(T, dx.as<float>(), c);
        if (want.empty()) want = gm_contract_host(dev, hq, ws, T);
        for (size_t i = 0; i < got.size(); ++i)
          if (std::memcmp(&got[i], &want[i], 4) != 0 && !(std::isnan(got[i]) && std::isnan(want[i]))) {
            if (badc++ == 0)
              firstc = cfg_name(c) + " T=" + std::to_string(T) + " t=" + std::to_string(static_cast<int64_t>(i) / rows) + " r=" +
                       std::to_string(static_cast<int64_t>(i) % rows) + ": " + std::to_string(got[i]) + " vs " + std::to_string(want[i]);
          }
      }
    }
    record_bool(std::string(tag) + " group mma T=1,8,9 (ring, batches) vs the contract on the host, bitwise", badc == 0,
                badc == 0 ? "all equal" : std::to_string(badc) + " mismatches, first " + firstc);
  }
  for (int64_t t = 0; t < TM; ++t) y1s[t] = run(1, dx.as<float>() + t * cols, simt_config(1));
  bad = 0;
  for (int64_t T = 2; T <= TM; ++T) bad += mismatches(run(T, dx.as<float>(), simt_config(T)), T, y1s, nullptr);
  for (int T = 1; T <= 2; ++T)
    for (const auto& c : kSimtConfigs)
      if (qmatvec_config_available(bits, T, c)) bad += mismatches(run(T, dx.as<float>(), c), T, y1s, nullptr);
  record_bool(std::string(tag) + " SIMT: launch shapes + T=1..9 bitwise", bad == 0, std::to_string(bad) + " mismatches");
}

// qmatvec_multi (SIMT): matrices of different heights in one launch, one of them accumulating into
// its y; every row must equal the single-matrix call bitwise (accumulate: y0 + that, one fp32 add),
// for T = 1..9 and the SIMT launch shapes.
void check_qmatvec_multi(CudaDevice& dev, int bits, uint64_t seed) {
  const int64_t cols = 5120, TM = kMaxSkinnyRows;
  const int64_t heights[] = {10240, 6144, 48, 33};  // 27B in_proj_qkv, z, b, a (+ an odd height)
  std::vector<HostQ> hq;
  std::vector<DevQ> dq;
  for (int i = 0; i < 4; ++i) hq.push_back(random_q(heights[i], cols, bits, seed + i));
  for (int i = 0; i < 4; ++i) dq.push_back(upload_q(dev, hq[i]));
  const std::vector<float> x = matvec_x(TM, cols, seed + 9, false);
  DeviceBuffer dx = to_device(dev, x, "test x");
  DeviceBuffer ws = dev.alloc(static_cast<size_t>(qmatvec_workspace_floats(TM, cols, bits)) * 4, "test workspace");
  std::vector<float> y0 = random_vec(static_cast<size_t>(TM * heights[3]), seed + 11);  // accumulator start
  std::vector<DeviceBuffer> dy;
  for (int i = 0; i < 4; ++i) dy.push_back(dev.alloc(static_cast<size_t>(TM * heights[i]) * 4, "test y"));
  int64_t bad = 0, calls = 0;
  // one kernel family: its single-matrix calls (reference config ref) against multi launches of
  // every compiled shape in cfgs
  auto family = [&](int64_t T, const QMatvecConfig& ref, const QMatvecConfig* cfgs, size_t ncfg) {
    std::vector<std::vector<float>> single(4);
    for (int i = 0; i < 4; ++i) {
      poison(dev, dy[i]);
      qmatvec(dev, view_for(dq[i], ref), ws.as<float>(), T, dy[i].as<float>(), ref);
      single[i] = from_device<float>(dev, dy[i], static_cast<size_t>(T * heights[i]));
    }
    for (size_t j = 0; j < single[3].size(); ++j) single[3][j] = y0[j] + single[3][j];  // the accumulated one
    for (size_t k = 0; k < ncfg; ++k) {
      const QMatvecConfig& c = cfgs[k];
      if (!qmatvec_config_available(bits, T, c)) continue;
      ++calls;
      for (int i = 0; i < 3; ++i) poison(dev, dy[i]);
      MERE_CUDA_CHECK(cudaMemcpy(dy[3].get(), y0.data(), static_cast<size_t>(T * heights[3]) * 4, cudaMemcpyHostToDevice));
      QMatvecOut outs[4];
      for (int i = 0; i < 4; ++i) outs[i] = QMatvecOut{view_for(dq[i], c), dy[i].as<float>(), i == 3};
      qmatvec_multi(dev, outs, 4, ws.as<float>(), T, c);
      for (int i = 0; i < 4; ++i) {
        const auto got = from_device<float>(dev, dy[i], static_cast<size_t>(T * heights[i]));
        bad += std::memcmp(got.data(), single[i].data(), got.size() * 4) != 0;
      }
    }
  };
  for (int64_t T = 1; T <= TM; ++T) {
    qmatvec_prepare(dev, dx.as<float>(), T, cols, bits, ws.as<float>());
    family(T, simt_config(T), kSimtConfigs, std::size(kSimtConfigs));
    if (bits == 4) family(T, kIntConfigs[0], kIntConfigs, std::size(kIntConfigs));
    if (bits == 4) family(T, kGmConfigs[0], kGmConfigs, std::size(kGmConfigs));
  }
  record_bool("q" + std::to_string(bits) + "matvec_multi 4 matrices (one accumulating) vs single calls, T=1..9 x SIMT (+ integer, group mma) shapes bitwise",
              bad == 0, std::to_string(calls) + " launches, " + std::to_string(bad) + " matrices differ");
}

// Tiled 4-bit weights (the group-integer kernel's layout): the chunked host upload equals the device
// permutation byte for byte; qgemm (prefill) on the tiled copy equals qgemm on the MLX bytes bitwise;
// a tiled matrix under another kernel's config, a mixed launch and the group-integer config on MLX
// bytes are clear errors.
void check_tiled(CudaDevice& dev, uint64_t seed) {
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{1000, 5120}, {33, 17408}, {7, 64}}) {
    const HostQ hq = random_q(rows, cols, 4, seed++);
    DevQ dq = upload_q(dev, hq);
    const QTiledBytes tb = qmatvec_tiled_bytes(rows, cols);
    DeviceBuffer c2 = dev.alloc(tb.codes, "tiled codes"), s2 = dev.alloc(tb.sb, "tiled sb");
    qmatvec_tile_device(dev, dq.view, c2.get(), s2.get());
    const bool same = from_device<uint8_t>(dev, dq.tcodes, tb.codes) == from_device<uint8_t>(dev, c2, tb.codes) &&
                      from_device<uint8_t>(dev, dq.tsb, tb.sb) == from_device<uint8_t>(dev, s2, tb.sb);
    char tag[96];
    std::snprintf(tag, sizeof(tag), "tiled q4 [%lldx%lld]", static_cast<long long>(rows), static_cast<long long>(cols));
    record_bool(std::string(tag) + " chunked upload == device permutation", same, same ? "bytes equal" : "bytes differ");
    for (int64_t T : {5, 37}) {
      const std::vector<float> x = random_vec(static_cast<size_t>(T * cols), seed++);
      DeviceBuffer dx = to_device(dev, x, "x");
      DeviceBuffer xq = dev.alloc(static_cast<size_t>(T * cols) * 2, "xq");
      DeviceBuffer y1 = dev.alloc(static_cast<size_t>(T * rows) * 4, "y1"), y2 = dev.alloc(static_cast<size_t>(T * rows) * 4, "y2");
      qgemm_prepare_x(dev, dx.as<float>(), T, cols, cols, xq.as<uint16_t>());
      DeviceBuffer gws = dev.alloc(static_cast<size_t>(std::max<int64_t>(1, qgemm_workspace_floats(dev, dq.view, T))) * 4, "gws");
      qgemm(dev, dq.view, xq.as<uint16_t>(), T, y1.as<float>(), rows, gws.as<float>());
      qgemm(dev, dq.tview, xq.as<uint16_t>(), T, y2.as<float>(), rows, gws.as<float>());
      const bool eq = from_device<float>(dev, y1, static_cast<size_t>(T * rows)) == from_device<float>(dev, y2, static_cast<size_t>(T * rows));
      record_bool(std::string(tag) + " qgemm T=" + std::to_string(T) + " tiled == MLX bitwise", eq, eq ? "equal" : "differ");
    }
    auto throws = [&](const char* what, const std::function<void()>& f) {
      bool threw = false;
      try {
        f();
      } catch (const std::exception&) {
        threw = true;
      }
      record_bool(std::string(tag) + " " + what + " is an error", threw, threw ? "mere::Error" : "accepted");
    };
    DeviceBuffer ws = dev.alloc(static_cast<size_t>(qmatvec_workspace_floats(1, cols, 4)) * 4, "ws");
    DeviceBuffer y = dev.alloc(static_cast<size_t>(rows) * 8, "y");
    throws("tiled matrix under the integer kernel's config", [&] {
      qmatvec(dev, dq.tview, ws.as<float>(), 1, y.as<float>(), QMatvecConfig{4, 1, 0, 0, 1});
    });
    throws("group-integer config on MLX bytes", [&] {
      qmatvec(dev, dq.view, ws.as<float>(), 1, y.as<float>(), QMatvecConfig{16, 1, 0, 0, 4});
    });
    throws("mixed tiled / MLX launch", [&] {
      const QMatvecOut o[2] = {{dq.tview, y.as<float>(), false}, {dq.view, y.as<float>() + rows, false}};
      qmatvec_multi(dev, o, 2, ws.as<float>(), 1);
    });
  }
}

void check_qmatvec(CudaDevice& dev, bool quick) {
  check_tiled(dev, 900);
  const std::vector<int> all = {1, 3, 9};
  const int64_t breaking_rows[] = {1, 7, 31, 32, 33, 64, 65, 257};
  const int64_t breaking_cols[] = {64, 192, 1088, 4160, 320, 64, 1088, 4160};
  uint64_t seed = 100;
  for (int i = 0; i < 8; ++i) {
    check_qmatvec_shape(dev, breaking_rows[i], breaking_cols[i], 4, all, ++seed);
    check_qmatvec_shape(dev, breaking_rows[i], breaking_cols[(i + 3) % 8], 8, all, ++seed);
  }
  check_qmatvec_shape(dev, 257, 4160, 4, all, ++seed, true);  // x over 40 decades, zero groups and rows
  check_qmatvec_shape(dev, 33, 17408, 4, all, ++seed);
  check_qmatvec_shape(dev, 512, 2048, 4, all, ++seed);  // 35B-A3B expert gate/up
  check_qmatvec_shape(dev, 2048, 512, 4, all, ++seed);  // 35B-A3B expert down
  check_qmatvec_shape(dev, 2048, 512, 8, all, ++seed);
  // a whole and a half 512-column iteration a row, odd rows
  check_qmatvec_shape(dev, 65, 1536, 4, all, seed + 1000);
  check_qmatvec_shape(dev, 257, 2048, 8, all, seed + 1001);  // the 35B-A3B router + shared gate (8-bit)
  if (quick) return;
  check_qmatvec_shape(dev, 17408, 5120, 4, all, ++seed);  // 27B gate/up
  check_qmatvec_shape(dev, 5120, 17408, 4, all, ++seed);  // 27B down
  check_qmatvec_shape(dev, 12288, 5120, 4, all, ++seed);  // 27B q_proj (with gate)
  check_qmatvec_shape(dev, 10240, 5120, 4, all, ++seed);  // 27B in_proj_qkv
  check_qmatvec_shape(dev, 17408, 5120, 8, {1, 9}, ++seed);
  check_qmatvec_shape(dev, 248320, 5120, 4, {1, 9}, ++seed);  // lm_head
  check_qmatvec_multi(dev, 4, ++seed);
  check_qmatvec_multi(dev, 8, ++seed);
}

// ---------------------------------------------------------------- rms norm
void check_rms_norm(CudaDevice& dev) {
  const int64_t ns[] = {5120, 2048, 256, 1, 33, 4097};
  const int64_t Ts[] = {1, 9, 4, 3, 7, 2};
  for (int i = 0; i < 6; ++i) {
    const int64_t n = ns[i], T = Ts[i];
    const auto x = random_vec(static_cast<size_t>(T * n), 500 + i, -3.0f, 3.0f);
    const auto w = random_vec(static_cast<size_t>(n), 600 + i, 0.5f, 1.5f);
    DeviceBuffer dx = to_device(dev, x, "x"), dw = to_device(dev, w, "w");
    DeviceBuffer dy = dev.alloc(x.size() * 4, "y");
    poison(dev, dy);
    rms_norm(dev, dx.as<float>(), dw.as<float>(), T, n, 1e-6f, dy.as<float>());
    const auto got = from_device<float>(dev, dy, x.size());
    std::vector<float> ref(x.size());
    ops::rms_norm(x.data(), w.data(), T, n, 1e-6f, ref.data());
    record("rms_norm[T=" + std::to_string(T) + ",n=" + std::to_string(n) + "] vs ops::rms_norm",
           compare(got.data(), ref.data(), got.size(), 1e-5, 1e-5), 1e-11);
    // row 0 alone equals row 0 of the T-row call
    if (T > 1) {
      DeviceBuffer d1 = dev.alloc(static_cast<size_t>(n) * 4, "y1");
      poison(dev, d1);
      rms_norm(dev, dx.as<float>() + (T - 1) * n, dw.as<float>(), 1, n, 1e-6f, d1.as<float>());
      const auto one = from_device<float>(dev, d1, static_cast<size_t>(n));
      record_bool("rms_norm[n=" + std::to_string(n) + "] batch invariance", std::memcmp(one.data(), got.data() + (T - 1) * n, n * 4) == 0,
                  "last row alone vs in batch");
    }
  }
}

// The engine's producers write only the 4-bit parts the process's matvec kernels read
// (prep::producer_parts; the integer layout by default): k::swiglu_prep and k::rms_norm_prep against
// the producer without the prepare followed by qmatvec_prepare (every part): the parts the producers
// write bitwise, at the 27B / 35B-A3B widths and an odd group count, T = 1 and 8.
void check_producer_parts(CudaDevice& dev) {
  const int parts = prep::producer_parts();
  int ci = 0;
  for (const int64_t cols : {17408, 5120, 2048, 192})
    for (const int64_t T : {1, 8}) {
      const auto g = random_vec(static_cast<size_t>(T * cols), 900 + ci, -4.0f, 4.0f);
      const auto u = random_vec(static_cast<size_t>(T * cols), 910 + ci, -2.0f, 2.0f);
      const auto w = random_vec(static_cast<size_t>(cols), 920 + ci, 0.5f, 1.5f);
      const size_t wsf = static_cast<size_t>(qmatvec_workspace_floats(T, cols, 4));
      auto ws = [&](const char* what) {
        DeviceBuffer b = dev.alloc(wsf * 4, what);
        dev.fill_bytes(b.get(), 0, wsf * 4);  // unwritten padding must compare equal
        return b;
      };
      DeviceBuffer dg = to_device(dev, g, "g"), du = to_device(dev, u, "u"), dw = to_device(dev, w, "w");
      DeviceBuffer ref_ws = ws("reference workspace"), got_ws = ws("producer workspace");
      // SwiGLU: the product in place, then every part
      DeviceBuffer gp = to_device(dev, g, "g product");
      k::swiglu(dev.stream(), gp.as<float>(), du.as<float>(), T * cols);
      qmatvec_prepare(dev, gp.as<float>(), T, cols, 4, ref_ws.as<float>());
      k::swiglu_prep(dev.stream(), dg.as<float>(), du.as<float>(), T, cols, 4, got_ws.as<float>());
      // RMSNorm: y, then every part (x = u; y written by both)
      DeviceBuffer ny = dev.alloc(static_cast<size_t>(T * cols) * 4, "y"), py = dev.alloc(static_cast<size_t>(T * cols) * 4, "y");
      DeviceBuffer nref = ws("norm reference workspace"), ngot = ws("norm producer workspace");
      k::rms_norm(dev.stream(), du.as<float>(), cols, dw.as<float>(), T, cols, 1e-6f, ny.as<float>(), cols);
      qmatvec_prepare(dev, ny.as<float>(), T, cols, 4, nref.as<float>());
      k::rms_norm_prep(dev.stream(), du.as<float>(), nullptr, dw.as<float>(), T, cols, 1e-6f, py.as<float>(), 4,
                       ngot.as<float>());
      auto same_parts = [&](DeviceBuffer& a, DeviceBuffer& b) {
        const auto x = from_device<uint32_t>(dev, a, wsf), y = from_device<uint32_t>(dev, b, wsf);
        auto eq = [&](int64_t from, int64_t n) {
          return std::equal(x.begin() + from, x.begin() + from + n, y.begin() + from);
        };
        bool ok = true;
        if (parts & prep::kPartSimt) ok = ok && eq(0, prep::simt_floats(T, cols, 4));
        if (parts & prep::kPartFrag) ok = ok && eq(prep::tc_offset(T, cols), prep::tc_floats(T, cols));
        if (parts & prep::kPartInt) ok = ok && eq(prep::int_offset(T, cols), prep::int_floats(T, cols));
        if (parts & prep::kPartGm) ok = ok && eq(prep::gm_offset(T, cols), prep::gm_floats(T, cols));
        return ok;
      };
      const bool sw = same_parts(ref_ws, got_ws), nm = same_parts(nref, ngot);
      const bool ys = from_device<uint32_t>(dev, ny, g.size()) == from_device<uint32_t>(dev, py, g.size());
      record_bool("producer parts (mask " + std::to_string(parts) + ") [cols=" + std::to_string(cols) + ",T=" +
                      std::to_string(T) + "] swiglu_prep, rms_norm_prep vs qmatvec_prepare",
                  sw && nm && ys && (parts & prep::kPartInt),
                  std::string(sw ? "" : "swiglu parts differ; ") + (nm ? "" : "norm parts differ; ") +
                      (ys ? "" : "norm y differs; ") + ((parts & prep::kPartInt) ? "bitwise" : "no integer part"));
      ++ci;
    }
}

// The 4-bit launch that computes its input itself (qmatvec_src_multi: the engine's RMSNorms, gated
// norms and attention gates at T = 1) against the producer (k::rms_norm_prep, k::gated_rms_norm_prep,
// k::sigmoid_gate_prep) + qmatvec_multi on its workspace: every row bitwise (NaN as NaN), for every
// register shape and the default, three matrices in one launch (one accumulating), at the 27B /
// 35B-A3B / 0.8B widths and heads, a partial last span (2112 = 66 chunks) and one group; x uniform,
// groups scaled by 10^-20..10^20 with zero and subnormal groups, an all-zero row, a NaN.
void check_src_matvec(CudaDevice& dev) {
  using Kind = QMatvecSource::Kind;
  struct Case {
    Kind kind;
    int64_t cols, hd;
  };
  const Case cases[] = {{Kind::RmsNorm, 5120, 0},       {Kind::RmsNorm, 2048, 0},       {Kind::RmsNorm, 2112, 0},
                        {Kind::RmsNorm, 1024, 0},       {Kind::RmsNorm, 64, 0},         {Kind::GatedRmsNorm, 6144, 128},
                        {Kind::GatedRmsNorm, 4096, 128}, {Kind::GatedRmsNorm, 1024, 64}, {Kind::SigmoidGate, 6144, 256},
                        {Kind::SigmoidGate, 4096, 256},  {Kind::SigmoidGate, 1024, 128}};
  const char* names[] = {"rms norm", "gated norm", "sigmoid gate"};
  const int64_t heights[] = {1000, 48, 33};
  int ci = 0;
  for (const Case& c : cases) {
    const int64_t cols = c.cols;
    std::vector<HostQ> hq;
    std::vector<DevQ> dq;
    for (int i = 0; i < 3; ++i) hq.push_back(random_q(heights[i], cols, 4, 950 + 10 * ci + i));
    for (int i = 0; i < 3; ++i) dq.push_back(upload_q(dev, hq[i]));
    const int64_t wn = c.kind == Kind::GatedRmsNorm ? c.hd : cols;
    const auto w = random_vec(static_cast<size_t>(wn), 990 + ci, 0.5f, 1.5f);
    // z: the gated norm's gate [cols]; the attention's q + gate rows [heads, 2, hd]
    const auto z = random_vec(static_cast<size_t>(c.kind == Kind::SigmoidGate ? 2 * cols : cols), 995 + ci, -4.0f, 4.0f);
    const auto wide = matvec_x(3, cols, 1000 + ci, true);  // row 2 all zero
    std::vector<std::vector<float>> xs = {random_vec(static_cast<size_t>(cols), 1010 + ci, -3.0f, 3.0f),
                                          std::vector<float>(wide.begin(), wide.begin() + cols),
                                          std::vector<float>(wide.begin() + 2 * cols, wide.end())};
    xs.push_back(xs[0]);
    xs.back()[static_cast<size_t>(cols / 3)] = std::nanf("");
    const std::vector<float> y0 = random_vec(static_cast<size_t>(heights[2]), 1020 + ci);  // accumulator start
    DeviceBuffer dw = to_device(dev, w, "w"), dz = to_device(dev, z, "z");
    const size_t wsf = static_cast<size_t>(qmatvec_workspace_floats(1, cols, 4));
    DeviceBuffer ws = dev.alloc(wsf * 4, "workspace"), yn = dev.alloc(static_cast<size_t>(cols) * 4, "y");
    std::vector<DeviceBuffer> dy;
    for (int i = 0; i < 3; ++i) dy.push_back(dev.alloc(static_cast<size_t>(heights[i]) * 4, "out"));
    QMatvecOut outs[3];
    for (int i = 0; i < 3; ++i) outs[i] = QMatvecOut{dq[i].view, dy[i].as<float>(), i == 2};
    auto run = [&]() {
      std::vector<float> all;
      for (int i = 0; i < 3; ++i) {
        const auto v = from_device<float>(dev, dy[i], static_cast<size_t>(heights[i]));
        all.insert(all.end(), v.begin(), v.end());
      }
      return all;
    };
    auto reset = [&] {
      for (int i = 0; i < 2; ++i) poison(dev, dy[i]);
      MERE_CUDA_CHECK(cudaMemcpy(dy[2].get(), y0.data(), static_cast<size_t>(heights[2]) * 4, cudaMemcpyHostToDevice));
    };
    const std::string label = std::string("qmatvec_src ") + names[static_cast<int>(c.kind)] + " [cols=" +
                              std::to_string(cols) + (c.hd ? ",head=" + std::to_string(c.hd) : std::string()) + "]";
    int64_t bad = 0, calls = 0;
    std::string first;
    for (size_t xi = 0; xi < xs.size(); ++xi) {
      DeviceBuffer dx = to_device(dev, xs[xi], "x");
      const QMatvecSource in{c.kind, dx.as<float>(), dw.as<float>(), dz.as<float>(), 1e-6f, static_cast<int>(c.hd)};
      if (!qmatvec_src_supported(outs, 3, in)) {
        record_bool(label, true, "not taken under this MERE_CUDA_QMATVEC");
        break;
      }
      reset();
      if (c.kind == Kind::RmsNorm)
        k::rms_norm_prep(dev.stream(), dx.as<float>(), nullptr, dw.as<float>(), 1, cols, 1e-6f, yn.as<float>(), 4,
                         ws.as<float>());
      else if (c.kind == Kind::GatedRmsNorm)
        k::gated_rms_norm_prep(dev.stream(), dx.as<float>(), dz.as<float>(), dw.as<float>(), 1, cols / c.hd, c.hd,
                               1e-6f, yn.as<float>(), 4, ws.as<float>());
      else
        k::sigmoid_gate_prep(dev.stream(), dx.as<float>(), dz.as<float>(), 1, cols / c.hd, c.hd, 4, ws.as<float>());
      qmatvec_multi(dev, outs, 3, ws.as<float>(), 1, QMatvecConfig{});
      const std::vector<float> want = run();
      std::vector<QMatvecConfig> cfgs = {QMatvecConfig{}};
      for (const QMatvecConfig& cf : kIntConfigs)
        if (cf.integer == 1 && qmatvec_config_available(4, 1, cf)) cfgs.push_back(cf);
      for (const QMatvecConfig& cf : cfgs) {
        reset();
        qmatvec_src_multi(dev, outs, 3, in, cf);
        const std::vector<float> got = run();
        ++calls;
        for (size_t i = 0; i < got.size(); ++i)
          if (std::memcmp(&got[i], &want[i], 4) != 0 && !(std::isnan(got[i]) && std::isnan(want[i]))) {
            if (bad++ == 0)
              first = cfg_name(cf) + " x" + std::to_string(xi) + " out " + std::to_string(i) + ": " +
                      std::to_string(got[i]) + " vs " + std::to_string(want[i]);
            break;
          }
      }
    }
    if (calls > 0)
      record_bool(label + " 3 matrices (one accumulating) vs the producer + qmatvec_multi, every register shape, bitwise",
                  bad == 0, std::to_string(calls) + " launches, " + std::to_string(bad) + " differ" + (bad ? ", first " + first : std::string()));
    ++ci;
  }
}

// ---------------------------------------------------------------- gated delta net
void l2n_rows(std::vector<float>& v, int64_t rows, int64_t d, float mul) {
  for (int64_t r = 0; r < rows; ++r) {
    ops::l2_normalize(v.data() + r * d, d, 1e-6f);
    for (int64_t j = 0; j < d; ++j) v[r * d + j] *= mul;
  }
}

// The engine's step + gated norm + prepare launch (k::gdn_step_norm_prep) against gdn_decode then
// k::gated_rms_norm_prep: o, S, y and the whole prepared workspace bitwise, 4- and 8-bit, two launches
// in a row on the same state (the second finds the head counters reset by the first).
void check_gdn_step_norm(CudaDevice& dev) {
  struct Case { int64_t Hk, Hv, T; };
  const Case cases[] = {{16, 48, 1}, {16, 48, 9}, {16, 32, 1}, {16, 32, 4}, {1, 3, 2}};
  int ci = 0;
  for (const auto& c : cases)
    for (int bits : {4, 8}) {
      const int64_t D = 128, W = c.Hv * D;
      auto S = random_vec(static_cast<size_t>(c.Hv * D * D), 800 + ci, -0.5f, 0.5f);
      auto q = random_vec(static_cast<size_t>(c.T * c.Hk * D), 810 + ci);
      auto k = random_vec(static_cast<size_t>(c.T * c.Hk * D), 820 + ci);
      l2n_rows(q, c.T * c.Hk, D, 1.0f / std::sqrt(128.0f));
      l2n_rows(k, c.T * c.Hk, D, 1.0f);
      const auto v = random_vec(static_cast<size_t>(c.T * W), 830 + ci);
      const auto g = random_vec(static_cast<size_t>(c.T * c.Hv), 840 + ci, -3.0f, -0.01f);
      const auto beta = random_vec(static_cast<size_t>(c.T * c.Hv), 850 + ci, 0.05f, 0.95f);
      const auto z = random_vec(static_cast<size_t>(c.T * W), 860 + ci, -3.0f, 3.0f);
      const auto w = random_vec(static_cast<size_t>(D), 870 + ci, 0.5f, 1.5f);
      const size_t wsf = static_cast<size_t>(qmatvec_workspace_floats(c.T, W, bits));
      struct Run {
        DeviceBuffer S, o, y, ws;
      };
      auto make = [&](const char* what) {
        Run r{to_device(dev, S, what), dev.alloc(static_cast<size_t>(c.T * W) * 4, what),
              dev.alloc(static_cast<size_t>(c.T * W) * 4, what), dev.alloc(wsf * 4, what)};
        poison(dev, r.o);
        poison(dev, r.y);
        dev.fill_bytes(r.ws.get(), 0, wsf * 4);  // unwritten padding must compare equal
        return r;
      };
      DeviceBuffer dq = to_device(dev, q, "q"), dk = to_device(dev, k, "k"), dv = to_device(dev, v, "v"),
                   dg = to_device(dev, g, "g"), db = to_device(dev, beta, "beta"), dz = to_device(dev, z, "z"),
                   dw = to_device(dev, w, "w");
      DeviceBuffer done = dev.alloc(static_cast<size_t>(c.Hv) * 4, "head counters");
      dev.fill_bytes(done.get(), 0, static_cast<size_t>(c.Hv) * 4);
      Run two = make("two launches"), one = make("one launch");
      for (int rep = 0; rep < 2; ++rep) {
        gdn_decode(dev, two.S.as<float>(), dq.as<float>(), dk.as<float>(), dv.as<float>(), dg.as<float>(),
                   db.as<float>(), c.T, c.Hk, c.Hv, D, D, two.o.as<float>());
        k::gated_rms_norm_prep(dev.stream(), two.o.as<float>(), dz.as<float>(), dw.as<float>(), c.T, c.Hv, D, 1e-6f,
                               two.y.as<float>(), bits, two.ws.as<float>());
        k::gdn_step_norm_prep(dev.stream(), one.S.as<float>(), dq.as<float>(), dk.as<float>(), dv.as<float>(),
                              dg.as<float>(), db.as<float>(), c.T, c.Hk, c.Hv, D, D, one.o.as<float>(), dz.as<float>(),
                              dw.as<float>(), 1e-6f, one.y.as<float>(), bits, one.ws.as<float>(),
                              static_cast<unsigned*>(done.get()));
      }
      bool same = true;
      using Pair = std::tuple<DeviceBuffer*, DeviceBuffer*, size_t>;
      for (auto [a, b, n] : std::initializer_list<Pair>{
               {&two.S, &one.S, S.size()}, {&two.o, &one.o, v.size()}, {&two.y, &one.y, v.size()}, {&two.ws, &one.ws, wsf}}) {
        const auto x = from_device<uint32_t>(dev, *a, n), y = from_device<uint32_t>(dev, *b, n);
        same = same && x == y;
      }
      const auto cnt = from_device<uint32_t>(dev, done, static_cast<size_t>(c.Hv));
      const bool reset = std::all_of(cnt.begin(), cnt.end(), [](uint32_t v) { return v == 0; });
      record_bool("gdn_step_norm_prep[Hk=" + std::to_string(c.Hk) + ",Hv=" + std::to_string(c.Hv) + ",T=" +
                      std::to_string(c.T) + "," + std::to_string(bits) + "-bit] vs gdn_decode + gated_rms_norm_prep",
                  same && reset,
                  std::string(same ? "S, o, y, workspace bitwise over 2 launches" : "MISMATCH") +
                      (reset ? "" : "; head counters not reset"));
      ++ci;
    }
}

// The one-launch GDN middle (k::gdn_mid: conv + prepare, the step, the gated norm + prepare, with two
// grid barriers) against conv_gdn_prepare, gdn_decode and gated_rms_norm_prep: conv state, q, k, v, g,
// beta, S, o, y and the whole prepared workspace bitwise, 4- and 8-bit, three launches in a row on the
// same state (the barrier words must come back to zero), traced copies included.
void check_gdn_mid(CudaDevice& dev) {
  struct Case { int64_t Hk, Hv; };
  const Case cases[] = {{16, 48}, {16, 32}, {16, 16}, {1, 3}};
  int ci = 0;
  for (const auto& c : cases)
    for (int bits : {4, 8}) {
      const int64_t D = 128, K = 4, kd = c.Hk * D, vd = c.Hv * D, C = 2 * kd + vd;
      const int grid = k::gdn_mid_grid(c.Hk, D, c.Hv, D, K, bits, dev.sm_count());
      const std::string tag = "gdn_mid[Hk=" + std::to_string(c.Hk) + ",Hv=" + std::to_string(c.Hv) + "," +
                              std::to_string(bits) + "-bit]";
      if (grid <= 0) {
        record_bool(tag, false, "gdn_mid_grid gave no grid");
        continue;
      }
      const uint64_t seed = 1000 + 20 * ci;
      const auto S = random_vec(static_cast<size_t>(vd * D), seed, -0.5f, 0.5f);
      const auto cst = random_vec(static_cast<size_t>((K - 1) * C), seed + 1);
      const auto cw = random_vec(static_cast<size_t>(C * K), seed + 2, -0.7f, 0.7f);
      const auto raw = random_vec(static_cast<size_t>(C), seed + 3, -2.0f, 2.0f);
      const auto av = random_vec(static_cast<size_t>(c.Hv), seed + 4, -2.0f, 2.0f);
      const auto bv = random_vec(static_cast<size_t>(c.Hv), seed + 5, -2.0f, 2.0f);
      const auto na = random_vec(static_cast<size_t>(c.Hv), seed + 6, -1.5f, -0.1f);
      const auto dt = random_vec(static_cast<size_t>(c.Hv), seed + 7, -1.0f, 1.0f);
      const auto z = random_vec(static_cast<size_t>(vd), seed + 8, -3.0f, 3.0f);
      const auto nw = random_vec(static_cast<size_t>(D), seed + 9, 0.5f, 1.5f);
      const size_t wsf = static_cast<size_t>(qmatvec_workspace_floats(1, vd, bits));
      DeviceBuffer dcw = to_device(dev, cw, "conv w"), draw = to_device(dev, raw, "raw"), da = to_device(dev, av, "a"),
                   db = to_device(dev, bv, "b"), dna = to_device(dev, na, "neg_a"), ddt = to_device(dev, dt, "dt_bias"),
                   dz = to_device(dev, z, "z"), dnw = to_device(dev, nw, "norm w");
      struct Run {
        DeviceBuffer S, cst, q, k, v, g, beta, o, y, ws, tr_raw, tr_q, tr_k, tr_v, tr_g, tr_beta;
      };
      auto make = [&](const char* what) {
        Run r{to_device(dev, S, what), to_device(dev, cst, what),
              dev.alloc(static_cast<size_t>(kd) * 4, what), dev.alloc(static_cast<size_t>(kd) * 4, what),
              dev.alloc(static_cast<size_t>(vd) * 4, what), dev.alloc(static_cast<size_t>(c.Hv) * 4, what),
              dev.alloc(static_cast<size_t>(c.Hv) * 4, what), dev.alloc(static_cast<size_t>(vd) * 4, what),
              dev.alloc(static_cast<size_t>(vd) * 4, what), dev.alloc(wsf * 4, what),
              dev.alloc(static_cast<size_t>(C) * 4, what), dev.alloc(static_cast<size_t>(kd) * 4, what),
              dev.alloc(static_cast<size_t>(kd) * 4, what), dev.alloc(static_cast<size_t>(vd) * 4, what),
              dev.alloc(static_cast<size_t>(c.Hv) * 4, what), dev.alloc(static_cast<size_t>(c.Hv) * 4, what)};
        for (DeviceBuffer* b : {&r.q, &r.k, &r.v, &r.g, &r.beta, &r.o, &r.y, &r.tr_raw, &r.tr_q, &r.tr_k, &r.tr_v,
                                &r.tr_g, &r.tr_beta})
          poison(dev, *b);
        dev.fill_bytes(r.ws.get(), 0, wsf * 4);  // unwritten padding must compare equal
        return r;
      };
      auto trace = [](Run& r) {
        return k::GdnTraceOut{r.tr_raw.as<float>(), r.tr_q.as<float>(), r.tr_k.as<float>(),
                              r.tr_v.as<float>(), r.tr_g.as<float>(), r.tr_beta.as<float>()};
      };
      DeviceBuffer bar = dev.alloc(2 * sizeof(unsigned), "grid barrier");
      dev.fill_bytes(bar.get(), 0, 2 * sizeof(unsigned));
      Run three = make("three launches"), one = make("one launch");
      for (int rep = 0; rep < 3; ++rep) {
        k::conv_gdn_prepare(dev.stream(), three.cst.as<float>(), dcw.as<float>(), draw.as<float>(), 1, K, da.as<float>(),
                            db.as<float>(), dna.as<float>(), ddt.as<float>(), c.Hk, D, c.Hv, D, three.q.as<float>(),
                            three.k.as<float>(), three.v.as<float>(), three.g.as<float>(), three.beta.as<float>(),
                            trace(three));
        gdn_decode(dev, three.S.as<float>(), three.q.as<float>(), three.k.as<float>(), three.v.as<float>(),
                   three.g.as<float>(), three.beta.as<float>(), 1, c.Hk, c.Hv, D, D, three.o.as<float>());
        k::gated_rms_norm_prep(dev.stream(), three.o.as<float>(), dz.as<float>(), dnw.as<float>(), 1, c.Hv, D, 1e-6f,
                               three.y.as<float>(), bits, three.ws.as<float>());
        k::gdn_mid(dev.stream(), grid, k::GdnMidWeights{dcw.as<float>(), dna.as<float>(), ddt.as<float>(), dnw.as<float>()},
                   k::GdnMidIo{one.cst.as<float>(), draw.as<float>(), da.as<float>(), db.as<float>(), one.q.as<float>(),
                               one.k.as<float>(), one.v.as<float>(), one.g.as<float>(), one.beta.as<float>(),
                               one.S.as<float>(), one.o.as<float>(), dz.as<float>(), one.y.as<float>(), trace(one)},
                   K, c.Hk, c.Hv, 1e-6f, bits, one.ws.as<float>(), static_cast<unsigned*>(bar.get()));
      }
      bool same = true;
      std::string first_diff;
      const char* names[] = {"S", "conv state", "q", "k", "v", "g", "beta", "o", "y", "workspace",
                             "trace raw", "trace q", "trace k", "trace v", "trace g", "trace beta"};
      DeviceBuffer* A[] = {&three.S, &three.cst, &three.q, &three.k, &three.v, &three.g, &three.beta, &three.o,
                           &three.y, &three.ws, &three.tr_raw, &three.tr_q, &three.tr_k, &three.tr_v, &three.tr_g,
                           &three.tr_beta};
      DeviceBuffer* B[] = {&one.S, &one.cst, &one.q, &one.k, &one.v, &one.g, &one.beta, &one.o,
                           &one.y, &one.ws, &one.tr_raw, &one.tr_q, &one.tr_k, &one.tr_v, &one.tr_g,
                           &one.tr_beta};
      for (int i = 0; i < 16; ++i) {
        const size_t n = A[i]->bytes() / 4;
        if (from_device<uint32_t>(dev, *A[i], n) != from_device<uint32_t>(dev, *B[i], n)) {
          same = false;
          if (first_diff.empty()) first_diff = names[i];
        }
      }
      const auto bw = from_device<uint32_t>(dev, bar, 1);
      record_bool(tag + " vs conv_gdn_prepare + gdn_decode + gated_rms_norm_prep", same && bw[0] == 0,
                  std::string(same ? "state, outputs, workspace, traced copies bitwise over 3 launches (grid " +
                                         std::to_string(grid) + ")"
                                   : "MISMATCH first in " + first_diff) +
                      (bw[0] == 0 ? "" : "; barrier count not reset"));
      ++ci;
    }
}

void check_gdn(CudaDevice& dev) {
  // D = 128: every Qwen3.5 size; D = 64: the bundled tiny models (two S rows a warp)
  struct Case { int64_t Hk, Hv, T, D; };
  const Case cases[] = {{16, 48, 1, 128}, {16, 48, 4, 128}, {16, 32, 1, 128}, {16, 32, 9, 128}, {2, 2, 3, 128},
                        {1, 3, 2, 128},   {2, 4, 1, 64},    {2, 4, 3, 64},    {2, 4, 9, 64},     {1, 3, 2, 64}};
  int ci = 0;
  for (const auto& c : cases) {
    const int64_t D = c.D;
    auto S = random_vec(static_cast<size_t>(c.Hv * D * D), 700 + ci, -0.5f, 0.5f);
    auto q = random_vec(static_cast<size_t>(c.T * c.Hk * D), 710 + ci);
    auto k = random_vec(static_cast<size_t>(c.T * c.Hk * D), 720 + ci);
    l2n_rows(q, c.T * c.Hk, D, 1.0f / std::sqrt(static_cast<float>(D)));
    l2n_rows(k, c.T * c.Hk, D, 1.0f);
    auto v = random_vec(static_cast<size_t>(c.T * c.Hv * D), 730 + ci);
    auto g = random_vec(static_cast<size_t>(c.T * c.Hv), 740 + ci, -3.0f, -0.01f);
    auto beta = random_vec(static_cast<size_t>(c.T * c.Hv), 750 + ci, 0.05f, 0.95f);
    DeviceBuffer dS = to_device(dev, S, "S"), dq = to_device(dev, q, "q"), dk = to_device(dev, k, "k"),
                 dv = to_device(dev, v, "v"), dg = to_device(dev, g, "g"), db = to_device(dev, beta, "beta");
    DeviceBuffer dout = dev.alloc(v.size() * 4, "o");
    poison(dev, dout);
    gdn_decode(dev, dS.as<float>(), dq.as<float>(), dk.as<float>(), dv.as<float>(), dg.as<float>(), db.as<float>(), c.T,
               c.Hk, c.Hv, D, D, dout.as<float>());
    const auto got_o = from_device<float>(dev, dout, v.size());
    const auto got_S = from_device<float>(dev, dS, S.size());
    // the same tokens one call each (a decode step a token): bitwise the T-token call's o and S
    DeviceBuffer dS1 = to_device(dev, S, "S"), dout1 = dev.alloc(v.size() * 4, "o");
    poison(dev, dout1);
    for (int64_t t = 0; t < c.T; ++t)
      gdn_decode(dev, dS1.as<float>(), dq.as<float>() + t * c.Hk * D, dk.as<float>() + t * c.Hk * D,
                 dv.as<float>() + t * c.Hv * D, dg.as<float>() + t * c.Hv, db.as<float>() + t * c.Hv, 1, c.Hk, c.Hv, D,
                 D, dout1.as<float>() + t * c.Hv * D);
    const auto one_o = from_device<float>(dev, dout1, v.size());
    const auto one_S = from_device<float>(dev, dS1, S.size());
    // reference: gdn_step per token and value head
    std::vector<float> ref_o(v.size());
    const int64_t rep = c.Hv / c.Hk;
    for (int64_t t = 0; t < c.T; ++t)
      for (int64_t h = 0; h < c.Hv; ++h)
        ops::gdn_step(S.data() + h * D * D, q.data() + (t * c.Hk + h / rep) * D, k.data() + (t * c.Hk + h / rep) * D,
                      v.data() + (t * c.Hv + h) * D, g[t * c.Hv + h], beta[t * c.Hv + h], D, D,
                      ref_o.data() + (t * c.Hv + h) * D);
    const std::string tag = "gdn_decode[Hk=" + std::to_string(c.Hk) + ",Hv=" + std::to_string(c.Hv) + ",T=" +
                            std::to_string(c.T) + ",D=" + std::to_string(D) + "]";
    record(tag + " o vs ops::gdn_step", compare(got_o.data(), ref_o.data(), ref_o.size(), 1e-5, 1e-4), 1e-10);
    record(tag + " S vs ops::gdn_step", compare(got_S.data(), S.data(), S.size(), 1e-5, 1e-4), 1e-10);
    const bool same = std::memcmp(one_o.data(), got_o.data(), got_o.size() * 4) == 0 &&
                      std::memcmp(one_S.data(), got_S.data(), got_S.size() * 4) == 0;
    record_bool(tag + " o and S bitwise vs " + std::to_string(c.T) + " single-token calls", same,
                same ? "bitwise" : "MISMATCH");
    ++ci;
  }
  check_gdn_step_norm(dev);
  check_gdn_mid(dev);
  check_producer_parts(dev);
}

// ---------------------------------------------------------------- MoE routing
// k::moe_route's two top-k forms (route_token: sorted entries + warp reductions, the routing gate/up
// launch's default; K rounds of scans and shuffles) against each other, bitwise (ids and weights), and
// their ids against the host (logit desc, index asc: the logits are quarter steps, so equal
// probabilities come only from equal logits); a token with a NaN logit takes the NaN path in both.
void check_moe_route(CudaDevice& dev) {
  struct Case { int64_t E, K; bool renorm; };
  const Case cases[] = {{256, 8, true}, {256, 8, false}, {16, 2, true}, {128, 8, true}, {200, 8, true}, {40, 40, true}, {512, 8, true}};
  int ci = 0;
  for (const auto& c : cases) {
    const int64_t T = 6;
    auto lg = random_vec(static_cast<size_t>(T * c.E), 950 + ci, -3.0f, 3.0f);
    for (float& v : lg) v = std::round(v * 4.0f) / 4.0f;  // ties
    lg[static_cast<size_t>((T - 1) * c.E + c.E / 3)] = std::numeric_limits<float>::quiet_NaN();  // the last token
    DeviceBuffer dl = to_device(dev, lg, "logits");
    DeviceBuffer ia = dev.alloc(static_cast<size_t>(T * c.K) * 4, "ids"), ib = dev.alloc(static_cast<size_t>(T * c.K) * 4, "ids");
    DeviceBuffer wa = dev.alloc(static_cast<size_t>(T * c.K) * 4, "w"), wb = dev.alloc(static_cast<size_t>(T * c.K) * 4, "w");
    for (DeviceBuffer* b : {&ia, &ib, &wa, &wb}) poison(dev, *b);
    k::moe_route(dev.stream(), dl.as<float>(), T, c.E, c.K, c.renorm, ia.as<int32_t>(), wa.as<float>(), true);
    k::moe_route(dev.stream(), dl.as<float>(), T, c.E, c.K, c.renorm, ib.as<int32_t>(), wb.as<float>(), false);
    const auto ida = from_device<int32_t>(dev, ia, static_cast<size_t>(T * c.K));
    const auto idb = from_device<int32_t>(dev, ib, static_cast<size_t>(T * c.K));
    const bool same = ida == idb && from_device<uint32_t>(dev, wa, static_cast<size_t>(T * c.K)) ==
                                        from_device<uint32_t>(dev, wb, static_cast<size_t>(T * c.K));
    int host_bad = 0;
    for (int64_t t = 0; t + 1 < T; ++t) {
      std::vector<int32_t> order(static_cast<size_t>(c.E));
      for (int32_t e = 0; e < c.E; ++e) order[static_cast<size_t>(e)] = e;
      const float* l = lg.data() + t * c.E;
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
      for (int64_t k = 0; k < c.K; ++k) host_bad += order[static_cast<size_t>(k)] != ida[static_cast<size_t>(t * c.K + k)];
    }
    for (int64_t k = 0; k < c.K; ++k) host_bad += ida[static_cast<size_t>((T - 1) * c.K + k)] != 0;  // NaN: ids 0
    record_bool("moe_route[E=" + std::to_string(c.E) + ",K=" + std::to_string(c.K) + (c.renorm ? ",renorm" : "") +
                    "] sorted top-k vs rounds bitwise, ids vs host",
                same && host_bad == 0,
                std::string(same ? "bitwise" : "forms differ") + ", " + std::to_string(host_bad) + " ids off the host's");
    ++ci;
  }
}

// ---------------------------------------------------------------- argmax
// k::argmax, one block a row (v1) and the split form (several blocks a row, last-block merge), against
// the rule on the host: the lowest index of the largest non-NaN value (-inf counts), 0 for an all-NaN
// row. Rows that break a split: the maximum tied across blocks, NaN around it, all -inf, all NaN,
// -inf among NaN, widths that leave a partial span, odd widths (rows 1.. unaligned). The split form
// runs twice a case, and every case of a width shares one workspace of 9 rows as the engine's does
// (1, 9, 1 then 4 rows: each launch finds its tickets zero and leaves them zero, whatever the row
// count before it; session 26's layout failed this from the second case on).
void check_argmax(CudaDevice& dev) {
  auto host_argmax = [](const float* v, int64_t n) {
    int64_t best = -1;
    for (int64_t i = 0; i < n; ++i)
      if (!std::isnan(v[i]) && (best < 0 || v[i] > v[best])) best = i;
    return static_cast<int32_t>(best < 0 ? 0 : best);
  };
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  int ci = 0;
  constexpr int64_t kCap = 9;  // the engine's rows of one pass
  for (int64_t V : {int64_t{248320}, int64_t{151936}, int64_t{1}, int64_t{3}, int64_t{4097}, int64_t{65537}}) {
    const int64_t wsf = k::argmax_split_floats(V, kCap);
    DeviceBuffer ws = dev.alloc(static_cast<size_t>(wsf) * 4, "argmax split workspace");
    dev.fill_bytes(ws.get(), 0, static_cast<size_t>(wsf) * 4);
    for (int64_t rows : {int64_t{1}, int64_t{9}, int64_t{1}, int64_t{4}}) {
      std::vector<float> v = random_vec(static_cast<size_t>(rows * V), 900 + ci, -30.0f, 30.0f);
      for (int64_t r = 0; r < rows; ++r) {
        float* row = v.data() + r * V;
        switch (r % 9) {
          case 1:  // the maximum tied at far-apart positions (different blocks), the later ones first scanned
            for (int64_t i : {V - 1, V / 2, V / 3 + 1, int64_t{7}}) row[std::min(i, V - 1)] = 100.0f;
            break;
          case 2:  // NaN everywhere but a few values
            for (int64_t i = 0; i < V; ++i) row[i] = i % 1009 == 5 ? row[i] : nan;
            break;
          case 3: std::fill(row, row + V, -inf); break;
          case 4: std::fill(row, row + V, nan); break;
          case 5:  // -inf among NaN
            for (int64_t i = 0; i < V; ++i) row[i] = i % 3 == 1 ? -inf : nan;
            break;
          case 6: row[V - 1] = 1e30f; break;  // the last element (a partial span's last)
          case 7: row[0] = inf, row[V / 2] = inf; break;
          case 8: std::fill(row, row + V, 0.0f); break;  // all equal: index 0
          default: break;
        }
      }
      std::vector<int32_t> want(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) want[r] = host_argmax(v.data() + r * V, V);
      DeviceBuffer dv = to_device(dev, v, "logits");
      DeviceBuffer out1 = dev.alloc(static_cast<size_t>(rows) * 4, "ids v1"), out2 = dev.alloc(static_cast<size_t>(rows) * 4, "ids split");
      poison(dev, out1);
      k::argmax(dev.stream(), dv.as<float>(), V, out1.as<int32_t>(), rows);
      bool split_same = true;
      for (int rep = 0; rep < 2; ++rep) {
        poison(dev, out2);
        k::argmax(dev.stream(), dv.as<float>(), V, out2.as<int32_t>(), rows, k::ArgmaxWs{ws.as<float>(), kCap});
        split_same = split_same && from_device<int32_t>(dev, out2, static_cast<size_t>(rows)) == want;
      }
      const auto tickets = from_device<uint32_t>(dev, ws, static_cast<size_t>(kCap));  // they lead the workspace
      const bool reset = std::all_of(tickets.begin(), tickets.end(), [](uint32_t t) { return t == 0; });
      const std::string tag = "argmax[V=" + std::to_string(V) + ",rows=" + std::to_string(rows) + ",case " + std::to_string(ci) + "]";
      record_bool(tag + " one block a row vs host", from_device<int32_t>(dev, out1, static_cast<size_t>(rows)) == want,
                  "ids of every row");
      record_bool(tag + " split vs host", split_same && reset,
                  std::string(split_same ? "ids of every row, 2 launches" : "MISMATCH") + (reset ? "" : "; tickets not reset"));
      ++ci;
    }
  }
}

// ---------------------------------------------------------------- attention
void check_attention(CudaDevice& dev, bool quick) {
  struct Case { int64_t nh, nkv, len; KvType kv; };
  std::vector<Case> cases = {{24, 4, 1, KvType::F32},    {24, 4, 7, KvType::BF16},   {24, 4, 129, KvType::F32},
                             {24, 4, 1000, KvType::BF16}, {16, 2, 257, KvType::F32},  {16, 2, 3000, KvType::BF16},
                             {8, 8, 65, KvType::F32},     {32, 2, 700, KvType::BF16}, {8, 2, 128, KvType::F32}};
  if (!quick) {
    cases.push_back({24, 4, 8192, KvType::BF16});
    cases.push_back({24, 4, 8192, KvType::F32});
    cases.push_back({16, 2, 40000, KvType::BF16});
  }
  int ci = 0;
  for (const auto& c : cases) {
    const int64_t hd = 256;
    const auto q = random_vec(static_cast<size_t>(c.nh * hd), 800 + ci);
    auto k = random_vec(static_cast<size_t>(c.len * c.nkv * hd), 810 + ci, -2.0f, 2.0f);
    auto v = random_vec(static_cast<size_t>(c.len * c.nkv * hd), 820 + ci);
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
    DeviceBuffer ws = dev.alloc(static_cast<size_t>(attention_decode_workspace_floats(dev, c.len, c.nh, c.nkv)) * 4, "ws");
    DeviceBuffer dout = dev.alloc(q.size() * 4, "out");
    poison(dev, dout);
    poison(dev, ws);
    attention_decode(dev, dq.as<float>(), dk.get(), dv.get(), c.kv, c.len, c.nh, c.nkv, hd, 1.0f / 16.0f,
                     ws.as<float>(), dout.as<float>());
    const auto got = from_device<float>(dev, dout, q.size());
    std::vector<float> ref(q.size());
    ops::attention(q.data(), k.data(), v.data(), c.len, c.nh, c.nkv, hd, 1.0f / 16.0f, ref.data());
    record("attention_decode[nh=" + std::to_string(c.nh) + ",nkv=" + std::to_string(c.nkv) + ",len=" +
               std::to_string(c.len) + (c.kv == KvType::BF16 ? ",bf16]" : ",f32]") + " vs ops::attention",
           compare(got.data(), ref.data(), ref.size(), 1e-5, 1e-4), 1e-10);
    ++ci;
  }
}

// ---------------------------------------------------------------- timing
struct Timing {
  double median_us = 0, min_us = 0, max_us = 0;
  int reps = 0;
};

// Times `reps` launches of fn(i) (i = rep index, for buffer rotation) after `warm` warm-ups, one
// event pair per launch, all enqueued before the first read so the GPU never waits on the host.
Timing time_launches(CudaDevice& dev, int warm, int reps, const std::function<void(int)>& fn) {
  DeviceGuard guard(dev.ordinal());
  for (int i = 0; i < warm; ++i) fn(i);
  std::vector<cudaEvent_t> ev(2 * reps);
  for (auto& e : ev) MERE_CUDA_CHECK(cudaEventCreate(&e));
  for (int i = 0; i < reps; ++i) {
    MERE_CUDA_CHECK(cudaEventRecord(ev[2 * i], dev.stream()));
    fn(warm + i);
    MERE_CUDA_CHECK(cudaEventRecord(ev[2 * i + 1], dev.stream()));
  }
  dev.synchronize("timing");
  std::vector<double> us(reps);
  for (int i = 0; i < reps; ++i) {
    float ms = 0;
    MERE_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
    us[i] = ms * 1000.0;
  }
  for (auto& e : ev) cudaEventDestroy(e);
  std::sort(us.begin(), us.end());
  Timing t;
  t.reps = reps;
  t.min_us = us.front();
  t.max_us = us.back();
  t.median_us = reps % 2 ? us[reps / 2] : 0.5 * (us[reps / 2 - 1] + us[reps / 2]);
  return t;
}

// Per-launch time inside a captured graph of `n` launches (launch gaps shrink as in a decode graph).
double time_graph(CudaDevice& dev, int n, const std::function<void(int)>& fn) {
  DeviceGuard guard(dev.ordinal());
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  MERE_CUDA_CHECK(cudaStreamBeginCapture(dev.stream(), cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < n; ++i) fn(i);
  MERE_CUDA_CHECK(cudaStreamEndCapture(dev.stream(), &graph));
  MERE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  MERE_CUDA_CHECK(cudaGraphLaunch(exec, dev.stream()));
  dev.synchronize("graph warm-up");
  std::vector<double> per;
  cudaEvent_t a, b;
  MERE_CUDA_CHECK(cudaEventCreate(&a));
  MERE_CUDA_CHECK(cudaEventCreate(&b));
  for (int r = 0; r < 5; ++r) {
    MERE_CUDA_CHECK(cudaEventRecord(a, dev.stream()));
    MERE_CUDA_CHECK(cudaGraphLaunch(exec, dev.stream()));
    MERE_CUDA_CHECK(cudaEventRecord(b, dev.stream()));
    dev.synchronize("graph timing");
    float ms = 0;
    MERE_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    per.push_back(ms * 1000.0 / n);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  std::sort(per.begin(), per.end());
  return per[per.size() / 2];
}


void add_bench(const std::string& name, double bytes, double flops, const Timing& t, double graph_us,
               const std::string& extra = "") {
  const double gbs = bytes / (t.median_us * 1e-6) / 1e9;
  const double pred_us = g_copy_gbs > 0 ? bytes / (g_copy_gbs * 1e9) * 1e6 : 0;
  std::ostringstream o;
  o << "{\"bench\":\"" << name << "\",\"bytes\":" << jnum(bytes) << ",\"flops\":" << jnum(flops)
    << ",\"predicted_us_at_copy_bw\":" << jnum(pred_us) << ",\"median_us\":" << jnum(t.median_us)
    << ",\"min_us\":" << jnum(t.min_us) << ",\"max_us\":" << jnum(t.max_us) << ",\"reps\":" << t.reps
    << ",\"gbs_median\":" << jnum(gbs) << ",\"gbs_best\":" << jnum(bytes / (t.min_us * 1e-6) / 1e9)
    << ",\"gbs_worst\":" << jnum(bytes / (t.max_us * 1e-6) / 1e9)
    << ",\"pct_of_copy_bw\":" << jnum(g_copy_gbs > 0 ? 100.0 * gbs / g_copy_gbs : 0)
    << ",\"graph_us_per_launch\":" << jnum(graph_us) << extra << "}";
  g_report.bench.push_back(o.str());
  std::printf("%-44s %9.2f us [%8.2f-%8.2f] pred %8.2f  %7.1f GB/s  %5.1f%% copy  graph %8.2f us\n", name.c_str(),
              t.median_us, t.min_us, t.max_us, pred_us, gbs, g_copy_gbs > 0 ? 100.0 * gbs / g_copy_gbs : 0, graph_us);
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
// bf16 values in +-[0.004, 0.02) (scales) or around -7.5 * 0.012 (biases)
__global__ void fill_bf16_kernel(uint16_t* p, size_t n, uint64_t seed, float base, float spread) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint64_t z = (i + seed) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 29)) * 0xBF58476D1CE4E5B9ull;
    const float u = static_cast<float>((z >> 40) & 0xFFFFFF) / 16777216.0f;
    const float f = base + spread * u;
    p[i] = static_cast<uint16_t>(__float_as_uint(f) >> 16);
  }
}
// pure streaming read of n uint4 (bandwidth ceiling for a read-only kernel)
__global__ void read_kernel(const uint4* __restrict__ p, size_t n, uint32_t* sink) {
  uint32_t acc = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint4 v = __ldg(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *sink = acc;
}

void fill_random(CudaDevice& dev, void* p, size_t bytes, uint64_t seed) {
  fill_u32_kernel<<<1024, 256, 0, dev.stream()>>>(static_cast<uint32_t*>(p), bytes / 4, seed);
  MERE_CUDA_CHECK_LAUNCH("fill_u32_kernel");
}

void bench_bandwidth(CudaDevice& dev) {
  const size_t bytes = size_t{1} << 30;
  DeviceBuffer a = dev.alloc(bytes, "copy src"), b = dev.alloc(bytes, "copy dst");
  fill_random(dev, a.get(), bytes, 1);
  fill_random(dev, b.get(), bytes, 2);
  const Timing t = time_launches(dev, 3, 20, [&](int) {
    MERE_CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, dev.stream()));
  });
  g_copy_gbs = 2.0 * bytes / (t.median_us * 1e-6) / 1e9;
  add_bench("d2d copy 1 GiB (read+write)", 2.0 * bytes, 0, t, 0);
  DeviceBuffer sink = dev.alloc(4, "sink");
  const int blocks = dev.sm_count() * 8;
  const Timing r = time_launches(dev, 3, 20, [&](int i) {
    read_kernel<<<blocks, 256, 0, dev.stream()>>>((i & 1 ? b : a).as<uint4>(), bytes / 16, sink.as<uint32_t>());
  });
  add_bench("read-only stream 1 GiB (16-byte loads)", static_cast<double>(bytes), 0, r, 0);
}

// rotating weight copies so the 60 MB L2 never holds the next launch's weights
struct QBank {
  DeviceBuffer codes, scales, biases, tcodes, tsb;
  std::vector<QWeightView> views, tviews;  // tviews: 4-bit tiled copies (group-integer kernel)
};
QBank make_bank(CudaDevice& dev, int64_t rows, int64_t cols, int bits, size_t min_total) {
  QBank b;
  const size_t cb = static_cast<size_t>(rows * cols * bits / 8), sb = static_cast<size_t>(rows * (cols / 64) * 2);
  const size_t per = cb + 2 * sb;
  const int n = static_cast<int>(std::clamp<size_t>((min_total + per - 1) / per, 2, 4096));
  b.codes = dev.alloc(cb * n, "bench codes");
  b.scales = dev.alloc(sb * n, "bench scales");
  b.biases = dev.alloc(sb * n, "bench biases");
  fill_random(dev, b.codes.get(), cb * n, 7);
  fill_bf16_kernel<<<1024, 256, 0, dev.stream()>>>(b.scales.as<uint16_t>(), sb * n / 2, 3, 0.004f, 0.016f);
  fill_bf16_kernel<<<1024, 256, 0, dev.stream()>>>(b.biases.as<uint16_t>(), sb * n / 2, 5, -0.15f, 0.05f);
  MERE_CUDA_CHECK_LAUNCH("fill_bf16_kernel");
  for (int i = 0; i < n; ++i)
    b.views.push_back(QWeightView{b.codes.as<uint32_t>() + cb / 4 * i, b.scales.as<uint16_t>() + sb / 2 * i,
                                  b.biases.as<uint16_t>() + sb / 2 * i, rows, cols, bits});
  if (bits == 4) {
    const QTiledBytes tb = qmatvec_tiled_bytes(rows, cols);
    b.tcodes = dev.alloc(tb.codes * n, "bench tiled codes");
    b.tsb = dev.alloc(tb.sb * n, "bench tiled sb");
    for (int i = 0; i < n; ++i)
      b.tviews.push_back(qmatvec_tile_device(dev, b.views[i], static_cast<uint8_t*>(b.tcodes.get()) + tb.codes * i,
                                             static_cast<uint8_t*>(b.tsb.get()) + tb.sb * i));
  }
  dev.synchronize("bank fill");
  return b;
}

// --kernels LIST: the matvec kernels to benchmark (comma-separated labels: int, gmma, tc, simt);
// empty: all
std::string g_kernels;
bool g_gm_sweep = false;  // --gm-sweep: every group-integer shape at every T on the 27B projections
bool want_kernel(const char* kernel) {
  if (g_kernels.empty()) return true;
  const std::string k = kernel[0] ? kernel : "simt";
  return ("," + g_kernels + ",").find("," + k + ",") != std::string::npos;
}

void bench_qmatvec(CudaDevice& dev) {
  struct Shape { int64_t rows, cols; const char* what; };
  const Shape shapes[] = {{17408, 5120, "27B gate/up"},  {5120, 17408, "27B down"},   {12288, 5120, "27B q_proj"},
                          {10240, 5120, "27B in_proj_qkv"}, {248320, 5120, "27B lm_head"}, {512, 2048, "35B expert gate/up"},
                          {2048, 512, "35B expert down"}, {257, 2048, "35B router + shared gate (8-bit)"}};
  const size_t min_total = std::max<size_t>(8 * dev.l2_bytes(), size_t{1} << 30);
  DeviceBuffer x = dev.alloc(static_cast<size_t>(kMaxSkinnyRows * 17408) * 4, "bench x");
  DeviceBuffer ws = dev.alloc(static_cast<size_t>(std::max(qmatvec_workspace_floats(kMaxSkinnyRows, 17408, 8),
                                                           qmatvec_workspace_floats(kMaxSkinnyRows, 17408, 4))) * 4,
                              "bench ws");
  DeviceBuffer y = dev.alloc(static_cast<size_t>(kMaxSkinnyRows * 248320) * 4, "bench y");
  {
    const auto hx = random_vec(static_cast<size_t>(kMaxSkinnyRows * 17408), 42);
    dev.upload(x.get(), hx.data(), hx.size() * 4);
  }
  auto same = [](const QMatvecConfig& a, const QMatvecConfig& b) {
    if (a.integer != b.integer || a.rows_per_warp != b.rows_per_warp || a.stages != b.stages) return false;
    return a.stages > 0 || (a.unroll == b.unroll && (a.rows_per_warp < 16 || a.warps == b.warps));
  };
  for (const auto& s : shapes) {
    for (int bits : {4, 8}) {
      if (bits == 8 && s.rows != 17408 && s.rows != 257) continue;
      if (bits == 4 && s.rows == 257) continue;
      QBank bank = make_bank(dev, s.rows, s.cols, bits, min_total);
      const double bytes_w = static_cast<double>(bank.views[0].bytes());
      const int nb = static_cast<int>(bank.views.size());
      const bool big27 = s.cols >= 5120 && s.rows <= 17408;  // the four 27B projection shapes
      // label: "" for the process default, " (auto)" for the tensor-core auto pick, " (sweep)" else
      auto bench_one = [&](int T, const QMatvecConfig& c, const char* label, const char* kernel) {
        if (!want_kernel(kernel)) return;
        qmatvec_prepare(dev, x.as<float>(), T, s.cols, bits, ws.as<float>());
        const std::vector<QWeightView>& vs = c.integer == 4 ? bank.tviews : bank.views;
        auto fn = [&](int i) { qmatvec(dev, vs[i % nb], ws.as<float>(), T, y.as<float>(), c); };
        const Timing t = time_launches(dev, 5, 30, fn);
        const double g = time_graph(dev, std::min(nb * 2, 256), fn);
        const double bytes = bytes_w + 4.0 * T * s.cols * 1.03 + 4.0 * T * s.rows;
        char name[160];
        std::snprintf(name, sizeof(name), "q%d%s [%lld,%lld] T=%d %s%s", bits, kernel, static_cast<long long>(s.rows),
                      static_cast<long long>(s.cols), T, cfg_name(c).c_str(), label);
        std::ostringstream ex;
        ex << ",\"shape\":\"" << s.what << "\",\"bits\":" << bits << ",\"T\":" << T << ",\"kernel\":\""
           << (kernel[0] ? kernel : "simt") << "\",\"rows_per_warp\":" << c.rows_per_warp << ",\"unroll\":" << c.unroll
           << ",\"warps\":" << c.warps << ",\"stages\":" << c.stages << ",\"weight_copies\":" << nb
           << ",\"default_config\":" << (label[0] ? "false" : "true") << ",\"tc_auto\":" << (std::string(label) == " (auto)" ? "true" : "false")
           << ",\"graph_pct_of_copy_bw\":" << jnum(g_copy_gbs > 0 && g > 0 ? 100.0 * bytes / (g * 1e-6) / 1e9 / g_copy_gbs : 0);
        add_bench(name, bytes, 2.0 * T * s.rows * s.cols, t, g, ex.str());
      };
      auto label_of = [&](int T, const QMatvecConfig& c, const QMatvecConfig& tc_auto) {
        return same(c, qmatvec_default_config(bits, T, s.rows)) ? "" : (same(c, tc_auto) ? " (auto)" : " (sweep)");
      };
      if (bits == 8) {
        for (int T : {1, 9}) bench_one(T, qmatvec_default_config(bits, T, s.rows), "", "");
        for (const QMatvecConfig& c : kSimt8Configs)  // the other T = 1 shapes (MERE_CUDA_Q8_SHAPE)
          if (!same(c, qmatvec_default_config(bits, 1, s.rows)) && qmatvec_config_available(bits, 1, c))
            bench_one(1, c, " (sweep)", "");
        continue;
      }
      // integer (the default): every shape at T = 1 and the defaults at T = 1..9 on the 27B
      // projections (T = 1, 9 elsewhere); the multi-matrix launch of gate+up as the engine runs it
      for (const auto& c : kIntConfigs)
        if (qmatvec_config_available(bits, 1, c)) bench_one(1, c, label_of(1, c, QMatvecConfig{}), "int");
      for (int T = 2; T <= kMaxSkinnyRows; ++T) {
        if (!big27 && T != 9) continue;
        bench_one(T, kIntConfigs[0], label_of(T, kIntConfigs[0], QMatvecConfig{}), "int");
        if (s.rows == 17408)
          for (size_t i = 1; i < std::size(kIntConfigs); ++i)
            if (qmatvec_config_available(bits, T, kIntConfigs[i])) bench_one(T, kIntConfigs[i], " (sweep)", "int");
      }
      if (s.rows == 17408) {
        for (int T : {1, 2, 4, 8, 9})
          for (const QMatvecConfig& c : {kIntConfigs[0], QMatvecConfig{-1, 1, 0, 0, 1}, QMatvecConfig{4, 1, 0, 3, 2},
                                         QMatvecConfig{4, 1, 0, 4, 5}, QMatvecConfig{2, 1, 0, 8, 5},
                                         QMatvecConfig{16, 1, 0, 8, 3}, kGmConfigs[0], kGmConfigs[6]}) {
          if (!qmatvec_config_available(bits, T, c) || !want_kernel(c.integer == 4 ? "gmma" : "int")) continue;
          qmatvec_prepare(dev, x.as<float>(), T, s.cols, bits, ws.as<float>());
          auto fn = [&](int i) {
            const std::vector<QWeightView>& vs = c.integer == 4 ? bank.tviews : bank.views;
            const QMatvecOut outs[2] = {{vs[(2 * i) % nb], y.as<float>(), false},
                                        {vs[(2 * i + 1) % nb], y.as<float>() + T * s.rows, false}};
            qmatvec_multi(dev, outs, 2, ws.as<float>(), T, c);
          };
          const double bytes = 2 * bytes_w + 4.0 * T * s.cols * 1.03 + 8.0 * T * s.rows;
          const double g = time_graph(dev, std::min(nb, 128), fn);
          std::ostringstream ex;
          ex << ",\"shape\":\"27B gate+up (one launch)\",\"bits\":4,\"T\":" << T << ",\"kernel\":\"int\""
             << ",\"graph_pct_of_copy_bw\":" << jnum(g_copy_gbs > 0 && g > 0 ? 100.0 * bytes / (g * 1e-6) / 1e9 / g_copy_gbs : 0);
          add_bench("q4int multi 2x[17408,5120] T=" + std::to_string(T) + " " + cfg_name(c), bytes, 4.0 * T * s.rows * s.cols,
                    time_launches(dev, 5, 30, fn), g, ex.str());
        }
      }
      // group-integer tensor cores (MERE_CUDA_QMATVEC=mma): T = 1..9 on the 27B projections (1, 9
      // elsewhere) at the default ring, every ring depth at T = 1, 8 on [17408,5120] (--gm-sweep: at
      // every T on every 27B projection)
      for (int T = 1; T <= kMaxSkinnyRows; ++T) {
        if (!big27 && T != 1 && T != 9) continue;
        bench_one(T, kGmConfigs[0], label_of(T, kGmConfigs[0], QMatvecConfig{}), "gmma");
        bench_one(T, kGmConfigs[6], " (sweep)", "gmma");  // two batches, default shape
        if ((s.rows == 17408 && (T == 1 || T == 8)) || (g_gm_sweep && big27))
          for (size_t i = 1; i < std::size(kGmConfigs); ++i)
            if (i != 6 && qmatvec_config_available(bits, T, kGmConfigs[i])) bench_one(T, kGmConfigs[i], " (sweep)", "gmma");
      }
      // SIMT (MERE_CUDA_QMATVEC=simt): T = 1 default shape everywhere, T = 2..9 at [17408,5120]
      bench_one(1, s.rows >= 8192 ? QMatvecConfig{8, 1} : QMatvecConfig{2, 2}, " (simt)", "");  // its T = 1 default
      if (s.rows == 17408)
        for (int T : {2, 4, 9}) bench_one(T, simt_config(T), " (simt)", "");
      // tensor cores (MERE_CUDA_QMATVEC=tc): the auto pick at T = 1 and 9 on the 27B projections
      if (big27)
        for (int T : {1, 8, 9}) {
          const QMatvecConfig tauto = qmatvec_tc_config(T, s.rows);
          bench_one(T, tauto, " (auto)", "tc");
        }
      if (s.rows == 17408 && bits == 4) {  // prepare + matvec, as a caller without a fused producer sees it
        for (int T : {1, 9}) {
          auto fn = [&](int i) { qlinear(dev, bank.views[i % nb], x.as<float>(), T, ws.as<float>(), y.as<float>()); };
          const Timing t = time_launches(dev, 5, 30, fn);
          add_bench("qlinear (prepare+matvec) [17408,5120] T=" + std::to_string(T), bytes_w, 2.0 * T * s.rows * s.cols, t,
                    time_graph(dev, 64, fn));
          auto fp = [&](int) { qmatvec_prepare(dev, x.as<float>(), T, s.cols, bits, ws.as<float>()); };
          add_bench("qmatvec_prepare q4 [T=" + std::to_string(T) + ", 5120]", 4.0 * T * s.cols * 3, 0,
                    time_launches(dev, 5, 30, fp), time_graph(dev, 64, fp));
        }
      }
    }
  }
}

void bench_others(CudaDevice& dev) {
  {  // rms norm, launch-bound at decode sizes
    DeviceBuffer x = dev.alloc(9 * 5120 * 4, "x"), w = dev.alloc(5120 * 4, "w"), y = dev.alloc(9 * 5120 * 4, "y");
    fill_random(dev, x.get(), x.bytes(), 1);
    fill_bf16_kernel<<<64, 256, 0, dev.stream()>>>(x.as<uint16_t>(), 9 * 5120 * 2, 9, 0.5f, 1.0f);  // finite values
    fill_bf16_kernel<<<64, 256, 0, dev.stream()>>>(w.as<uint16_t>(), 5120 * 2, 10, 0.5f, 1.0f);
    for (int T : {1, 9}) {
      auto fn = [&](int) { rms_norm(dev, x.as<float>(), w.as<float>(), T, 5120, 1e-6f, y.as<float>()); };
      add_bench("rms_norm [T=" + std::to_string(T) + ", 5120]", 4.0 * (2 * T * 5120 + 5120), 4.0 * T * 5120,
                time_launches(dev, 5, 30, fn), time_graph(dev, 64, fn));
    }
  }
  {  // GDN decode, 27B (Hv = 48) and 35B-A3B (Hv = 32); state rotated over copies beyond the L2
    for (int64_t Hv : {48, 32}) {
      const int64_t Hk = 16, D = 128;
      const size_t sbytes = static_cast<size_t>(Hv * D * D * 4);
      const int ncopy = static_cast<int>(std::max<size_t>(2, 8 * dev.l2_bytes() / sbytes));
      DeviceBuffer S = dev.alloc(sbytes * ncopy, "gdn states");
      dev.fill_bytes(S.get(), 0, S.bytes());
      DeviceBuffer q = dev.alloc(9 * Hk * D * 4, "q"), k = dev.alloc(9 * Hk * D * 4, "k"), v = dev.alloc(9 * Hv * D * 4, "v"),
                   g = dev.alloc(9 * Hv * 4, "g"), b = dev.alloc(9 * Hv * 4, "b"), o = dev.alloc(9 * Hv * D * 4, "o");
      for (DeviceBuffer* p : {&q, &k, &v, &g, &b}) dev.fill_bytes(p->get(), 0x3c, p->bytes());  // 0.0115 each, finite
      for (int T : {1, 4}) {
        auto fn = [&](int i) {
          gdn_decode(dev, S.as<float>() + sbytes / 4 * (i % ncopy), q.as<float>(), k.as<float>(), v.as<float>(),
                     g.as<float>(), b.as<float>(), T, Hk, Hv, D, D, o.as<float>());
        };
        add_bench("gdn_decode [Hv=" + std::to_string(Hv) + ", T=" + std::to_string(T) + "]", 2.0 * sbytes,
                  6.0 * T * Hv * D * D, time_launches(dev, 5, 30, fn), time_graph(dev, 64, fn));
      }
    }
  }
  {  // decode attention, 27B heads, long caches
    for (int64_t len : {int64_t{8192}, int64_t{32768}}) {
      for (KvType kv : {KvType::BF16, KvType::F32}) {
        const int64_t nh = 24, nkv = 4, hd = 256;
        const size_t es = kv == KvType::BF16 ? 2 : 4;
        const size_t kvbytes = static_cast<size_t>(len * nkv * hd) * es;
        const int ncopy = static_cast<int>(std::max<size_t>(2, 8 * dev.l2_bytes() / (2 * kvbytes) + 1));
        DeviceBuffer K = dev.alloc(kvbytes * ncopy, "K"), V = dev.alloc(kvbytes * ncopy, "V");
        fill_bf16_kernel<<<1024, 256, 0, dev.stream()>>>(K.as<uint16_t>(), K.bytes() / 2, 11, -0.5f, 1.0f);
        fill_bf16_kernel<<<1024, 256, 0, dev.stream()>>>(V.as<uint16_t>(), V.bytes() / 2, 12, -0.5f, 1.0f);
        DeviceBuffer q = dev.alloc(nh * hd * 4, "q"), out = dev.alloc(nh * hd * 4, "out");
        fill_bf16_kernel<<<64, 256, 0, dev.stream()>>>(q.as<uint16_t>(), nh * hd * 2, 13, -0.5f, 1.0f);
        DeviceBuffer ws = dev.alloc(static_cast<size_t>(attention_decode_workspace_floats(dev, len, nh, nkv)) * 4, "ws");
        auto fn = [&](int i) {
          attention_decode(dev, q.as<float>(), static_cast<const uint8_t*>(K.get()) + kvbytes * (i % ncopy),
                           static_cast<const uint8_t*>(V.get()) + kvbytes * (i % ncopy), kv, len, nh, nkv, hd, 0.0625f,
                           ws.as<float>(), out.as<float>());
        };
        add_bench("attention_decode [24/4 heads, len=" + std::to_string(len) + (kv == KvType::BF16 ? ", bf16]" : ", f32]"),
                  2.0 * kvbytes + 8.0 * ws.bytes(), 4.0 * nh * hd * len, time_launches(dev, 5, 30, fn),
                  time_graph(dev, 32, fn));
      }
    }
  }
}

// What one grid-wide barrier (engine/grid_sync.cuh, the one k::moe_block and k::gdn_mid use) costs at
// 1, 2, 4 and 8 resident blocks of 256 threads an SM: a launch of R barriers and nothing else, R = 1 and
// 33; the difference over 32 is one barrier (session 26 measured the two kernels built on it slower than
// the launches they replace; this separates the barrier from the phases' own latency).
__global__ void barrier_bench_kernel(unsigned* bar, int rounds) {
  for (int i = 0; i < rounds; ++i) k::grid_sync(bar, gridDim.x);
}
void bench_barrier(CudaDevice& dev) {
  int per_sm = 0;
  MERE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, barrier_bench_kernel, 256, 0));
  DeviceBuffer bar = dev.alloc(2 * sizeof(unsigned), "grid barrier");
  dev.fill_bytes(bar.get(), 0, 2 * sizeof(unsigned));
  for (int bps : {1, 2, 4, 8}) {
    if (bps > per_sm) continue;  // the grid must be resident at once
    const unsigned grid = static_cast<unsigned>(bps * dev.sm_count());
    Timing t[2];
    int i = 0;
    for (int rounds : {1, 33}) {
      t[i++] = time_launches(dev, 3, 21, [&](int) {
        barrier_bench_kernel<<<grid, 256, 0, dev.stream()>>>(static_cast<unsigned*>(bar.get()), rounds);
        MERE_CUDA_CHECK(cudaGetLastError());
      });
    }
    const double per = (t[1].median_us - t[0].median_us) / 32.0;
    const std::string extra = ",\"blocks\":" + std::to_string(grid) + ",\"us_per_barrier\":" + jnum(per);
    add_bench("grid barrier x33 [" + std::to_string(bps) + " x 256 threads an SM]", 0, 0, t[1], 0, extra);
    std::printf("  -> %.3f us a barrier at %u blocks\n", per, grid);
  }
  const auto w = from_device<uint32_t>(dev, bar, 1);
  record_bool("grid barrier count back at zero after the benchmark", w[0] == 0, "count " + std::to_string(w[0]));
}

// A few launches for a profiler (--ncu): the 4-bit matvec at [17408, 5120], 3 each at T = 1, 4, 8, 9
// (launches 0-2, 3-5, 6-8, 9-11 of the matvec kernel); then the GatedDeltaNet decode kernels at the
// 27B head geometry (Hk 16, Hv 48, 128-wide heads, K 4), 2 launches each: conv_gdn_prepare's v3
// (conv_gdn_prepare_kernel) and v4 (conv_gdn_prepare_tokens_kernel) at T = 8, gdn_decode at T = 8
// then T = 1 (launches 0-1 and 2-3 of gdn_decode_kernel).
void profile_launches(CudaDevice& dev) {
  QBank bank = make_bank(dev, 17408, 5120, 4, size_t{1} << 30);
  DeviceBuffer x = dev.alloc(9 * 5120 * 4, "x"), ws = dev.alloc(static_cast<size_t>(qmatvec_workspace_floats(9, 5120, 4)) * 4, "ws"),
               y = dev.alloc(9 * 17408 * 4, "y");
  const auto hx = random_vec(9 * 5120, 3);
  dev.upload(x.get(), hx.data(), hx.size() * 4);
  int i = 0;
  for (int T : {1, 4, 8, 9}) {
    qmatvec_prepare(dev, x.as<float>(), T, 5120, 4, ws.as<float>());
    const std::vector<QWeightView>& vs = qmatvec_tiled_weights() ? bank.tviews : bank.views;  // MERE_CUDA_QMATVEC=mma
    for (int r = 0; r < 3; ++r) qmatvec(dev, vs[i++ % vs.size()], ws.as<float>(), T, y.as<float>());
  }
  const int64_t Hk = 16, Hv = 48, D = 128, K = 4, kd = Hk * D, vd = Hv * D, C = 2 * kd + vd, T = 8;
  auto buf = [&](int64_t n, uint64_t seed, float lo, float hi, const char* what) {
    return to_device(dev, random_vec(static_cast<size_t>(n), seed, lo, hi), what);
  };
  DeviceBuffer S = buf(vd * D, 11, -0.5f, 0.5f, "S"), cst = buf((K - 1) * C, 12, -1.0f, 1.0f, "conv state"),
               cw = buf(C * K, 13, -0.7f, 0.7f, "conv w"), raw = buf(T * C, 14, -2.0f, 2.0f, "raw"),
               a = buf(T * Hv, 15, -2.0f, 2.0f, "a"), b = buf(T * Hv, 16, -2.0f, 2.0f, "b"),
               na = buf(Hv, 17, -1.5f, -0.1f, "neg_a"), dt = buf(Hv, 18, -1.0f, 1.0f, "dt_bias");
  DeviceBuffer q = dev.alloc(T * kd * 4, "q"), k = dev.alloc(T * kd * 4, "k"), v = dev.alloc(T * vd * 4, "v"),
               g = dev.alloc(T * Hv * 4, "g"), beta = dev.alloc(T * Hv * 4, "beta"), o = dev.alloc(T * vd * 4, "o");
  for (bool tokens : {false, false, true, true})
    k::conv_gdn_prepare(dev.stream(), cst.as<float>(), cw.as<float>(), raw.as<float>(), T, K, a.as<float>(),
                        b.as<float>(), na.as<float>(), dt.as<float>(), Hk, D, Hv, D, q.as<float>(), k.as<float>(),
                        v.as<float>(), g.as<float>(), beta.as<float>(), {}, tokens);
  for (int64_t t : {T, T, int64_t{1}, int64_t{1}})
    gdn_decode(dev, S.as<float>(), q.as<float>(), k.as<float>(), v.as<float>(), g.as<float>(), beta.as<float>(), t, Hk,
               Hv, D, D, o.as<float>());
  dev.synchronize("profile");
}

}  // namespace

int main(int argc, char** argv) {
  g_print_passes = false;  // this tool prints failures only (hundreds of checks)
  bool quick = false, bench = true, ncu = false;
  std::string json, only;  // only: run just the phases whose name contains it
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") quick = true, bench = false;
    else if (a == "--no-bench") bench = false;
    else if (a == "--ncu") ncu = true;
    else if (a == "--json" && i + 1 < argc) json = argv[++i];
    else if (a == "--kernels" && i + 1 < argc) g_kernels = argv[++i];
    else if (a == "--gm-sweep") g_gm_sweep = true;
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--quick] [--no-bench] [--ncu] [--json PATH] [--kernels int,gmma,tc,simt] [--gm-sweep] [--only PHASE]\n", argv[0]);
      return 2;
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    if (CudaDevice::device_count() == 0) {
      std::fprintf(stderr, "[mere_cuda_check] no CUDA device: expected at least 1, got 0\n");
      return 3;
    }
    CudaDevice dev(0);
    if (ncu) {
      profile_launches(dev);
      return 0;
    }
    g_report.device = dev.describe();
    std::printf("%s\n", g_report.device.c_str());
    auto phase = [&](const char* name, const std::function<void()>& f) {
      if (std::string(name).find(only) == std::string::npos) return;
      const auto a = std::chrono::steady_clock::now();
      const int before = g_report.failures;
      f();
      dev.synchronize(name);
      std::printf("[%s] done in %.1f s, %d new failures\n", name,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count(),
                  g_report.failures - before);
      std::fflush(stdout);
    };
    phase("rms_norm", [&] { check_rms_norm(dev); });
    phase("src_mv", [&] { check_src_matvec(dev); });
    phase("gdn", [&] { check_gdn(dev); });
    phase("attention", [&] { check_attention(dev, quick); });
    phase("argmax", [&] { check_argmax(dev); });
    phase("moe_route", [&] { check_moe_route(dev); });
    phase("qmatvec", [&] { check_qmatvec(dev, quick); });
    if (bench) {
      phase("bandwidth", [&] { bench_bandwidth(dev); });
      phase("bench qmatvec", [&] { bench_qmatvec(dev); });
      phase("bench others", [&] { bench_others(dev); });
      phase("bench barrier", [&] { bench_barrier(dev); });
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    ++g_report.failures;
  }
  return finish_report(json, t0);
}
