// MatvecShapeTable (qmatvec_tune.h): each 1-token matvec launch of the engine timed with every
// compiled integer-contract shape, in a CUDA graph of back-to-back launches (as the decode graph
// runs them, programmatic dependent launch included).
#include "backend/cuda/qmatvec_tune.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/env_choice.h"
#include "backend/cuda/qmatvec_int.h"
#include "backend/cuda/stream_timer.h"
#include "core/error.h"

namespace mere::cuda {
namespace {

constexpr int kLaunches = 16;  // launches a graph: ~0.2-4 ms a replay at the real shapes
constexpr int kReplays = 3;    // timed replays a round (the fastest kept)
constexpr int kRounds = 3;     // rounds over all shapes (the median kept): drift hits every shape alike
constexpr double kMargin = 0.98;

// Owns a captured graph; frees it on every path (capture errors included).
struct CapturedGraph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~CapturedGraph() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
  }
};

// µs a launch of `cfg` on this launch: the fastest of kReplays replays of a kLaunches graph. With
// sets > 1, outs holds `sets` launches of the same shape (n matrices each, other layers' weights)
// and the graph cycles through them, so each launch reads weights the previous ones did not.
double graph_us(CudaDevice& dev, const QMatvecOut* outs, int n, int sets, const float* ws, int64_t T,
                const QMatvecConfig& cfg) {
  cudaStream_t s = dev.stream();
  // one launch outside the capture: first-use set-up (shared-memory attributes, occupancy queries)
  // happens here, not inside the graph
  qmatvec_multi(dev, outs, n, ws, T, cfg);
  CapturedGraph t;
  MERE_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  try {
    for (int i = 0; i < kLaunches; ++i) qmatvec_multi(dev, outs + (i % sets) * n, n, ws, T, cfg);
  } catch (...) {
    cudaStreamEndCapture(s, &t.graph);
    throw;
  }
  MERE_CUDA_CHECK(cudaStreamEndCapture(s, &t.graph));
  MERE_CUDA_CHECK(cudaGraphInstantiate(&t.exec, t.graph, 0));
  StreamTimer timer;
  MERE_CUDA_CHECK(cudaGraphLaunch(t.exec, s));  // warm: instruction cache, clocks
  float best = 0;
  for (int r = 0; r < kReplays; ++r) {
    const float ms = timer.ms(s, [&] { MERE_CUDA_CHECK(cudaGraphLaunch(t.exec, s)); });
    if (r == 0 || ms < best) best = ms;
  }
  return 1000.0 * best / kLaunches;
}

// The integer-contract shapes compiled for T: register R rows a batch x U chunks in flight, the
// per-launch fit, the cp.async ring R rows x D stages.
std::vector<QMatvecConfig> candidates(int64_t T, int mode) {
  std::vector<QMatvecConfig> out;
  auto add = [&](QMatvecConfig c) {
    if (qmatvec_config_available(4, T, c)) out.push_back(c);
  };
  for (auto [R, U] : {std::pair{4, 1}, {3, 1}, {2, 1}, {2, 2}, {8, 1}, {detail::kIntFitRows, 1}}) {
    QMatvecConfig c;
    c.integer = 1;
    c.rows_per_warp = R;
    c.unroll = U;
    add(c);
  }
  if (mode == 2) {  // session 24: 4 rows x 2 chunks, the double-buffered register kernel (T = 1)
    add(QMatvecConfig{4, 2, 0, 0, 1});
    for (int R : {2, 4, 8}) add(QMatvecConfig{R, 1, 0, detail::kIntDoubleBuffer, 1});
  }
  for (auto [R, D] : {std::pair{4, 3}, {2, 4}}) {
    QMatvecConfig c;
    c.integer = detail::kIntPipelined;
    c.rows_per_warp = R;
    c.unroll = 1;
    c.stages = D;
    add(c);
  }
  return out;
}

// Records hold 4-bit MLX-layout launches only (tune skips the others), so an 8-bit or tiled launch
// of the same shape never takes a 4-bit integer config.
bool same_launch(const MatvecTuneRecord& r, const QMatvecOut* outs, int n, int64_t T) {
  if (outs[0].W.bits != 4 || outs[0].W.tiled || r.T != T || r.cols != outs[0].W.cols || static_cast<int>(r.rows.size()) != n) return false;
  for (int i = 0; i < n; ++i)
    if (r.rows[static_cast<size_t>(i)] != outs[i].W.rows) return false;
  return true;
}

}  // namespace

int matvec_tune_mode() {
  // on since session 16 (H100: 27B decode +1.0%, 35B-A3B +1.5%); 2, the cold timing with the extra
  // shapes, the default since session 24 (H200: 27B decode +0.5%, 35B-A3B +0.6% over 1, engine_check
  // 54/54 under it; docs/cuda-kernels.md §1 v13); 1: session 16's warm timing
  static const int mode = [] {
    const int c = env_choice("MERE_CUDA_MV_TUNE", {"0", "1", "2"});
    return c < 0 ? 2 : c;
  }();
  return mode;
}

