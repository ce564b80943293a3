// CudaEngine::tune_matvecs (MERE_CUDA_MV_TUNE, default 1): the engine's 1-token matvec launches, grouped as
// linear / linear_shared / accumulate_prepared / the lm_head launch them, timed once at load with
// every integer-contract shape (qmatvec_tune.h). Every layer of one kind has the same launches, so
// the first of each kind stands for all; the MTP head's launches share their shapes with the main
// layers except its fc.
#include <cstdio>

#include "backend/cuda/engine/engine.h"

namespace mere::cuda {

void CudaEngine::tune_matvecs() {
  if (!matvec_tune_enabled()) return;
  DeviceGuard guard(dev_.ordinal());
  // the launches exactly as the forward groups them (one multi launch when fused and every matrix
  // is quantised alike, else one launch each); outputs into scratch, never accumulated
  auto tune = [&](std::initializer_list<std::pair<const DMat*, float*>> ms) {
    QMatvecOut o[kMaxMultiMatrices];
    int n = 0;
    for (const auto& [W, y] : ms)
      if (W->quantized() && W->count == 1) o[n++] = QMatvecOut{W->qview(), y, false};
    if (n == 0) return;
    // the prepared input's values do not change a launch's time; zeros keep every read defined
    dev_.fill_bytes(qws_, 0, static_cast<size_t>(qmatvec_workspace_floats(1, o[0].W.cols, 4)) * 4);
    if (fuse_ && common_bits(ms)) {
      mv_shapes_.tune(dev_, o, n, qws_, 1);
      return;
    }
    for (int i = 0; i < n; ++i) mv_shapes_.tune(dev_, &o[i], 1, qws_, 1);
  };
  bool gdn = false, attn = false;
  auto layer = [&](const DLayer& L) {
    if (L.kind == LayerKind::Full) {
      tune({{&L.attn.q, qg_}, {&L.attn.k, kk_}, {&L.attn.v, vv_}});
      tune({{&L.attn.o, o_}});
    } else {
      tune({{&L.gdn.qkv, raw_}, {&L.gdn.z, z_}, {&L.gdn.b, gb_}, {&L.gdn.a, ga_}});
      tune({{&L.gdn.out, o_}});
    }
    if (!cfg_.is_moe) {
      tune({{&L.mlp.gate, f1_}, {&L.mlp.up, f2_}});
      tune({{&L.mlp.down, o_}});
    } else {
      tune({{&L.router, rlog_}, {&L.shared_gate, sg_}});  // 4-bit routers only (8-bit keeps its shape)
    }
  };
  for (const DLayer& L : layers_) {
    bool& seen = L.kind == LayerKind::Full ? attn : gdn;
    if (!seen) layer(L);
    seen = true;
  }
  tune({{&lm_head_, logits_}});
  if (has_mtp_) {
    tune({{&mtp_fc_, o_}});
    layer(mtp_layer_);
  }
  dev_.synchronize("cuda matvec tuning");
}

std::string CudaEngine::matvec_shapes_summary() const {
  std::string s;
  for (const MatvecTuneRecord& r : mv_shapes_.records()) {
    std::string rows;
    for (int64_t n : r.rows) rows += (rows.empty() ? "" : "+") + std::to_string(n);
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s[%s,%lld] %s %.1f us (default %.1f)", s.empty() ? "" : "; ", rows.c_str(),
                  static_cast<long long>(r.cols), r.chosen.c_str(), r.chosen_us, r.default_us);
    s += buf;
  }
  return s;
}

}  // namespace mere::cuda
