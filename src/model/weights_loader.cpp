// bind_weights: the single load-time transform from checkpoint tensors to ModelWeights.
// Naming: HF nested (model.language_model.*), HF flat (model.*), MLX (language_model.model.*),
// lm_head.weight / language_model.lm_head.*, mtp.*; vision tensors are ignored.
#include <cmath>
#include <map>
#include <set>

#include "core/error.h"
#include "model/weights.h"

namespace mere {
namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }
bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

class Binder {
 public:
  explicit Binder(const TensorStore& store) {
    for (const auto& [raw, t] : store.all()) {
      std::string name;
      if (!canonical(raw, &name)) continue;  // vision tower
      if (by_canon_.count(name)) fail("weights", cat("tensor ", raw, " and ", by_canon_[name]->name, " map to the same weight"));
      by_canon_[name] = &t;
      if (starts_with(raw, "language_model.")) mlx_names_ = true;
    }
    // MLX layout is identified by names or by conv1d stored as [C, K, 1] (HF: [C, 1, K]).
    for (const auto& [name, t] : by_canon_)
      if (ends_with(name, "conv1d.weight") && t->shape.size() == 3 && t->shape[2] == 1 && t->shape[1] > 1) mlx_conv_ = true;
    shift_norms_ = !(mlx_names_ || mlx_conv_);
  }

  bool mlx() const { return mlx_names_ || mlx_conv_; }
  bool has(const std::string& n) const { return by_canon_.count(n) > 0; }

  const TensorInfo& take(const std::string& n) {
    auto it = by_canon_.find(n);
    if (it == by_canon_.end()) fail("weights", cat("missing tensor ", n, " (", mlx() ? "MLX" : "HF", " layout)"));
    used_.insert(n);
    return *it->second;
  }

  // Zero-centred norm weight: fp32 with +1 for raw HF checkpoints (already folded in MLX files).
  Vec norm(const std::string& n, int64_t size, bool zero_centred = true) {
    Vec v = vec(n, size);
    if (zero_centred && shift_norms_)
      for (auto& x : v) x += 1.0f;
    return v;
  }

  Vec vec(const std::string& n, int64_t size) {
    const TensorInfo& t = take(n);
    MERE_CHECK(t.numel() == size, t.file, "tensor ", t.name, ": expected ", size, " elements, got shape ", t.shape_str());
    Vec v(static_cast<size_t>(size));
    convert_to_f32(t.dtype, t.data, v.data(), v.size());
    return v;
  }

  // Float or affine-quantised [rows, cols] matrix; `prefix` has no ".weight".
  Matrix matrix(const std::string& prefix, int64_t rows, int64_t cols) {
    std::vector<Matrix> m = stacked(prefix, 0, rows, cols);
    return m[0];
  }

