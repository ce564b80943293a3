// CudaEngine::tune_matvecs (MERE_CUDA_MV_TUNE, default 2): the engine's 1-token matvec launches, grouped as
// linear / linear_shared / accumulate_prepared / the lm_head launch them, timed once at load with
// every integer-contract shape (qmatvec_tune.h). Every layer of one kind has the same launches, so
// the first of each kind stands for all (=1), or up to 16 of each kind are timed in turn so the
// weights are cold as in a decode step (=2, the default); the MTP head's launches share their shapes with the
// main layers except its fc.
#include <cstdio>
#include <vector>

#include "backend/cuda/engine/engine.h"

namespace mere::cuda {

void CudaEngine::tune_matvecs() {
  if (!matvec_tune_enabled()) return;
  DeviceGuard guard(dev_.ordinal());
  using Launch = std::vector<std::pair<const DMat*, float*>>;
  // one launch exactly as the forward groups it (one multi launch when fused and every matrix is
  // quantised alike, else one launch each), given for one or more layers of its kind (MERE_CUDA_MV_TUNE=2
  // times it across them, cold); outputs into scratch, never accumulated
  auto tune = [&](const std::vector<Launch>& layers) {
    auto quantised = [](const Launch& ms) {
      std::vector<QMatvecOut> q;
      for (const auto& [W, y] : ms)
        if (W->quantized() && W->count == 1) q.push_back(QMatvecOut{W->qview(), y, false});
      return q;
    };
    auto same_shape = [](const std::vector<QMatvecOut>& a, const std::vector<QMatvecOut>& b) {
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i)
        if (!a[i].W.same_shape(b[i].W)) return false;
      return true;
    };
    // the first layer's launch, then the other layers' where they match it (a mixed-precision
    // checkpoint's differing layers are simply left out of the timing)
    const std::vector<QMatvecOut> first = quantised(layers.front());
    const int n = static_cast<int>(first.size());
    if (n == 0) return;
    std::vector<QMatvecOut> o = first;
    for (size_t k = 1; k < layers.size(); ++k) {
      const std::vector<QMatvecOut> q = quantised(layers[k]);
      if (same_shape(q, first)) o.insert(o.end(), q.begin(), q.end());
    }
    const int sets = static_cast<int>(o.size()) / n;
    // the prepared input's values do not change a launch's time; zeros keep every read defined
    dev_.fill_bytes(qws_, 0, static_cast<size_t>(qmatvec_workspace_floats(1, o[0].W.cols, 4)) * 4);
    std::vector<const DMat*> ms;
    for (const auto& m : layers.front()) ms.push_back(m.first);
    if (fuse_ && common_bits(ms.data(), ms.size())) {
      mv_shapes_.tune(dev_, o.data(), n, sets, qws_, 1);
      return;
    }
    for (int i = 0; i < n; ++i) {  // one launch each: set k's matrix i
      std::vector<QMatvecOut> one;
      for (int k = 0; k < sets; ++k) one.push_back(o[static_cast<size_t>(k * n + i)]);
      mv_shapes_.tune(dev_, one.data(), 1, sets, qws_, 1);
    }
  };
  // the layers a launch is timed over: the first of its kind, or (cold) up to 16 of them
  const size_t per_kind = matvec_tune_mode() == 2 ? 16 : 1;
  auto of_kind = [&](bool full) {
    std::vector<const DLayer*> v;
    for (const DLayer& L : layers_)
      if ((L.kind == LayerKind::Full) == full && v.size() < per_kind) v.push_back(&L);
    return v;
  };
  auto each = [&](const std::vector<const DLayer*>& ls, auto launch_of) {
    std::vector<Launch> out;
    for (const DLayer* L : ls) out.push_back(launch_of(*L));
    if (!out.empty()) tune(out);
  };
  auto kind = [&](const std::vector<const DLayer*>& ls) {
    if (ls.empty()) return;
    if (ls.front()->kind == LayerKind::Full) {
      each(ls, [&](const DLayer& L) { return Launch{{&L.attn.q, qg_}, {&L.attn.k, kk_}, {&L.attn.v, vv_}}; });
      each(ls, [&](const DLayer& L) { return Launch{{&L.attn.o, o_}}; });
    } else {
      each(ls, [&](const DLayer& L) {
        return Launch{{&L.gdn.qkv, raw_}, {&L.gdn.z, z_}, {&L.gdn.b, gb_}, {&L.gdn.a, ga_}};
      });
      each(ls, [&](const DLayer& L) { return Launch{{&L.gdn.out, o_}}; });
    }
    if (!cfg_.is_moe) {
      each(ls, [&](const DLayer& L) { return Launch{{&L.mlp.gate, f1_}, {&L.mlp.up, f2_}}; });
      each(ls, [&](const DLayer& L) { return Launch{{&L.mlp.down, o_}}; });
    } else {  // 4-bit routers only (8-bit keeps its shape)
      each(ls, [&](const DLayer& L) { return Launch{{&L.router, rlog_}, {&L.shared_gate, sg_}}; });
    }
  };
  kind(of_kind(false));
  kind(of_kind(true));
  tune({Launch{{&lm_head_, logits_}}});
  if (has_mtp_) {
    tune({Launch{{&mtp_fc_, o_}}});
    kind({&mtp_layer_});
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
