// Qwen3.5 forward pass (qwen35.md §3-4): embedding -> L x (mixer + FFN, pre-norm residual) ->
// final norm -> lm_head; mixers are gated full attention or GatedDeltaNet; FFN is SwiGLU or MoE.
#include "model/qwen35.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "model/device_engine.h"
#include "ops/ops.h"

namespace mere {

using std::vector;
namespace {
inline size_t sz(int64_t n) { return static_cast<size_t>(n); }
}  // namespace

Qwen35Model::~Qwen35Model() = default;

namespace {
// "cuda" -> 0, "cuda:N" -> N, anything else -> -1
int cuda_ordinal(const std::string& backend) {
  if (backend == "cuda") return 0;
  if (backend.rfind("cuda:", 0) != 0) return -1;
  const std::string n = backend.substr(5);
  MERE_CHECK(!n.empty() && n.size() < 4 && n.find_first_not_of("0123456789") == std::string::npos, "backend",
             "bad device in \"", backend, "\": expected cuda or cuda:N");
  return std::stoi(n);
}
}  // namespace

SequenceMemory Qwen35Model::new_memory() const {
  if (engine_) return SequenceMemory(cfg_, has_mtp(), engine_->new_state());
  return SequenceMemory(cfg_, has_mtp());
}

std::unique_ptr<Qwen35Model> Qwen35Model::load(const std::string& model_dir, const std::string& backend) {
  std::unique_ptr<Qwen35Model> m(new Qwen35Model());
  const int ordinal = cuda_ordinal(backend);
  m->backend_ = make_backend(ordinal >= 0 ? "cuda" : backend);  // fails clearly without CUDA built in
  m->dir_ = model_dir;
  m->cfg_ = load_model_config(model_dir);
  m->store_ = std::make_unique<TensorStore>(model_dir);
  m->w_ = bind_weights(m->cfg_, *m->store_);
  // the backend's one look at every matrix (e.g. the fast CPU backend moves them into huge pages)
  auto prep_mlp = [&](MlpWeights& p) {
    for (Matrix* x : {&p.gate, &p.up, &p.down}) m->backend_->prepare(*x);
  };
  auto prep_layer = [&](LayerWeights& L) {
    if (L.kind == LayerKind::Full)
      for (Matrix* x : {&L.attn.q_proj, &L.attn.k_proj, &L.attn.v_proj, &L.attn.o_proj}) m->backend_->prepare(*x);
    else
      for (Matrix* x : {&L.gdn.in_proj_qkv, &L.gdn.in_proj_z, &L.gdn.in_proj_b, &L.gdn.in_proj_a, &L.gdn.out_proj})
        m->backend_->prepare(*x);
    if (!m->cfg_.is_moe) return prep_mlp(L.mlp);
    m->backend_->prepare(L.moe.router);
    for (auto& e : L.moe.experts) prep_mlp(e);
    prep_mlp(L.moe.shared);
    m->backend_->prepare(L.moe.shared_gate);
  };
  m->backend_->prepare(m->w_.embed);
  m->backend_->prepare(m->w_.lm_head);  // tied: the same storage as embed (a backend must map it once)
  for (auto& L : m->w_.layers) prep_layer(L);
  if (m->w_.mtp.present) {
    m->backend_->prepare(m->w_.mtp.fc);
    prep_layer(m->w_.mtp.layer);
  }
#ifdef MERE_HAVE_CUDA
  if (ordinal >= 0) m->engine_ = make_cuda_engine(m->cfg_, m->w_, ordinal);
#endif
  return m;
}

void Qwen35Model::forward(const int32_t* ids, int64_t T, SequenceMemory& mem, float* hidden, float* logits,
                          LogitsMode mode, const ForwardOptions& opt) const {
  MERE_CHECK(T > 0, "forward", "empty token sequence");
  const int64_t H = cfg_.hidden_size;
  MERE_CHECK(mem.length() + T <= cfg_.max_position_embeddings, "forward", "sequence of ", mem.length() + T,
             " tokens exceeds the context length ", cfg_.max_position_embeddings);
  MERE_CHECK(!opt.row_argmax || (T <= ForwardOptions::kMaxVerifyRows && !opt.argmax), "forward",
             "row_argmax: at most ", ForwardOptions::kMaxVerifyRows, " rows and not with argmax (got ", T, " rows)");
  if (engine_) {
    MERE_CHECK(mem.device() != nullptr, "forward", "a host SequenceMemory was passed to a device model");
    for (int64_t t = 0; t < T; ++t)
      MERE_CHECK(ids[t] >= 0 && ids[t] < cfg_.vocab_size, "embed", "token id ", ids[t],
                 " out of range: vocabulary has ", cfg_.vocab_size, " entries");
    engine_->forward(ids, T, mem, hidden, logits, mode, opt);
    return;
  }
  vector<float> all_rows;  // row_argmax without the caller's logits of every row
  if (opt.row_argmax && (!logits || mode != LogitsMode::All)) {
    all_rows.resize(sz(T * cfg_.vocab_size));
    logits = all_rows.data();
    mode = LogitsMode::All;
  }
  vector<float> argmax_row;
  if (opt.argmax && (!logits || mode == LogitsMode::None)) {
    argmax_row.resize(sz(cfg_.vocab_size));
    logits = argmax_row.data();
    mode = LogitsMode::Last;
  }
  vector<float> x(sz(T * H));
  backend_->embed(w_.embed, ids, T, x.data());
  const int64_t pos0 = mem.length();
  if (opt.trace) {
    opt.trace->layers.resize(sz(cfg_.num_layers));
    opt.trace->rows = T;
  }
  for (int64_t i = 0; i < cfg_.num_layers; ++i) {
    const LayerWeights& L = w_.layers[sz(i)];
    decoder_layer(L, i, x.data(), T, mem, L.kind == LayerKind::Full ? &mem.kv(i) : nullptr, pos0, opt);
  }
  mem.advance(T);
  vector<float> h(sz(T * H));
  ops::rms_norm(x.data(), w_.final_norm.data(), T, H, static_cast<float>(cfg_.rms_norm_eps), h.data());
  if (hidden) std::copy(h.begin(), h.end(), hidden);
  if (logits && mode == LogitsMode::All) backend_->linear(w_.lm_head, h.data(), T, logits);
  if (logits && mode == LogitsMode::Last) backend_->linear(w_.lm_head, h.data() + (T - 1) * H, 1, logits);
  if (opt.argmax) {
    const float* last = logits + (mode == LogitsMode::All ? (T - 1) * cfg_.vocab_size : 0);
    *opt.argmax = static_cast<int32_t>(std::max_element(last, last + cfg_.vocab_size) - last);
  }
  for (int64_t t = 0; opt.row_argmax && t < T; ++t) {
    const float* row = logits + t * cfg_.vocab_size;
    opt.row_argmax[t] = static_cast<int32_t>(std::max_element(row, row + cfg_.vocab_size) - row);
  }
}

void Qwen35Model::mtp_forward(const float* hidden, const int32_t* ids, int64_t T, SequenceMemory& mem,
                              float* mtp_hidden, float* logits, LogitsMode mode) const {
  MERE_CHECK(w_.mtp.present, "mtp", "this checkpoint has no MTP weights (mtp.*)");
  if (engine_) {
    MERE_CHECK(mem.device() != nullptr, "mtp", "a host SequenceMemory was passed to a device model");
    for (int64_t t = 0; t < T; ++t)
      MERE_CHECK(ids[t] >= 0 && ids[t] < cfg_.vocab_size, "embed", "token id ", ids[t],
                 " out of range: vocabulary has ", cfg_.vocab_size, " entries");
    engine_->mtp_forward(hidden, ids, T, mem, mtp_hidden, logits, mode);
    return;
  }
  const int64_t H = cfg_.hidden_size;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  const MtpWeights& m = w_.mtp;
  vector<float> e(sz(T * H)), cat_in(sz(T * 2 * H)), u(sz(T * H));
  backend_->embed(w_.embed, ids, T, e.data());
  for (int64_t t = 0; t < T; ++t) {
    // concat order: [norm_e(embedding of the next token) | norm_h(hidden)]
    ops::rms_norm(e.data() + t * H, m.pre_fc_norm_embedding.data(), 1, H, eps, cat_in.data() + t * 2 * H);
    ops::rms_norm(hidden + t * H, m.pre_fc_norm_hidden.data(), 1, H, eps, cat_in.data() + t * 2 * H + H);
  }
  backend_->linear(m.fc, cat_in.data(), T, u.data());
  const int64_t pos0 = mem.mtp_length();
  decoder_layer(m.layer, -1, u.data(), T, mem, &mem.mtp_kv(), pos0, ForwardOptions{});
  vector<float> out(sz(T * H));
  ops::rms_norm(u.data(), m.norm.data(), T, H, eps, out.data());
  if (mtp_hidden) std::copy(out.begin(), out.end(), mtp_hidden);
  if (logits && mode == LogitsMode::All) backend_->linear(w_.lm_head, out.data(), T, logits);
  if (logits && mode == LogitsMode::Last) backend_->linear(w_.lm_head, out.data() + (T - 1) * H, 1, logits);
}

void Qwen35Model::replay_gdn(const GdnTrace& trace, int64_t n, SequenceMemory& mem) const {
  MERE_CHECK(n >= 0 && n <= trace.rows, "replay", "cannot replay ", n, " of ", trace.rows, " traced rows");
  if (n == 0) return;
  if (engine_) {
    engine_->replay_gdn(n, mem);
    return;
  }
  const int64_t C = cfg_.conv_dim(), K = cfg_.conv_kernel;
  const int64_t Hk = cfg_.lin_k_heads, Dk = cfg_.lin_k_dim, Hv = cfg_.lin_v_heads, Dv = cfg_.lin_v_dim;
  vector<float> scratch(sz(std::max(C, n * Hv * Dv)));
  for (int64_t i = 0; i < cfg_.num_layers; ++i) {
    if (cfg_.layer_types[sz(i)] != LayerKind::Linear) continue;
    const GdnTrace::Layer& L = trace.layers[sz(i)];
    GdnState& st = mem.gdn(i);
    for (int64_t t = 0; t < n; ++t) ops::conv_step(st.conv.data(), w_.layers[sz(i)].gdn.conv.data(), L.raw.data() + t * C, C, K, scratch.data());
    backend_->gated_delta(st.S.data(), L.q.data(), L.k.data(), L.v.data(), L.g.data(), L.beta.data(), n, Hk, Hv, Dk, Dv,
                          /*chunked=*/false, ForwardOptions::kChunk, scratch.data());
  }
}

void Qwen35Model::decoder_layer(const LayerWeights& L, int64_t layer, float* x, int64_t T, SequenceMemory& mem,
                                KvCache* kv, int64_t pos0, const ForwardOptions& opt) const {
  const int64_t H = cfg_.hidden_size;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  vector<float> n(sz(T * H)), o(sz(T * H));
  ops::rms_norm(x, L.input_norm.data(), T, H, eps, n.data());
  if (L.kind == LayerKind::Full) attention_block(L.attn, *kv, n.data(), T, pos0, o.data());
  else
    gdn_block(L.gdn, mem.gdn(layer), n.data(), T, opt,
              opt.trace && layer >= 0 ? &opt.trace->layers[sz(layer)] : nullptr, o.data());
  for (int64_t i = 0; i < T * H; ++i) x[i] += o[sz(i)];
  ops::rms_norm(x, L.post_norm.data(), T, H, eps, n.data());
  ffn_block(L, n.data(), T, o.data());
  for (int64_t i = 0; i < T * H; ++i) x[i] += o[sz(i)];
}

void Qwen35Model::attention_block(const AttnWeights& a, KvCache& kv, const float* x, int64_t T, int64_t pos0,
                                  float* out) const {
  const int64_t nh = cfg_.num_heads, nkv = cfg_.num_kv_heads, hd = cfg_.head_dim;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  vector<float> qg(sz(T * nh * hd * 2)), k(sz(T * nkv * hd)), v(sz(T * nkv * hd)), att(sz(T * nh * hd));
  backend_->linear(a.q_proj, x, T, qg.data());
  backend_->linear(a.k_proj, x, T, k.data());
  backend_->linear(a.v_proj, x, T, v.data());
  vector<float> q(sz(T * nh * hd));
  for (int64_t t = 0; t < T; ++t) {
    // q_proj rows per head: [q(hd) | gate(hd)]
    const float* qgt = qg.data() + t * nh * hd * 2;
    float* qt = q.data() + t * nh * hd;
    for (int64_t h = 0; h < nh; ++h) ops::rms_norm(qgt + h * 2 * hd, a.q_norm.data(), 1, hd, eps, qt + h * hd);
    float* kt = k.data() + t * nkv * hd;
    ops::rms_norm(kt, a.k_norm.data(), nkv, hd, eps, kt);
    ops::rope(qt, nh, hd, cfg_.rotary_dim, pos0 + t, cfg_.rope_theta);
    ops::rope(kt, nkv, hd, cfg_.rotary_dim, pos0 + t, cfg_.rope_theta);
    kv.append(kt, v.data() + t * nkv * hd);
  }
  // row t attends to the cached keys [0, len_before + t + 1)
  backend_->attention(q.data(), kv.k.data(), kv.v.data(), T, kv.length - T + 1, nh, nkv, hd,
                      1.0f / std::sqrt(static_cast<float>(hd)), att.data());
  for (int64_t t = 0; t < T; ++t) {
    const float* qgt = qg.data() + t * nh * hd * 2;
    float* ot = att.data() + t * nh * hd;
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t d = 0; d < hd; ++d) ot[h * hd + d] *= ops::sigmoid(qgt[h * 2 * hd + hd + d]);
  }
  backend_->linear(a.o_proj, att.data(), T, out);
}

