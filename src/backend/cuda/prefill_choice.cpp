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
  // an NVTX range of its own, so a profile of the first prompt can leave these launches out
  // (`ncu --nvtx --nvtx-exclude "mere.prefill_choice/"`, tools/cuda/engine_run.sh ncupf27)
  struct Range {
    Range() { nvtxRangePushA("mere.prefill_choice"); }
    ~Range() { nvtxRangePop(); }
  } range;
  DeviceBuffer y = dev.alloc(static_cast<size_t>(T * max_rows) * 4, "prefill GEMM choice output");
  StreamTimer timer;
  for (const QWeightView* W : shapes) {
    auto run_ws = [&] { wgemm(dev, *W, xq, T, y.as<float>(), W->rows, &ws); };
    auto run_blas = [&] {
      blas.begin_pass();
      blas.run(*W, xq, T, y.as<float>(), W->rows);
    };
    run_ws();  // first use: kernel attributes, tensor-map entry point, cuBLASLt heuristics
    run_blas();
    std::vector<double> a, b;
    for (int r = 0; r < kRounds; ++r) {
      a.push_back(time_us(dev, timer, run_ws));
      b.push_back(time_us(dev, timer, run_blas));
    }
    PrefillGemmChoice c{W->rows, W->cols, median(a), median(b), false};
    c.ws = c.ws_us < kMargin * c.blas_us;
    records_.push_back(c);
  }
  dev.synchronize("prefill GEMM choice");
}

bool PrefillGemmChoices::ws(const CudaDevice& dev, const QWeightView& W) const {
  // a shape is measured on its first supported matrix; another of the same shape may still be one the
  // ws GEMM cannot read (MERE_CUDA_QMATVEC=mma uploads dense matrices tiled, the experts stay MLX)
  if (!wgemm_supported(dev, W)) return false;
  for (const PrefillGemmChoice& c : records_)
    if (c.rows == W.rows && c.cols == W.cols) return c.ws;
  return false;
}

std::string PrefillGemmChoices::summary() const {
  std::string s;
  for (const PrefillGemmChoice& c : records_) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "%s[%lld,%lld] %s %.1f us (%s %.1f)", s.empty() ? "" : "; ",
                  static_cast<long long>(c.rows), static_cast<long long>(c.cols), c.ws ? "ws" : "blas",
                  c.ws ? c.ws_us : c.blas_us, c.ws ? "blas" : "ws", c.ws ? c.blas_us : c.ws_us);
    s += buf;
  }
  return s;
}

}  // namespace mere::cuda