  // experts > 0: a 3-D stack [E, rows, cols] split into E matrices; experts == 0: plain 2-D.
  std::vector<Matrix> stacked(const std::string& prefix, int64_t experts, int64_t rows, int64_t cols) {
    const TensorInfo& w = take(prefix + ".weight");
    const bool three_d = experts > 0;
    const int64_t E = three_d ? experts : 1;
    auto shape_ok = [&](const TensorInfo& t, int64_t last) {
      if (three_d) return t.shape.size() == 3 && t.shape[0] == E && t.shape[1] == rows && t.shape[2] == last;
      return t.shape.size() == 2 && t.shape[0] == rows && t.shape[1] == last;
    };
    auto expect = [&](int64_t last) {
      return three_d ? cat("[", E, ", ", rows, ", ", last, "]") : cat("[", rows, ", ", last, "]");
    };
    Matrix base;
    base.rows = rows;
    base.cols = cols;
    if (has(prefix + ".scales")) {
      const TensorInfo& s = take(prefix + ".scales");
      const TensorInfo& b = take(prefix + ".biases");
      MERE_CHECK(w.dtype == DType::U32, w.file, "tensor ", w.name, ": quantised weight must be U32, got ", dtype_name(w.dtype));
      MERE_CHECK(!w.shape.empty() && w.shape.back() > 0 && !s.shape.empty() && s.shape.back() > 0, w.file, "tensor ",
                 w.name, ": empty quantised shape");
      const int64_t packed = w.shape.back(), ngroups = s.shape.back();
      MERE_CHECK((packed * 32) % cols == 0, w.file, "tensor ", w.name, ": packed width ", packed,
                 " does not divide into ", cols, " columns");
      base.bits = static_cast<int>(packed * 32 / cols);
      MERE_CHECK(base.bits == 2 || base.bits == 3 || base.bits == 4 || base.bits == 5 || base.bits == 6 || base.bits == 8,
                 w.file, "tensor ", w.name, ": unsupported bit width ", base.bits);
      MERE_CHECK(cols % ngroups == 0, s.file, "tensor ", s.name, ": ", ngroups, " groups do not divide ", cols, " columns");
      base.group = static_cast<int>(cols / ngroups);
      MERE_CHECK(base.group == 32 || base.group == 64 || base.group == 128, s.file, "tensor ", s.name,
                 ": unsupported group size ", base.group);
      MERE_CHECK(shape_ok(w, packed) && shape_ok(s, ngroups) && shape_ok(b, ngroups), w.file, "tensor ", w.name,
                 ": quantised shape ", w.shape_str(), " / scales ", s.shape_str(), " contradict the config: expected ",
                 expect(packed), " and ", expect(ngroups));
      MERE_CHECK(s.dtype == b.dtype && (s.dtype == DType::BF16 || s.dtype == DType::F16 || s.dtype == DType::F32), s.file,
                 "tensor ", s.name, ": scales/biases must share a float dtype");
      base.scale_dtype = s.dtype;
      base.data = w.data;
      base.scales = s.data;
      base.biases = b.data;
    } else {
      MERE_CHECK(w.dtype == DType::F32 || w.dtype == DType::BF16 || w.dtype == DType::F16, w.file, "tensor ", w.name,
                 ": expected a float dtype (F32/BF16/F16), got ", dtype_name(w.dtype));
      MERE_CHECK(shape_ok(w, cols), w.file, "tensor ", w.name, ": shape ", w.shape_str(),
                 " contradicts the config: expected ", expect(cols));
      base.dtype = w.dtype;
      base.data = w.data;
    }
    std::vector<Matrix> out;
    for (int64_t e = 0; e < E; ++e) {
      if (!three_d) {
        out.push_back(base);
        break;
      }
      Matrix all = base;
      all.rows = E * rows;  // view the stack as one [E*rows, cols] matrix and slice
      out.push_back(all.row_slice(e * rows, rows));
    }
    return out;
  }

  // HF fused 3-D experts (no .weight suffix): gate_up_proj [E, 2Ie, H], down_proj [E, H, Ie].
  void fused_experts(const std::string& p, int64_t E, int64_t Ie, int64_t H, std::vector<MlpWeights>* out) {
    const TensorInfo& gu = take(p + "experts.gate_up_proj");
    const TensorInfo& dn = take(p + "experts.down_proj");
    for (const TensorInfo* t : {&gu, &dn})
      MERE_CHECK(t->dtype == DType::F32 || t->dtype == DType::BF16 || t->dtype == DType::F16, t->file, "tensor ", t->name,
                 ": expected a float dtype, got ", dtype_name(t->dtype));
    MERE_CHECK(gu.shape == (std::vector<int64_t>{E, 2 * Ie, H}), gu.file, "tensor ", gu.name, ": shape ",
               gu.shape_str(), " contradicts the config: expected [", E, ", ", 2 * Ie, ", ", H, "]");
    MERE_CHECK(dn.shape == (std::vector<int64_t>{E, H, Ie}), dn.file, "tensor ", dn.name, ": shape ", dn.shape_str(),
               " contradicts the config: expected [", E, ", ", H, ", ", Ie, "]");
    Matrix gum, dnm;
    gum.rows = E * 2 * Ie, gum.cols = H, gum.dtype = gu.dtype, gum.data = gu.data;
    dnm.rows = E * H, dnm.cols = Ie, dnm.dtype = dn.dtype, dnm.data = dn.data;
    for (int64_t e = 0; e < E; ++e)
      out->push_back({gum.row_slice(e * 2 * Ie, Ie), gum.row_slice(e * 2 * Ie + Ie, Ie), dnm.row_slice(e * H, H)});
  }