void Qwen35Model::gdn_block(const GdnWeights& g, GdnState& st, const float* x, int64_t T, const ForwardOptions& opt,
                            GdnTrace::Layer* trace, float* out) const {
  const int64_t C = cfg_.conv_dim(), K = cfg_.conv_kernel;
  const int64_t Hk = cfg_.lin_k_heads, Dk = cfg_.lin_k_dim, Hv = cfg_.lin_v_heads, Dv = cfg_.lin_v_dim;
  const int64_t kd = Hk * Dk;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  vector<float> raw(sz(T * C)), z(sz(T * Hv * Dv)), b(sz(T * Hv)), a(sz(T * Hv)), mixed(sz(T * C));
  backend_->linear(g.in_proj_qkv, x, T, raw.data());
  backend_->linear(g.in_proj_z, x, T, z.data());
  backend_->linear(g.in_proj_b, x, T, b.data());
  backend_->linear(g.in_proj_a, x, T, a.data());
  for (int64_t t = 0; t < T; ++t) ops::conv_step(st.conv.data(), g.conv.data(), raw.data() + t * C, C, K, mixed.data() + t * C);

  // per key head: l2-normalised q (scaled by 1/sqrt(Dk)) and k; per value head: v, gate g, beta
  const float qscale = 1.0f / std::sqrt(static_cast<float>(Dk));
  vector<float> q(sz(T * kd)), k(sz(T * kd)), gate(sz(T * Hv)), beta(sz(T * Hv));
  for (int64_t t = 0; t < T; ++t) {
    const float* m = mixed.data() + t * C;
    for (int64_t h = 0; h < Hk; ++h) {
      float* qh = q.data() + t * kd + h * Dk;
      float* kh = k.data() + t * kd + h * Dk;
      std::copy(m + h * Dk, m + (h + 1) * Dk, qh);
      std::copy(m + kd + h * Dk, m + kd + (h + 1) * Dk, kh);
      ops::l2_normalize(qh, Dk, 1e-6f);
      ops::l2_normalize(kh, Dk, 1e-6f);
      for (int64_t j = 0; j < Dk; ++j) qh[j] *= qscale;
    }
    for (int64_t h = 0; h < Hv; ++h) {
      beta[sz(t * Hv + h)] = ops::sigmoid(b[sz(t * Hv + h)]);
      gate[sz(t * Hv + h)] = g.neg_a[sz(h)] * ops::softplus(a[sz(t * Hv + h)] + g.dt_bias[sz(h)]);
    }
  }
  bool chunked = opt.gdn == ForwardOptions::Gdn::Chunked ||
                 (opt.gdn == ForwardOptions::Gdn::Auto && T > ForwardOptions::kMaxRecurrentRows);
  vector<float> v(sz(T * Hv * Dv)), core(sz(T * Hv * Dv)), o(sz(T * Hv * Dv));
  for (int64_t t = 0; t < T; ++t) std::copy_n(mixed.data() + t * C + 2 * kd, Hv * Dv, v.data() + t * Hv * Dv);
  if (trace) {
    MERE_CHECK(!chunked, "forward", "GatedDeltaNet tracing needs the recurrent algorithm (T <= ",
               ForwardOptions::kMaxRecurrentRows, " or Gdn::Recurrent)");
    trace->raw = raw;
    trace->q = q;
    trace->k = k;
    trace->v = v;
    trace->g = gate;
    trace->beta = beta;
  }
  backend_->gated_delta(st.S.data(), q.data(), k.data(), v.data(), gate.data(), beta.data(), T, Hk, Hv, Dk, Dv, chunked,
                        ForwardOptions::kChunk, core.data());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < Hv; ++h) {
      const int64_t off = t * Hv * Dv + h * Dv;
      ops::gated_rms_norm(core.data() + off, z.data() + off, g.norm.data(), Dv, eps, o.data() + off);
    }
  backend_->linear(g.out_proj, o.data(), T, out);
}

