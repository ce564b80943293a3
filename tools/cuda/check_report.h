// Shared by the GPU check tools (mere_cuda_check, mere_prefill_check, mere_glue_check): the seeded
// random inputs, the report of checks and benchmarks with its JSON file, NMSE / element-wise
// comparison, and the device-buffer helpers. Header-only; each tool is its own program.
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cuda/device.h"

namespace mere::cuda::checktool {

// ---------------------------------------------------------------- random numbers (splitmix64)
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 0x1234567ull) {}
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform(float a, float b) { return a + (b - a) * static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }
};

inline std::vector<float> random_vec(size_t n, uint64_t seed, float a = -1.0f, float b = 1.0f) {
  Rng r(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = r.uniform(a, b);
  return v;
}

// ---------------------------------------------------------------- the report (JSON lines)
struct Report {
  std::vector<std::string> checks, bench;
  std::string device;
  int failures = 0, passes = 0;
};
inline Report g_report;
inline double g_copy_gbs = 0;     // the run's measured copy bandwidth (0: not measured)
inline bool g_print_passes = true;  // false: only failing checks are printed

inline std::string jnum(double v) {
  if (!std::isfinite(v)) return "null";
  char b[64];
  std::snprintf(b, sizeof(b), "%.6g", v);
  return b;
}

inline bool record_bool(const std::string& name, bool ok, const std::string& detail) {
  std::ostringstream o;
  o << "{\"check\":\"" << name << "\",\"pass\":" << (ok ? "true" : "false") << ",\"detail\":\"" << detail << "\"}";
  g_report.checks.push_back(o.str());
  if (ok) ++g_report.passes;
  else ++g_report.failures;
  if (!ok || g_print_passes) std::printf("%s %s: %s\n", ok ? "ok  " : "FAIL", name.c_str(), detail.c_str());
  std::fflush(stdout);
  return ok;
}

inline void write_json(const std::string& path, double seconds) {
  std::ofstream f(path);
  f << "{\n\"device\": \"" << g_report.device << "\",\n\"copy_gbs\": " << jnum(g_copy_gbs)
    << ",\n\"checks_passed\": " << g_report.passes << ",\n\"checks_failed\": " << g_report.failures
    << ",\n\"seconds\": " << jnum(seconds) << ",\n\"checks\": [\n";
  for (size_t i = 0; i < g_report.checks.size(); ++i)
    f << "  " << g_report.checks[i] << (i + 1 < g_report.checks.size() ? ",\n" : "\n");
  f << "],\n\"bench\": [\n";
  for (size_t i = 0; i < g_report.bench.size(); ++i)
    f << "  " << g_report.bench[i] << (i + 1 < g_report.bench.size() ? ",\n" : "\n");
  f << "]\n}\n";
}

// A tool's summary: the JSON file (when a path was given), the totals line, the exit status.
inline int finish_report(const std::string& json, std::chrono::steady_clock::time_point t0) {
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!json.empty()) write_json(json, secs);
  std::printf("checks: %d passed, %d failed (%.1f s)\n", g_report.passes, g_report.failures, secs);
  return g_report.failures == 0 ? 0 : 1;
}

// One phase of a tool: run f, wait for the device, count an exception as a failure and go on to
// the next phase; print the phase's time and its new failures.
inline void run_phase(CudaDevice& dev, const char* name, const std::function<void()>& f) {
  const auto a = std::chrono::steady_clock::now();
  const int before = g_report.failures;
  try {
    f();
    dev.synchronize(name);
  } catch (const std::exception& e) {
    std::printf("FAIL [%s] threw: %s\n", name, e.what());
    ++g_report.failures;
  }
  std::printf("[%s] done in %.1f s, %d new failures\n", name,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count(), g_report.failures - before);
  std::fflush(stdout);
}

// ---------------------------------------------------------------- comparison
struct Metrics {
  double nmse = 0, max_abs = 0, rms_ref = 0;
  size_t nonfinite = 0, out_of_bound = 0, n = 0;
};

// |got - ref| <= atol_rms * rms(ref) + rtol * |ref| element-wise; NMSE = sum d^2 / sum ref^2.
inline Metrics compare(const float* got, const float* ref, size_t n, double atol_rms, double rtol) {
  Metrics m;
  m.n = n;
  double ss_ref = 0, ss_d = 0;
  for (size_t i = 0; i < n; ++i) ss_ref += static_cast<double>(ref[i]) * ref[i];
  m.rms_ref = std::sqrt(ss_ref / static_cast<double>(std::max<size_t>(n, 1)));
  const double atol = atol_rms * m.rms_ref + 1e-30;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(got[i]) || !std::isfinite(ref[i])) {
      ++m.nonfinite;
      continue;
    }
    const double d = static_cast<double>(got[i]) - ref[i];
    ss_d += d * d;
    m.max_abs = std::max(m.max_abs, std::fabs(d));
    if (std::fabs(d) > atol + rtol * std::fabs(ref[i])) ++m.out_of_bound;
  }
  m.nmse = ss_ref > 0 ? ss_d / ss_ref : ss_d;
  return m;
}

// ---------------------------------------------------------------- device buffers
template <class T>
DeviceBuffer to_device(CudaDevice& dev, const std::vector<T>& v, const char* what) {
  DeviceBuffer b = dev.alloc(std::max<size_t>(v.size(), 1) * sizeof(T), what);
  if (!v.empty()) dev.upload(b.get(), v.data(), v.size() * sizeof(T));
  return b;
}
template <class T>
std::vector<T> from_device(CudaDevice& dev, const DeviceBuffer& b, size_t n) {
  std::vector<T> v(n);
  dev.download(v.data(), b.get(), n * sizeof(T));
  return v;
}
// all-ones bytes: NaN as floats, -1 as integers
inline void poison(CudaDevice& dev, DeviceBuffer& b) { dev.fill_bytes(b.get(), 0xFF, b.bytes()); }

}  // namespace mere::cuda::checktool