  void check_all_used() const {
    std::string unused;
    int n = 0;
    for (const auto& [name, t] : by_canon_)
      if (!used_.count(name)) {
        if (n < 8) unused += (n ? ", " : "") + t->name;
        ++n;
      }
    MERE_CHECK(n == 0, "weights", n, " tensor(s) the configuration does not account for: ", unused,
               n > 8 ? ", ..." : "");
  }

 private:
  // Maps a raw checkpoint name to the canonical one ("layers.3.mlp.gate_proj.weight", "lm_head.weight",
  // "mtp.fc.weight"); returns false for tensors to ignore (vision).
  static bool canonical(const std::string& raw, std::string* out) {
    for (const char* v : {"model.visual.", "visual.", "vision_tower.", "model.vision_tower.", "language_model.vision_tower."})
      if (starts_with(raw, v)) return false;
    static const std::pair<const char*, const char*> kMap[] = {
        {"model.language_model.", ""}, {"language_model.model.", ""}, {"language_model.lm_head.", "lm_head."},
        {"language_model.mtp.", "mtp."}, {"model.mtp.", "mtp."}, {"mtp.", "mtp."}, {"lm_head.", "lm_head."}, {"model.", ""}};
    for (const auto& [from, to] : kMap)
      if (starts_with(raw, from)) {
        *out = std::string(to) + raw.substr(std::string(from).size());
        return true;
      }
    *out = raw;  // unknown prefix: kept, and reported by check_all_used unless bound
    return true;
  }

  std::map<std::string, const TensorInfo*> by_canon_;
  std::set<std::string> used_;
  bool mlx_names_ = false, mlx_conv_ = false, shift_norms_ = true;
};

MlpWeights bind_mlp(Binder& b, const std::string& p, int64_t I, int64_t H) {
  return {b.matrix(p + "gate_proj", I, H), b.matrix(p + "up_proj", I, H), b.matrix(p + "down_proj", H, I)};
}

void bind_ffn(Binder& b, const ModelConfig& c, const std::string& p, LayerWeights* L) {
  const int64_t H = c.hidden_size;
  if (!c.is_moe) {
    L->mlp = bind_mlp(b, p + "mlp.", c.intermediate_size, H);
    return;
  }
  const int64_t E = c.num_experts, Ie = c.moe_intermediate_size;
  MoeWeights& m = L->moe;
  m.router = b.matrix(p + "mlp.gate", E, H);
  if (b.has(p + "mlp.experts.gate_up_proj")) {
    b.fused_experts(p + "mlp.", E, Ie, H, &m.experts);
  } else if (b.has(p + "mlp.switch_mlp.gate_proj.weight")) {
    auto g = b.stacked(p + "mlp.switch_mlp.gate_proj", E, Ie, H);
    auto u = b.stacked(p + "mlp.switch_mlp.up_proj", E, Ie, H);
    auto d = b.stacked(p + "mlp.switch_mlp.down_proj", E, H, Ie);
    for (int64_t e = 0; e < E; ++e) m.experts.push_back({g[e], u[e], d[e]});
  } else {
    for (int64_t e = 0; e < E; ++e) m.experts.push_back(bind_mlp(b, cat(p, "mlp.experts.", e, "."), Ie, H));
  }
  m.shared = bind_mlp(b, p + "mlp.shared_expert.", c.shared_intermediate_size, H);
  m.shared_gate = b.matrix(p + "mlp.shared_expert_gate", 1, H);
}

void bind_attention(Binder& b, const ModelConfig& c, const std::string& p, AttnWeights* a) {
  const int64_t H = c.hidden_size, hd = c.head_dim;
  a->q_proj = b.matrix(p + "self_attn.q_proj", c.num_heads * hd * 2, H);
  a->k_proj = b.matrix(p + "self_attn.k_proj", c.num_kv_heads * hd, H);
  a->v_proj = b.matrix(p + "self_attn.v_proj", c.num_kv_heads * hd, H);
  a->o_proj = b.matrix(p + "self_attn.o_proj", H, c.num_heads * hd);
  a->q_norm = b.norm(p + "self_attn.q_norm.weight", hd);
  a->k_norm = b.norm(p + "self_attn.k_norm.weight", hd);
}