namespace {
void swiglu(const Backend& be, const MlpWeights& m, const float* x, int64_t T, float* out) {
  const int64_t I = m.gate.rows;
  vector<float> gt(sz(T * I)), up(sz(T * I));
  be.linear(m.gate, x, T, gt.data());
  be.linear(m.up, x, T, up.data());
  for (size_t i = 0; i < gt.size(); ++i) gt[i] = ops::silu(gt[i]) * up[i];
  be.linear(m.down, gt.data(), T, out);
}
}  // namespace

void Qwen35Model::ffn_block(const LayerWeights& L, const float* x, int64_t T, float* out) const {
  const int64_t H = cfg_.hidden_size;
  if (!cfg_.is_moe) {
    swiglu(*backend_, L.mlp, x, T, out);
    return;
  }
  const MoeWeights& m = L.moe;
  const int64_t E = cfg_.num_experts, K = cfg_.experts_per_tok;
  vector<float> logits(sz(T * E)), y(sz(H)), sg(1);
  backend_->linear(m.router, x, T, logits.data());
  vector<int64_t> idx(sz(E));
  for (int64_t t = 0; t < T; ++t) {
    const float* xt = x + t * H;
    float* ot = out + t * H;
    // softmax over experts (fp32), top-k by probability (lowest index first on ties), renormalised
    float* lg = logits.data() + t * E;
    const float mx = *std::max_element(lg, lg + E);
    float sum = 0.0f;
    vector<float> p(sz(E));
    for (int64_t e = 0; e < E; ++e) sum += (p[sz(e)] = std::exp(lg[e] - mx));
    for (auto& v : p) v /= sum;
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + K, idx.end(),
                      [&](int64_t i, int64_t j) { return p[sz(i)] > p[sz(j)] || (p[sz(i)] == p[sz(j)] && i < j); });
    float topsum = 0.0f;
    for (int64_t k = 0; k < K; ++k) topsum += p[sz(idx[sz(k)])];
    std::fill(ot, ot + H, 0.0f);
    for (int64_t k = 0; k < K; ++k) {
      const int64_t e = idx[sz(k)];
      const float w = cfg_.norm_topk_prob ? p[sz(e)] / topsum : p[sz(e)];
      swiglu(*backend_, m.experts[sz(e)], xt, 1, y.data());
      for (int64_t i = 0; i < H; ++i) ot[i] += w * y[sz(i)];
    }
    swiglu(*backend_, m.shared, xt, 1, y.data());
    backend_->linear(m.shared_gate, xt, 1, sg.data());
    const float s = ops::sigmoid(sg[0]);
    for (int64_t i = 0; i < H; ++i) ot[i] += s * y[sz(i)];
  }
}

}  // namespace mere
