// Walks ModelWeights to count parameters and bytes.
#include "model/model_stats.h"

namespace mere {
namespace {

struct Acc {
  int64_t params = 0, active = 0;
  size_t bytes = 0;
  void m(const Matrix& x, bool active_too = true) {
    if (x.empty()) return;
    params += x.rows * x.cols;
    if (active_too) active += x.rows * x.cols;
    bytes += x.storage_bytes();
  }
  void v(const Vec& x) {
    params += static_cast<int64_t>(x.size());
    active += static_cast<int64_t>(x.size());
    bytes += x.size() * 4;
  }
  void mlp(const MlpWeights& x, bool active_too = true) {
    m(x.gate, active_too);
    m(x.up, active_too);
    m(x.down, active_too);
  }
};

void layer(Acc& a, const ModelConfig& c, const LayerWeights& L) {
  a.v(L.input_norm);
  a.v(L.post_norm);
  if (L.kind == LayerKind::Full) {
    a.m(L.attn.q_proj), a.m(L.attn.k_proj), a.m(L.attn.v_proj), a.m(L.attn.o_proj);
    a.v(L.attn.q_norm), a.v(L.attn.k_norm);
  } else {
    const GdnWeights& g = L.gdn;
    a.m(g.in_proj_qkv), a.m(g.in_proj_z), a.m(g.in_proj_b), a.m(g.in_proj_a), a.m(g.out_proj);
    a.v(g.conv), a.v(g.dt_bias), a.v(g.neg_a), a.v(g.norm);
  }
  if (!c.is_moe) {
    a.mlp(L.mlp);
    return;
  }
  a.m(L.moe.router);
  for (const auto& e : L.moe.experts) a.mlp(e, false);
  if (!L.moe.experts.empty()) {
    const auto& e = L.moe.experts[0];
    a.active += c.experts_per_tok * (e.gate.rows * e.gate.cols + e.up.rows * e.up.cols + e.down.rows * e.down.cols);
  }
  a.mlp(L.moe.shared);
  a.m(L.moe.shared_gate);
}

}  // namespace

ModelStats compute_model_stats(const ModelConfig& c, const ModelWeights& w) {
  ModelStats s;
  Acc main;
  main.m(w.embed, false);
  if (w.lm_head.data != w.embed.data) main.m(w.lm_head);
  else main.active += w.lm_head.rows * w.lm_head.cols;
  main.active += w.embed.cols;  // one embedding row per token
  main.v(w.final_norm);
  for (const auto& L : w.layers) layer(main, c, L);
  s.params_main = main.params;
  s.params_active = main.active;
  s.weight_bytes_main = main.bytes;
  if (w.mtp.present) {
    Acc m;
    m.v(w.mtp.pre_fc_norm_embedding), m.v(w.mtp.pre_fc_norm_hidden), m.v(w.mtp.norm);
    m.m(w.mtp.fc);
    layer(m, c, w.mtp.layer);
    s.params_mtp = m.params;
    s.weight_bytes_mtp = m.bytes;
  }
  s.kv_bytes_per_token = static_cast<size_t>(c.num_full_layers() * 2 * c.num_kv_heads * c.head_dim) * 4;
  s.state_bytes = static_cast<size_t>(c.num_linear_layers()) *
                  static_cast<size_t>(c.lin_v_heads * c.lin_v_dim * c.lin_k_dim + (c.conv_kernel - 1) * c.conv_dim()) * 4;
  return s;
}

}  // namespace mere