void bind_gdn(Binder& b, const ModelConfig& c, const std::string& p, GdnWeights* g) {
  const int64_t H = c.hidden_size, Hv = c.lin_v_heads, C = c.conv_dim(), K = c.conv_kernel;
  const std::string q = p + "linear_attn.";
  g->in_proj_qkv = b.matrix(q + "in_proj_qkv", C, H);
  g->in_proj_z = b.matrix(q + "in_proj_z", c.lin_value_dim(), H);
  g->in_proj_b = b.matrix(q + "in_proj_b", Hv, H);
  g->in_proj_a = b.matrix(q + "in_proj_a", Hv, H);
  g->out_proj = b.matrix(q + "out_proj", H, c.lin_value_dim());
  {
    const TensorInfo& t = b.take(q + "conv1d.weight");
    const bool hf = t.shape == std::vector<int64_t>{C, 1, K};
    const bool mlx = t.shape == std::vector<int64_t>{C, K, 1};
    const bool flat = t.shape == std::vector<int64_t>{C, K};
    MERE_CHECK(hf || mlx || flat, t.file, "tensor ", t.name, ": shape ", t.shape_str(), " contradicts the config: expected [",
               C, ", 1, ", K, "] (HF) or [", C, ", ", K, ", 1] (MLX)");
    g->conv.resize(static_cast<size_t>(C * K));  // all three layouts hold [C][K] in memory order
    convert_to_f32(t.dtype, t.data, g->conv.data(), g->conv.size());
  }
  g->dt_bias = b.vec(q + "dt_bias", Hv);
  Vec a_log = b.vec(q + "A_log", Hv);
  g->neg_a.resize(a_log.size());
  for (size_t i = 0; i < a_log.size(); ++i) g->neg_a[i] = -std::exp(a_log[i]);
  g->norm = b.norm(q + "norm.weight", c.lin_v_dim, /*zero_centred=*/false);
}

}  // namespace

ModelWeights bind_weights(const ModelConfig& c, const TensorStore& store) {
  Binder b(store);
  ModelWeights w;
  w.format = b.mlx() ? "mlx" : "hf";
  const int64_t H = c.hidden_size, V = c.vocab_size;
  w.embed = b.matrix("embed_tokens", V, H);
  if (b.has("lm_head.weight")) {
    w.lm_head = b.matrix("lm_head", V, H);
  } else {
    MERE_CHECK(c.tie_word_embeddings, "weights", "missing tensor lm_head.weight and tie_word_embeddings is false");
    w.lm_head = w.embed;
  }
  w.final_norm = b.norm("norm.weight", H);
  w.layers.resize(static_cast<size_t>(c.num_layers));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    LayerWeights& L = w.layers[static_cast<size_t>(i)];
    const std::string p = cat("layers.", i, ".");
    L.kind = c.layer_types[static_cast<size_t>(i)];
    L.input_norm = b.norm(p + "input_layernorm.weight", H);
    L.post_norm = b.norm(p + "post_attention_layernorm.weight", H);
    if (L.kind == LayerKind::Full) bind_attention(b, c, p, &L.attn);
    else bind_gdn(b, c, p, &L.gdn);
    bind_ffn(b, c, p, &L);
  }
  if (b.has("mtp.fc.weight")) {
    MtpWeights& m = w.mtp;
    m.present = true;
    m.pre_fc_norm_embedding = b.norm("mtp.pre_fc_norm_embedding.weight", H);
    m.pre_fc_norm_hidden = b.norm("mtp.pre_fc_norm_hidden.weight", H);
    m.fc = b.matrix("mtp.fc", H, 2 * H);
    m.layer.kind = LayerKind::Full;
    m.layer.input_norm = b.norm("mtp.layers.0.input_layernorm.weight", H);
    m.layer.post_norm = b.norm("mtp.layers.0.post_attention_layernorm.weight", H);
    bind_attention(b, c, "mtp.layers.0.", &m.layer.attn);
    bind_ffn(b, c, "mtp.layers.0.", &m.layer);
    m.norm = b.norm("mtp.norm.weight", H);
  }
  b.check_all_used();
  return w;
}

}  // namespace mere
