// config.json parsing: picks text_config when present, applies the Qwen3.5 defaults of the
// reference implementation, and rejects configurations this runtime cannot run.
#include "model/config.h"

#include <cmath>
#include <filesystem>

#include "core/error.h"

namespace mere {

int64_t ModelConfig::num_full_layers() const {
  int64_t n = 0;
  for (auto k : layer_types) n += k == LayerKind::Full;
  return n;
}

namespace {

bool is_known_arch(const std::string& a, bool* moe) {
  if (a == "Qwen3_5ForConditionalGeneration" || a == "Qwen3_5ForCausalLM" || a == "Qwen3_5TextModel") {
    *moe = false;
    return true;
  }
  if (a == "Qwen3_5MoeForConditionalGeneration" || a == "Qwen3_5MoeForCausalLM" || a == "Qwen3_5MoeTextModel") {
    *moe = true;
    return true;
  }
  return false;
}

bool is_known_type(const std::string& t, bool* moe) {
  if (t == "qwen3_5" || t == "qwen3_5_text") {
    *moe = false;
    return true;
  }
  if (t == "qwen3_5_moe" || t == "qwen3_5_moe_text") {
    *moe = true;
    return true;
  }
  return false;
}

void read_eos(const Json& v, std::vector<int64_t>* out) {
  if (v.is_integer()) out->push_back(v.as_int());
  else if (v.is_array())
    for (const auto& e : v.as_array())
      if (e.is_integer()) out->push_back(e.as_int());
}

QuantSpec read_quant(const Json& q, const std::string& where) {
  QuantSpec s;
  s.bits = static_cast<int>(q.get_int("bits", 0));
  s.group_size = static_cast<int>(q.get_int("group_size", 64));
  std::string mode = q.get_string("mode", "affine");
  MERE_CHECK(mode == "affine", where, "unsupported quantization mode: expected \"affine\", got \"", mode, "\"");
  MERE_CHECK(s.bits == 4 || s.bits == 8 || s.bits == 2 || s.bits == 3 || s.bits == 5 || s.bits == 6, where,
             "unsupported quantization bits: ", s.bits);
  MERE_CHECK(s.group_size == 32 || s.group_size == 64 || s.group_size == 128, where,
             "unsupported quantization group_size: expected 32, 64 or 128, got ", s.group_size);
  return s;
}

}  // namespace

ModelConfig parse_model_config(const Json& root, const std::string& source) {
  MERE_CHECK(root.is_object(), source, "config must be a JSON object");
  ModelConfig c;
  const Json* tc = root.find("text_config");
  const Json& t = (tc && tc->is_object()) ? *tc : root;

  // architecture / model type
  bool moe = false, known = false;
  if (const Json* arch = root.find("architectures"); arch && arch->is_array() && arch->size() > 0) {
    c.architecture = arch->at(size_t{0}).is_string() ? arch->at(size_t{0}).as_string() : "";
    known = is_known_arch(c.architecture, &moe);
    if (!known)
      fail(source, cat("unknown architecture \"", c.architecture,
                       "\": expected Qwen3_5ForConditionalGeneration, Qwen3_5MoeForConditionalGeneration, "
                       "Qwen3_5ForCausalLM or Qwen3_5MoeForCausalLM"));
  }
  c.model_type = t.get_string("model_type", root.get_string("model_type", ""));
  bool moe_t = false;
  if (!c.model_type.empty()) {
    if (!is_known_type(c.model_type, &moe_t))
      fail(source, cat("unknown model_type \"", c.model_type, "\": expected qwen3_5, qwen3_5_text, qwen3_5_moe or qwen3_5_moe_text"));
    if (known && moe_t != moe) fail(source, cat("architecture ", c.architecture, " contradicts model_type ", c.model_type));
    moe = moe_t;
    known = true;
  }
  if (!known) fail(source, "neither \"architectures\" nor \"model_type\" identifies a Qwen3.5 model");
  c.is_moe = moe;

  auto req = [&](const char* key) -> int64_t {
    const Json* v = t.find(key);
    if (!v) fail(source, cat("missing required field \"", key, "\""));
    if (!v->is_integer() || v->as_int() <= 0) fail(source, cat("field \"", key, "\" must be a positive integer"));
    return v->as_int();
  };
  c.vocab_size = req("vocab_size");
  c.hidden_size = req("hidden_size");
  c.num_layers = req("num_hidden_layers");
  c.num_heads = req("num_attention_heads");
  MERE_CHECK(c.hidden_size <= (1 << 20) && c.vocab_size <= (1 << 24) && c.num_layers <= 4096 && c.num_heads <= (1 << 16), source,
             "absurd model size (hidden ", c.hidden_size, ", vocab ", c.vocab_size, ", layers ", c.num_layers, ", heads ", c.num_heads, ")");

  c.num_kv_heads = t.get_int("num_key_value_heads", c.num_heads);
  c.head_dim = t.get_int("head_dim", c.hidden_size / c.num_heads);
  c.attn_output_gate = t.get_bool("attn_output_gate", true);
  MERE_CHECK(c.attn_output_gate, source, "attn_output_gate=false is not a Qwen3.5 configuration");
  MERE_CHECK(!t.get_bool("attention_bias", false), source, "attention_bias=true is not supported");
  std::string act = t.get_string("hidden_act", "silu");
  MERE_CHECK(act == "silu", source, "hidden_act: expected \"silu\", got \"", act, "\"");

  c.lin_k_heads = t.get_int("linear_num_key_heads", 16);
  c.lin_k_dim = t.get_int("linear_key_head_dim", 128);
  c.lin_v_heads = t.get_int("linear_num_value_heads", 32);
  c.lin_v_dim = t.get_int("linear_value_head_dim", 128);
  c.conv_kernel = t.get_int("linear_conv_kernel_dim", 4);

  c.rms_norm_eps = t.get_number("rms_norm_eps", 1e-6);
  c.max_position_embeddings = t.get_int("max_position_embeddings", 262144);
  c.mtp_num_layers = t.get_int("mtp_num_hidden_layers", 0);
  c.tie_word_embeddings = t.get_bool("tie_word_embeddings", root.get_bool("tie_word_embeddings", false));

  // RoPE: rope_parameters (transformers 5), rope_scaling or top-level fields.
  double partial = t.get_number("partial_rotary_factor", 0.25);
  c.rope_theta = t.get_number("rope_theta", 1e7);
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (const Json* rp = t.find(key); rp && rp->is_object()) {
      c.rope_theta = rp->get_number("rope_theta", c.rope_theta);
      partial = rp->get_number("partial_rotary_factor", partial);
      std::string type = rp->get_string("rope_type", rp->get_string("type", "default"));
      MERE_CHECK(type == "default" || type == "mrope", source, "unsupported rope_type \"", type, "\"");
    }
  }
  MERE_CHECK(partial > 0 && partial <= 1, source, "partial_rotary_factor must be in (0, 1], got ", partial);
  c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * partial);
  MERE_CHECK(c.rotary_dim % 2 == 0 && c.rotary_dim > 0, source, "rotary dimension must be even and positive, got ", c.rotary_dim);

  // Layer kinds: explicit list, else every full_attention_interval-th layer is full attention.
  if (const Json* lt = t.find("layer_types"); lt && !lt->is_null()) {
    MERE_CHECK(lt->is_array(), source, "layer_types must be an array");
    MERE_CHECK(static_cast<int64_t>(lt->size()) == c.num_layers, source, "layer_types has ", lt->size(),
               " entries, expected num_hidden_layers = ", c.num_layers);
    for (const auto& e : lt->as_array()) {
      MERE_CHECK(e.is_string(), source, "layer_types entries must be strings");
      if (e.as_string() == "linear_attention") c.layer_types.push_back(LayerKind::Linear);
      else if (e.as_string() == "full_attention") c.layer_types.push_back(LayerKind::Full);
      else fail(source, cat("unknown layer type \"", e.as_string(), "\": expected linear_attention or full_attention"));
    }
  } else {
    int64_t interval = t.get_int("full_attention_interval", 4);
    MERE_CHECK(interval > 0, source, "full_attention_interval must be positive");
    for (int64_t i = 0; i < c.num_layers; ++i)
      c.layer_types.push_back((i + 1) % interval == 0 ? LayerKind::Full : LayerKind::Linear);
  }

  if (c.is_moe) {
    c.num_experts = req("num_experts");
    c.experts_per_tok = req("num_experts_per_tok");
    c.moe_intermediate_size = req("moe_intermediate_size");
    c.shared_intermediate_size = t.get_int("shared_expert_intermediate_size", 0);
    c.norm_topk_prob = t.get_bool("norm_topk_prob", true);
    MERE_CHECK(c.experts_per_tok <= c.num_experts, source, "num_experts_per_tok ", c.experts_per_tok,
               " exceeds num_experts ", c.num_experts);
    MERE_CHECK(c.shared_intermediate_size > 0, source, "MoE model needs shared_expert_intermediate_size > 0");
  } else {
    c.intermediate_size = req("intermediate_size");
  }

  // Geometry checks the forward pass relies on (positivity first: later checks divide).
  for (auto [name, v] : {std::pair<const char*, int64_t>{"num_key_value_heads", c.num_kv_heads}, {"head_dim", c.head_dim},
                         {"linear_num_key_heads", c.lin_k_heads}, {"linear_key_head_dim", c.lin_k_dim},
                         {"linear_num_value_heads", c.lin_v_heads}, {"linear_value_head_dim", c.lin_v_dim},
                         {"linear_conv_kernel_dim", c.conv_kernel}, {"max_position_embeddings", c.max_position_embeddings}})
    MERE_CHECK(v > 0 && v <= (int64_t{1} << 24), source, "field \"", name, "\" must be a positive integer (at most 2^24), got ", v);
  MERE_CHECK(std::isfinite(c.rms_norm_eps) && c.rms_norm_eps >= 0, source, "rms_norm_eps must be finite and >= 0");
  MERE_CHECK(std::isfinite(c.rope_theta) && c.rope_theta > 0, source, "rope_theta must be finite and > 0");
  MERE_CHECK(c.num_heads % c.num_kv_heads == 0, source, "num_attention_heads ", c.num_heads,
             " is not a multiple of num_key_value_heads ", c.num_kv_heads);
  MERE_CHECK(c.lin_v_heads % c.lin_k_heads == 0, source, "linear_num_value_heads ", c.lin_v_heads,
             " is not a multiple of linear_num_key_heads ", c.lin_k_heads);
  MERE_CHECK(c.mtp_num_layers >= 0 && c.mtp_num_layers <= 1, source, "mtp_num_hidden_layers ", c.mtp_num_layers,
             " not supported (0 or 1)");

  if (const Json* e = t.find("eos_token_id")) read_eos(*e, &c.eos_token_ids);
  if (c.eos_token_ids.empty())
    if (const Json* e = root.find("eos_token_id")) read_eos(*e, &c.eos_token_ids);

  const Json* q = root.find("quantization");
  if (!q) q = root.find("quantization_config");
  if (q && q->is_object()) {
    c.quant = read_quant(*q, source + ": quantization");
    for (const auto& [k, v] : q->as_object())
      if (v.is_object()) c.quant_overrides[k] = read_quant(v, source + ": quantization." + k);
  }
  return c;
}

ModelConfig load_model_config(const std::string& model_dir) {
  namespace fs = std::filesystem;
  fs::path p = fs::path(model_dir) / "config.json";
  if (!fs::exists(p)) fail(model_dir, "no config.json in the model directory");
  return parse_model_config(Json::parse_file(p.string()), p.string());
}

}  // namespace mere
