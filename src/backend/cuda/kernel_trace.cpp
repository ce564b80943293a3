// Host side of the trace builds' in-sequence kernel timing (kernel_trace.h).
#include "backend/cuda/kernel_trace.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/env_choice.h"
#include "core/error.h"

namespace mere::cuda {
namespace {

constexpr size_t kCap = size_t{1} << 20;  // stamps a trace holds

struct TraceState {
  std::mutex mu;
  std::vector<TraceSymbolSetter> setters;
  std::vector<const char*> names;
  unsigned long long* buf = nullptr;  // device: [0] count, [1 .. kCap] stamps (ns)
  bool running = false, done = false;
  ~TraceState() {
    if (running)  // the process ended inside the window: say so rather than leave no file silently
      std::fprintf(stderr, "[kernel trace] the run ended after %zu traced launches, before the last traced pass: "
                   "no summary written (run at least 8 + MERE_CUDA_TRACE_STEPS decode or verification passes)\n",
                   names.size());
  }
};
TraceState& state() {
  static TraceState s;
  return s;
}

void point_symbols(TraceState& t, unsigned long long* p) {
  for (TraceSymbolSetter set : t.setters) set(p);
}

void write_summary(const std::vector<const char*>& names, const std::vector<unsigned long long>& stamps,
                   int64_t steps) {
  // the time a kernel adds: from its stamp to the next kernel's; the last launch has no successor
  struct Acc {
    int64_t n = 0;
    double ns = 0;
  };
  std::map<std::string, Acc> by;
  double total = 0;
  const size_t n = std::min(names.size(), stamps.size());
  for (size_t i = 0; i + 1 < n; ++i) {
    const double d = static_cast<double>(stamps[i + 1] - stamps[i]);
    Acc& a = by[names[i]];
    ++a.n;
    a.ns += d;
    total += d;
  }
  std::vector<std::pair<std::string, Acc>> rows(by.begin(), by.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  FILE* f = std::fopen(trace_out_path().c_str(), "w");
  MERE_CHECK(f != nullptr, "MERE_CUDA_TRACE_OUT", "cannot write '", trace_out_path(), "'");
  std::fprintf(f, "{\"steps\": %lld, \"launches\": %zu, \"stamps\": %zu, \"us_per_step\": %.3f, \"kernels\": [",
               static_cast<long long>(steps), names.size(), stamps.size(), total / 1e3 / static_cast<double>(steps));
  bool first = true;
  for (const auto& [name, a] : rows) {
    std::fprintf(f, "%s\n  {\"name\": \"%s\", \"launches_per_step\": %.2f, \"us_per_step\": %.3f, \"us_each\": %.3f}",
                 first ? "" : ",", name.c_str(), static_cast<double>(a.n) / static_cast<double>(steps),
                 a.ns / 1e3 / static_cast<double>(steps), a.ns / 1e3 / static_cast<double>(a.n));
    first = false;
  }
  std::fprintf(f, "\n]}\n");
  std::fclose(f);
}

}  // namespace

void trace_register_symbol(TraceSymbolSetter set) {
  TraceState& t = state();
  std::lock_guard<std::mutex> lock(t.mu);
  t.setters.push_back(set);
}

void trace_note_launch(const char* what) {
  TraceState& t = state();
  if (!t.running) return;
  std::lock_guard<std::mutex> lock(t.mu);
  t.names.push_back(what);
}

const std::string& trace_out_path() {
  static const std::string path = [] {
    const char* e = std::getenv("MERE_CUDA_TRACE_OUT");
    return std::string(e ? e : "");
  }();
  return path;
}

bool trace_counts_rows(int64_t rows) {
  static const int64_t only = env_int("MERE_CUDA_TRACE_ROWS", 0, 0, 64, "a pass width (0: every width)");
  return only == 0 || rows == only;
}

void trace_step(int64_t step) {
  TraceState& t = state();
  if (trace_out_path().empty() || t.done) return;
  constexpr int64_t kFirst = 8;  // steps before the trace: first-use set-up, clocks
  static const int64_t steps = env_int("MERE_CUDA_TRACE_STEPS", 32, 1, 4096, "a step count");
  if (step == kFirst && !t.running) {
    MERE_CHECK(!t.setters.empty(), "MERE_CUDA_TRACE_OUT", "this build has no kernel trace (cmake -DMERE_CUDA_TRACE=ON)");
    if (t.buf == nullptr) MERE_CUDA_CHECK(cudaMalloc(&t.buf, (kCap + 1) * sizeof(unsigned long long)));
    MERE_CUDA_CHECK(cudaDeviceSynchronize());
    MERE_CUDA_CHECK(cudaMemset(t.buf, 0, sizeof(unsigned long long)));
    point_symbols(t, t.buf);
    MERE_CUDA_CHECK(cudaDeviceSynchronize());
    t.names.clear();
    t.running = true;
  } else if (step == kFirst + steps && t.running) {
    MERE_CUDA_CHECK(cudaDeviceSynchronize());
    t.running = false;
    point_symbols(t, nullptr);
    unsigned long long count = 0;
    MERE_CUDA_CHECK(cudaMemcpy(&count, t.buf, sizeof count, cudaMemcpyDeviceToHost));
    std::vector<unsigned long long> stamps(std::min<size_t>(count, kCap));
    MERE_CUDA_CHECK(cudaMemcpy(stamps.data(), t.buf + 1, stamps.size() * sizeof(unsigned long long),
                               cudaMemcpyDeviceToHost));
    MERE_CHECK(stamps.size() == t.names.size(), "kernel trace", "recorded ", stamps.size(), " kernel stamps for ",
               t.names.size(), " launches: a kernel without its PDL wait in block (0,0,0), or a graph replay");
    write_summary(t.names, stamps, steps);
    t.done = true;
  }
}

}  // namespace mere::cuda
