// Geometry presets (qwen35.md §1.3 plus tiny test shapes), validation, and text_config JSON
// conversion in both directions.
#include "model/geometry.h"

#include <cmath>
#include <filesystem>
#include <utility>

#include "core/error.h"

namespace mere {

namespace {

constexpr const char* kWhere = "geometry";

std::vector<std::string> default_layer_types(int64_t layers, int64_t interval) {
  std::vector<std::string> t;
  for (int64_t i = 0; i < layers; ++i)
    t.push_back(interval > 0 && (i + 1) % interval == 0 ? "full_attention" : "linear_attention");
  return t;
}

// All real Qwen3.5 models share head_dim 256, Hk 16, Dk = Dv 128, K 4, θ 1e7, vocab 248320.
Geometry real(std::string name, int64_t h, int64_t layers, int64_t heads, int64_t kv, int64_t hv, bool tied) {
  Geometry g;
  g.name = std::move(name);
  g.hidden_size = h;
  g.num_hidden_layers = layers;
  g.num_attention_heads = heads;
  g.num_key_value_heads = kv;
  g.linear_num_value_heads = hv;
  g.tie_word_embeddings = tied;
  return g;
}

Geometry dense(Geometry g, int64_t ffn) {
  g.intermediate_size = ffn;
  return g;
}

Geometry moe(Geometry g, int64_t e, int64_t topk, int64_t ie, int64_t is) {
  g.num_experts = e;
  g.num_experts_per_tok = topk;
  g.moe_intermediate_size = ie;
  g.shared_expert_intermediate_size = is;
  return g;
}

// Small shapes for unit tests: attention head_dim 64, GDN Hk 2 / Hv 4 (Hv/Hk = 2), Dk = Dv = 32,
// 4 layers (3 GDN + 1 full), vocab 512; every input dim is a multiple of 64 so 4-bit g64 applies.
Geometry tiny(std::string name, bool tied) {
  Geometry g;
  g.name = std::move(name);
  g.vocab_size = 512;
  g.hidden_size = 128;
  g.num_hidden_layers = 4;
  g.num_attention_heads = 4;
  g.num_key_value_heads = 2;
  g.head_dim = 64;
  g.linear_num_key_heads = 2;
  g.linear_key_head_dim = 32;
  g.linear_num_value_heads = 4;
  g.linear_value_head_dim = 32;
  g.max_position_embeddings = 4096;
  g.tie_word_embeddings = tied;
  return g;
}

const std::vector<std::pair<std::string, Geometry>>& presets() {
  static const std::vector<std::pair<std::string, Geometry>> p = [] {
    std::vector<std::pair<std::string, Geometry>> v;
    auto add = [&](Geometry g) {
      g.validate();
      v.emplace_back(g.name, std::move(g));
    };
    add(dense(real("qwen3.5-0.8b", 1024, 24, 8, 2, 16, true), 3584));
    add(dense(real("qwen3.5-2b", 2048, 24, 8, 2, 16, true), 6144));
    add(dense(real("qwen3.5-4b", 2560, 32, 16, 4, 32, true), 9216));
    add(dense(real("qwen3.5-9b", 4096, 32, 16, 4, 32, false), 12288));
    add(dense(real("qwen3.5-27b", 5120, 64, 24, 4, 48, false), 17408));
    add(moe(real("qwen3.5-35b-a3b", 2048, 40, 16, 2, 32, false), 256, 8, 512, 512));
    add(moe(real("qwen3.5-122b-a10b", 3072, 48, 32, 2, 64, false), 256, 8, 1024, 1024));
    add(moe(real("qwen3.5-397b-a17b", 4096, 60, 32, 2, 64, false), 512, 10, 1024, 1024));
    add(dense(tiny("tiny-dense", false), 256));
    add(dense(tiny("tiny-dense-tied", true), 256));
    add(moe(tiny("tiny-moe", false), 8, 2, 64, 128));
    return v;
  }();
  return p;
}

int64_t req_int(const Json& j, const char* key, const std::string& src) {
  const Json* v = j.find(key);
  MERE_CHECK(v != nullptr, kWhere, src, ": text_config.", key, ": expected an integer, got nothing");
  return v->as_int();
}

}  // namespace

void Geometry::validate() {
  const std::string& n = name;
  auto pos = [&](int64_t v, const char* field) {
    MERE_CHECK(v > 0, kWhere, n, ": ", field, ": expected > 0, got ", v);
  };
  pos(vocab_size, "vocab_size");
  pos(hidden_size, "hidden_size");
  pos(num_hidden_layers, "num_hidden_layers");
  if (layer_types.empty()) layer_types = default_layer_types(num_hidden_layers, full_attention_interval);
  MERE_CHECK(static_cast<int64_t>(layer_types.size()) == num_hidden_layers, kWhere, n,
             ": layer_types: expected ", num_hidden_layers, " entries (num_hidden_layers), got ", layer_types.size());
  bool any_full = false, any_linear = false;
  for (size_t i = 0; i < layer_types.size(); ++i) {
    const auto& t = layer_types[i];
    MERE_CHECK(t == "full_attention" || t == "linear_attention", kWhere, n, ": layer_types[", i,
               "]: expected \"linear_attention\" or \"full_attention\", got \"", t, "\"");
    (t == "full_attention" ? any_full : any_linear) = true;
  }
  if (any_full || mtp_num_hidden_layers > 0) {
    pos(num_attention_heads, "num_attention_heads");
    pos(num_key_value_heads, "num_key_value_heads");
    pos(head_dim, "head_dim");
    MERE_CHECK(num_attention_heads % num_key_value_heads == 0, kWhere, n,
               ": num_attention_heads: expected a multiple of num_key_value_heads ", num_key_value_heads, ", got ",
               num_attention_heads);
    MERE_CHECK(head_dim % 2 == 0, kWhere, n, ": head_dim: expected even, got ", head_dim);
  }
  if (any_linear) {
    pos(linear_num_key_heads, "linear_num_key_heads");
    pos(linear_num_value_heads, "linear_num_value_heads");
    pos(linear_key_head_dim, "linear_key_head_dim");
    pos(linear_value_head_dim, "linear_value_head_dim");
    pos(linear_conv_kernel_dim, "linear_conv_kernel_dim");
    MERE_CHECK(linear_num_value_heads % linear_num_key_heads == 0, kWhere, n,
               ": linear_num_value_heads: expected a multiple of linear_num_key_heads ", linear_num_key_heads,
               ", got ", linear_num_value_heads);
  }
  if (is_moe()) {
    pos(num_experts_per_tok, "num_experts_per_tok");
    MERE_CHECK(num_experts_per_tok <= num_experts, kWhere, n, ": num_experts_per_tok: expected <= num_experts ",
               num_experts, ", got ", num_experts_per_tok);
    pos(moe_intermediate_size, "moe_intermediate_size");
    pos(shared_expert_intermediate_size, "shared_expert_intermediate_size");
  } else {
    MERE_CHECK(num_experts == 0, kWhere, n, ": num_experts: expected >= 0, got ", num_experts);
    pos(intermediate_size, "intermediate_size");
  }
  MERE_CHECK(partial_rotary_factor > 0 && partial_rotary_factor <= 1, kWhere, n,
             ": partial_rotary_factor: expected in (0, 1], got ", partial_rotary_factor);
  MERE_CHECK(rms_norm_eps > 0, kWhere, n, ": rms_norm_eps: expected > 0, got ", rms_norm_eps);
  MERE_CHECK(mtp_num_hidden_layers >= 0, kWhere, n, ": mtp_num_hidden_layers: expected >= 0, got ",
             mtp_num_hidden_layers);
  MERE_CHECK(eos_token_id < vocab_size, kWhere, n, ": eos_token_id: expected < vocab_size ", vocab_size, ", got ",
             eos_token_id);
}

std::vector<std::string> geometry_preset_names() {
  std::vector<std::string> out;
  for (const auto& [k, g] : presets()) out.push_back(k);
  return out;
}

bool is_geometry_preset(const std::string& name) {
  for (const auto& [k, g] : presets())
    if (k == name) return true;
  return false;
}

Geometry geometry_preset(const std::string& name) {
  for (const auto& [k, g] : presets())
    if (k == name) return g;
  std::string known;
  for (const auto& k : geometry_preset_names()) known += (known.empty() ? "" : ", ") + k;
  fail(kWhere, cat("preset: expected one of ", known, ", got \"", name, "\""));
}

Geometry geometry_from_json(const Json& root, const std::string& name) {
  MERE_CHECK(root.is_object(), kWhere, name, ": expected a JSON object, got ", Json::type_name(root.type()));
  const Json* tc = root.find("text_config");
  const Json& j = tc ? *tc : root;
  MERE_CHECK(j.is_object(), kWhere, name, ": text_config: expected an object, got ", Json::type_name(j.type()));
  Geometry g;
  g.name = name;
  g.vocab_size = j.get_int("vocab_size", g.vocab_size);
  g.hidden_size = req_int(j, "hidden_size", name);
  g.num_hidden_layers = req_int(j, "num_hidden_layers", name);
  g.full_attention_interval = j.get_int("full_attention_interval", g.full_attention_interval);
  if (const Json* lt = j.find("layer_types")) {
    for (const auto& e : lt->as_array()) g.layer_types.push_back(e.as_string());
  }
  g.num_attention_heads = j.get_int("num_attention_heads", 0);
  g.num_key_value_heads = j.get_int("num_key_value_heads", g.num_attention_heads);
  g.head_dim = j.get_int("head_dim", g.head_dim);
  g.attn_output_gate = j.get_bool("attn_output_gate", g.attn_output_gate);
  g.attention_bias = j.get_bool("attention_bias", g.attention_bias);
  MERE_CHECK(!g.attention_bias, kWhere, name, ": attention_bias: expected false (Qwen3.5 has no biases), got true");
  g.linear_num_key_heads = j.get_int("linear_num_key_heads", g.linear_num_key_heads);
  g.linear_key_head_dim = j.get_int("linear_key_head_dim", g.linear_key_head_dim);
  g.linear_num_value_heads = j.get_int("linear_num_value_heads", 0);
  g.linear_value_head_dim = j.get_int("linear_value_head_dim", g.linear_value_head_dim);
  g.linear_conv_kernel_dim = j.get_int("linear_conv_kernel_dim", g.linear_conv_kernel_dim);
  g.intermediate_size = j.get_int("intermediate_size", 0);
  g.num_experts = j.get_int("num_experts", 0);
  g.num_experts_per_tok = j.get_int("num_experts_per_tok", 0);
  g.moe_intermediate_size = j.get_int("moe_intermediate_size", 0);
  g.shared_expert_intermediate_size = j.get_int("shared_expert_intermediate_size", 0);
  g.rms_norm_eps = j.get_number("rms_norm_eps", g.rms_norm_eps);
  g.rope_theta = j.get_number("rope_theta", g.rope_theta);
  g.partial_rotary_factor = j.get_number("partial_rotary_factor", g.partial_rotary_factor);
  if (const Json* rp = j.find("rope_parameters"); rp && !rp->is_null()) {
    g.rope_theta = rp->get_number("rope_theta", g.rope_theta);
    g.partial_rotary_factor = rp->get_number("partial_rotary_factor", g.partial_rotary_factor);
    g.mrope_interleaved = rp->get_bool("mrope_interleaved", g.mrope_interleaved);
    if (const Json* ms = rp->find("mrope_section")) {
      g.mrope_section.clear();
      for (const auto& e : ms->as_array()) g.mrope_section.push_back(e.as_int());
    }
  }
  g.max_position_embeddings = j.get_int("max_position_embeddings", g.max_position_embeddings);
  g.mtp_num_hidden_layers = j.get_int("mtp_num_hidden_layers", g.mtp_num_hidden_layers);
  g.tie_word_embeddings = j.get_bool("tie_word_embeddings", root.get_bool("tie_word_embeddings", false));
  if (const Json* e = j.find("eos_token_id"); e && e->is_number()) g.eos_token_id = e->as_int();
  g.validate();
  return g;
}

Geometry load_geometry(const std::string& name_or_file) {
  if (is_geometry_preset(name_or_file)) return geometry_preset(name_or_file);
  std::error_code ec;
  if (std::filesystem::is_regular_file(name_or_file, ec))
    return geometry_from_json(Json::parse_file(name_or_file), name_or_file);
  std::string known;
  for (const auto& k : geometry_preset_names()) known += (known.empty() ? "" : ", ") + k;
  fail(kWhere, cat("--geometry: expected a preset (", known, ") or a JSON file, got \"", name_or_file, "\""));
}

Json geometry_text_config(const Geometry& g, const std::string& dtype_name) {
  const bool m = g.is_moe();
  auto number = [](double v) -> Json {
    if (std::floor(v) == v && std::fabs(v) < 9e15) return Json(static_cast<int64_t>(v));
    return Json(v);
  };
  Json t = Json::object();
  t["attention_bias"] = g.attention_bias;
  t["attention_dropout"] = 0.0;
  t["attn_output_gate"] = g.attn_output_gate;
  t["dtype"] = dtype_name;
  t["eos_token_id"] = g.eos_token_id;
  t["full_attention_interval"] = g.full_attention_interval;
  t["head_dim"] = g.head_dim;
  t["hidden_act"] = "silu";
  t["hidden_size"] = g.hidden_size;
  t["initializer_range"] = 0.02;
  if (!m) t["intermediate_size"] = g.intermediate_size;
  Json lt = Json::array();
  for (const auto& s : g.layer_types) lt.push_back(s);
  t["layer_types"] = std::move(lt);
  t["linear_conv_kernel_dim"] = g.linear_conv_kernel_dim;
  t["linear_key_head_dim"] = g.linear_key_head_dim;
  t["linear_num_key_heads"] = g.linear_num_key_heads;
  t["linear_num_value_heads"] = g.linear_num_value_heads;
  t["linear_value_head_dim"] = g.linear_value_head_dim;
  t["max_position_embeddings"] = g.max_position_embeddings;
  if (m) t["mlp_only_layers"] = Json::array();
  t["model_type"] = m ? "qwen3_5_moe_text" : "qwen3_5_text";
  if (m) t["moe_intermediate_size"] = g.moe_intermediate_size;
  t["mtp_num_hidden_layers"] = g.mtp_num_hidden_layers;
  t["mtp_use_dedicated_embeddings"] = false;
  t["num_attention_heads"] = g.num_attention_heads;
  if (m) {
    t["num_experts"] = g.num_experts;
    t["num_experts_per_tok"] = g.num_experts_per_tok;
  }
  t["num_hidden_layers"] = g.num_hidden_layers;
  t["num_key_value_heads"] = g.num_key_value_heads;
  t["rms_norm_eps"] = g.rms_norm_eps;
  if (m) {
    t["router_aux_loss_coef"] = 0.001;
    t["shared_expert_intermediate_size"] = g.shared_expert_intermediate_size;
  }
  t["tie_word_embeddings"] = g.tie_word_embeddings;
  t["use_cache"] = true;
  t["vocab_size"] = g.vocab_size;
  t["mamba_ssm_dtype"] = "float32";
  Json rp = Json::object();
  rp["mrope_interleaved"] = g.mrope_interleaved;
  Json ms = Json::array();
  for (int64_t s : g.mrope_section) ms.push_back(s);
  rp["mrope_section"] = std::move(ms);
  rp["rope_type"] = "default";
  rp["rope_theta"] = number(g.rope_theta);
  rp["partial_rotary_factor"] = g.partial_rotary_factor;
  t["rope_parameters"] = std::move(rp);
  return t;
}

}  // namespace mere