bool matvec_tune_enabled() { return matvec_tune_mode() != 0; }

std::string matvec_shape_name(const QMatvecConfig& c) {
  if (c.rows_per_warp == 0 || c.unroll == 0) return "default";
  if (c.integer == detail::kIntPipelined)
    return "pipe R" + std::to_string(c.rows_per_warp) + "D" + std::to_string(c.stages);
  if (c.rows_per_warp == detail::kIntFitRows) return "fit";
  if (c.stages == detail::kIntDoubleBuffer) return "R" + std::to_string(c.rows_per_warp) + "DB";
  return "R" + std::to_string(c.rows_per_warp) + "U" + std::to_string(c.unroll);
}

const MatvecTuneRecord* MatvecShapeTable::find(const QMatvecOut* outs, int n, int64_t T) const {
  for (const MatvecTuneRecord& r : records_)
    if (same_launch(r, outs, n, T)) return &r;
  return nullptr;
}

QMatvecConfig MatvecShapeTable::get(const QMatvecOut* outs, int n, int64_t T) const {
  const MatvecTuneRecord* r = n >= 1 ? find(outs, n, T) : nullptr;
  return r ? r->cfg : QMatvecConfig{};
}

QMatvecConfig MatvecShapeTable::get_register(const QMatvecOut* outs, int n, int64_t T) const {
  const MatvecTuneRecord* r = n >= 1 ? find(outs, n, T) : nullptr;
  return r ? r->register_cfg : QMatvecConfig{};
}

void MatvecShapeTable::tune(CudaDevice& dev, const QMatvecOut* outs, int n, int sets, const float* ws, int64_t T) {
  MERE_CHECK(n >= 1 && n <= kMaxMultiMatrices, "matvec tuning", "matrix count out of range: ", n);
  MERE_CHECK(sets >= 1, "matvec tuning", "launch set count out of range: ", sets);
  for (int k = 1; k < sets; ++k)
    for (int i = 0; i < n; ++i)
      MERE_CHECK(outs[k * n + i].W.same_shape(outs[i].W), "matvec tuning", "launch set ", k,
                 " differs in shape from set 0 (matrix ", i, ")");
  if (find(outs, n, T) != nullptr || outs[0].W.bits != 4 || outs[0].W.tiled) return;
  int64_t total = 0;
  for (int i = 0; i < n; ++i) total += outs[i].W.rows;
  const QMatvecConfig def = qmatvec_default_config(4, T, total);
  if (def.integer != 1 && def.integer != detail::kIntPipelined) return;  // another contract's kernel
  std::vector<QMatvecConfig> cands = candidates(T, matvec_tune_mode());
  if (!detail::q4pipe_supported(outs, n, outs[0].W.cols))  // else it would time the register fallback
    std::erase_if(cands, [](const QMatvecConfig& c) { return c.integer == detail::kIntPipelined; });
  std::vector<std::vector<double>> us(cands.size() + 1);
  for (int round = 0; round < kRounds; ++round) {
    us[0].push_back(graph_us(dev, outs, n, sets, ws, T, QMatvecConfig{}));
    for (size_t c = 0; c < cands.size(); ++c) us[c + 1].push_back(graph_us(dev, outs, n, sets, ws, T, cands[c]));
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  MatvecTuneRecord rec;
  for (int i = 0; i < n; ++i) rec.rows.push_back(outs[i].W.rows);
  rec.cols = outs[0].W.cols;
  rec.T = T;
  rec.default_us = median(us[0]);
  rec.tried.emplace_back("default (" + matvec_shape_name(def) + ")", rec.default_us);
  rec.chosen = "default (" + matvec_shape_name(def) + ")";
  rec.chosen_us = rec.default_us;
  double best = rec.default_us * kMargin;
  // the register kernel's best on its own: the default when it is one, else the first register shape
  double best_reg = def.integer == 1 ? rec.default_us * kMargin : 0;
  bool have_reg = def.integer == 1;
  for (size_t c = 0; c < cands.size(); ++c) {
    const double m = median(us[c + 1]);
    rec.tried.emplace_back(matvec_shape_name(cands[c]), m);
    if (m < best) best = m, rec.cfg = cands[c], rec.chosen = matvec_shape_name(cands[c]), rec.chosen_us = m;
    if (cands[c].integer == 1 && (!have_reg || m < best_reg)) best_reg = m, rec.register_cfg = cands[c], have_reg = true;
  }
  records_.push_back(std::move(rec));
}

}  // namespace mere::cuda
