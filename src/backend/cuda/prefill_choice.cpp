// PrefillGemmChoices (prefill_choice.h): both prefill GEMM paths timed on the engine's own shapes.
#include "backend/cuda/prefill_choice.h"

#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cstdio>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/stream_timer.h"

namespace mere::cuda {
namespace {

constexpr int kRounds = 3;     // rounds over both paths (the median kept): drift hits both alike
constexpr int kCalls = 3;      // calls timed back to back a round
constexpr double kMargin = 0.98;

// µs a call: kCalls calls back to back between two events
template <typename F>
double time_us(CudaDevice& dev, StreamTimer& timer, F&& call) {
  return 1000.0 * timer.ms(dev.stream(), [&] {
    for (int i = 0; i < kCalls; ++i) call();
  }) / kCalls;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The ws GEMM on stream-K and (when `whole`) on whole tiles against another way of doing the same
// work: a first call each (kernel attributes, tensor-map entry point, cuBLASLt heuristics), then
// kRounds rounds over all of them; medians, and the ws grid kept (whole tiles when >= 2% faster).
struct Timed {
  double streamk_us = 0, whole_us = 0, other_us = 0, ws_us = 0;
  WsGrid grid = WsGrid::StreamK;
};
template <class StreamK, class Whole, class Other>
Timed time_paths(CudaDevice& dev, StreamTimer& timer, bool whole, StreamK&& run_sk, Whole&& run_whole,
                 Other&& run_other) {
  run_sk();
  if (whole) run_whole();
  run_other();
  std::vector<double> a, w, b;
  for (int r = 0; r < kRounds; ++r) {
    a.push_back(time_us(dev, timer, run_sk));
    if (whole) w.push_back(time_us(dev, timer, run_whole));
    b.push_back(time_us(dev, timer, run_other));
  }
  Timed t;
  t.streamk_us = median(a), t.other_us = median(b), t.whole_us = whole ? median(w) : 0;
  t.grid = whole && t.whole_us < kMargin * t.streamk_us ? WsGrid::WholeTiles : WsGrid::StreamK;
  t.ws_us = t.grid == WsGrid::WholeTiles ? t.whole_us : t.streamk_us;
  return t;
}

// An NVTX range of its own, so a profile of the first prompt can leave these launches out
// (`ncu --nvtx --nvtx-exclude "mere.prefill_choice/"`, tools/cuda/engine_run.sh ncupf27)
struct ChoiceRange {
  ChoiceRange() { nvtxRangePushA("mere.prefill_choice"); }
  ~ChoiceRange() { nvtxRangePop(); }
};

}  // namespace

void PrefillGemmChoices::measure(CudaDevice& dev, const std::vector<QWeightView>& mats, BlasGemm& blas,
                                 WgemmStreamK& ws, const uint16_t* xq, int64_t T) {
  MERE_CHECK(ws.ws(), "cuda prefill", "the GEMM choice needs a warp-specialised wgmma form, got ",
             wgemm_form_name(ws.form()));
  DeviceGuard guard(dev.ordinal());
  std::vector<const QWeightView*> shapes;  // the first matrix of each distinct shape
  int64_t max_rows = 0;
  for (const QWeightView& W : mats) {
    if (!wgemm_supported(dev, W)) continue;
    const bool seen = std::any_of(shapes.begin(), shapes.end(),
                                  [&](const QWeightView* o) { return o->rows == W.rows && o->cols == W.cols; });
    if (seen) continue;
    MERE_CHECK(W.rows * W.cols <= blas.max_weights(), "cuda prefill", "the cuBLASLt scratch (", blas.max_weights(),
               " weights) cannot hold [", W.rows, ", ", W.cols, "] for the GEMM choice");
    shapes.push_back(&W);
    max_rows = std::max(max_rows, W.rows);
  }
  records_.clear();
  if (shapes.empty()) return;
  const ChoiceRange range;
  DeviceBuffer y = dev.alloc(static_cast<size_t>(T * max_rows) * 4, "prefill GEMM choice output");
  StreamTimer timer;
  for (const QWeightView* W : shapes) {
    auto run_ws = [&] { wgemm(dev, *W, xq, T, y.as<float>(), W->rows, &ws); };
    auto run_whole = [&] { wgemm(dev, *W, xq, T, y.as<float>(), W->rows, &ws, WsGrid::WholeTiles); };
    auto run_blas = [&] {
      blas.begin_pass();
      blas.run(*W, xq, T, y.as<float>(), W->rows);
    };
    const Timed t = time_paths(dev, timer, whole_ok_, run_ws, run_whole, run_blas);
    PrefillGemmChoice c;
    c.rows = W->rows, c.cols = W->cols, c.streamk_us = t.streamk_us, c.whole_us = t.whole_us, c.blas_us = t.other_us;
    c.grid = t.grid, c.ws_us = t.ws_us;
    c.ws = c.ws_us < kMargin * c.blas_us;
    records_.push_back(c);
  }
  dev.synchronize("prefill GEMM choice");
}

void PrefillGemmChoices::measure_groups(CudaDevice& dev, const std::vector<std::vector<QWeightView>>& groups,
                                        BlasGemm* blas, WgemmStreamK& ws, const uint16_t* xq, int64_t T) {
  MERE_CHECK(ws.ws(), "cuda prefill", "the group choice needs a warp-specialised wgmma form, got ",
             wgemm_form_name(ws.form()));
  DeviceGuard guard(dev.ordinal());
  groups_.clear();
  any_grouped_ = false;
  std::vector<const std::vector<QWeightView>*> todo;  // the first group of each distinct shape list
  int64_t max_rows = 0;
  for (const std::vector<QWeightView>& g : groups) {
    const bool fits = g.size() >= 2 && g.size() <= static_cast<size_t>(kWgemmMaxGroup) &&
                      std::all_of(g.begin(), g.end(), [&](const QWeightView& W) {
                        return wgemm_supported(dev, W) && W.cols == g[0].cols;
                      });
    if (!fits) continue;
    const bool seen = std::any_of(todo.begin(), todo.end(), [&](const std::vector<QWeightView>* o) {
      return o->size() == g.size() && std::equal(g.begin(), g.end(), o->begin(), [](const QWeightView& a, const QWeightView& b) {
               return a.rows == b.rows && a.cols == b.cols;
             });
    });
    if (seen) continue;
    todo.push_back(&g);
    for (const QWeightView& W : g) max_rows = std::max(max_rows, W.rows);
  }
  if (todo.empty()) return;
  const ChoiceRange range;
  // each matrix its own output (the group's launch writes them all)
  std::vector<DeviceBuffer> ys;
  for (int i = 0; i < kWgemmMaxGroup; ++i) ys.push_back(dev.alloc(static_cast<size_t>(T * max_rows) * 4, "prefill GEMM group choice output"));
  StreamTimer timer;
  for (const std::vector<QWeightView>* g : todo) {
    const int n = static_cast<int>(g->size());
    WgemmOut outs[kWgemmMaxGroup];
    for (int i = 0; i < n; ++i) outs[i] = WgemmOut{(*g)[i], ys[i].as<float>(), (*g)[i].rows};
    auto run_group = [&] { wgemm_group(dev, outs, n, xq, T, ws); };
    auto run_whole = [&] { wgemm_group(dev, outs, n, xq, T, ws, WsGrid::WholeTiles); };
    auto run_separate = [&] {
      if (blas != nullptr) blas->begin_pass();
      for (int i = 0; i < n; ++i) {
        if (this->ws(dev, outs[i].W) || blas == nullptr)
          wgemm(dev, outs[i].W, xq, T, outs[i].y, outs[i].ldy, &ws, grid(outs[i].W));
        else blas->run(outs[i].W, xq, T, outs[i].y, outs[i].ldy);
      }
    };
    const Timed t = time_paths(dev, timer, whole_ok_, run_group, run_whole, run_separate);
    PrefillGroupChoice c;
    for (const QWeightView& W : *g) c.rows.push_back(W.rows);
    c.cols = (*g)[0].cols;
    c.streamk_us = t.streamk_us, c.whole_us = t.whole_us, c.separate_us = t.other_us;
    c.grid = t.grid, c.group_us = t.ws_us;
    c.grouped = c.group_us < kMargin * c.separate_us;
    any_grouped_ = any_grouped_ || c.grouped;
    groups_.push_back(std::move(c));
  }
  dev.synchronize("prefill GEMM group choice");
}

bool PrefillGemmChoices::grouped(const WgemmOut* outs, int n, WsGrid* grid) const {
  for (const PrefillGroupChoice& c : groups_) {
    if (!c.grouped || static_cast<int>(c.rows.size()) != n || c.cols != outs[0].W.cols) continue;
    bool same = true;
    for (int i = 0; i < n; ++i) same = same && outs[i].W.rows == c.rows[static_cast<size_t>(i)] && outs[i].W.cols == c.cols;
    if (same) {
      *grid = c.grid;
      return true;
    }
  }
  return false;
}

const PrefillGemmChoice* PrefillGemmChoices::record(const QWeightView& W) const {
  for (const PrefillGemmChoice& c : records_)
    if (c.rows == W.rows && c.cols == W.cols) return &c;
  return nullptr;
}

WsGrid PrefillGemmChoices::grid(const QWeightView& W) const {
  const PrefillGemmChoice* c = record(W);
  return c != nullptr ? c->grid : WsGrid::StreamK;
}

bool PrefillGemmChoices::ws(const CudaDevice& dev, const QWeightView& W) const {
  // a shape is measured on its first supported matrix; another of the same shape may still be one the
  // ws GEMM cannot read (MERE_CUDA_QMATVEC=mma uploads dense matrices tiled, the experts stay MLX)
  if (!wgemm_supported(dev, W)) return false;
  const PrefillGemmChoice* c = record(W);
  return c != nullptr && c->ws;
}

std::string PrefillGemmChoices::summary() const {
  std::string s;
  for (const PrefillGemmChoice& c : records_) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "%s[%lld,%lld] %s %.1f us (%s %.1f)", s.empty() ? "" : "; ",
                  static_cast<long long>(c.rows), static_cast<long long>(c.cols),
                  !c.ws ? "blas" : c.grid == WsGrid::WholeTiles ? "ws whole tiles" : "ws",
                  c.ws ? c.ws_us : c.blas_us, c.ws ? "blas" : "ws", c.ws ? c.blas_us : c.ws_us);
    s += buf;
  }
  for (const PrefillGroupChoice& c : groups_) {
    std::string rows;
    for (const int64_t r : c.rows) rows += (rows.empty() ? "" : "+") + std::to_string(r);
    char buf[160];
    std::snprintf(buf, sizeof buf, "; group [%s,%lld] %s %.1f us (%s %.1f)", rows.c_str(), static_cast<long long>(c.cols),
                  !c.grouped ? "separate" : c.grid == WsGrid::WholeTiles ? "one launch, whole tiles" : "one launch",
                  c.grouped ? c.group_us : c.separate_us, c.grouped ? "separate" : "one launch",
                  c.grouped ? c.separate_us : c.group_us);
    s += buf;
  }
  return s;
}

}  // namespace mere::cuda
