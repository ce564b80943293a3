// Model geometry for synthetic checkpoints: the text_config fields of qwen35.md §1.2, named presets
// for the real Qwen3.5 shapes (§1.3) and small test shapes, and conversion to/from a Hugging Face
// text_config JSON. This is the synth tool's own view of a config; the runtime's config parser
// lives elsewhere and reads the config.json that synth writes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"

namespace mere {

struct Geometry {
  std::string name;  // preset name or file path; informational
  int64_t vocab_size = 248320;
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  std::vector<std::string> layer_types;  // "linear_attention" / "full_attention", one per layer
  int64_t full_attention_interval = 4;
  // Gated full attention.
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 256;
  bool attn_output_gate = true;
  bool attention_bias = false;
  // Gated DeltaNet.
  int64_t linear_num_key_heads = 16;     // Hk
  int64_t linear_key_head_dim = 128;     // Dk
  int64_t linear_num_value_heads = 0;    // Hv
  int64_t linear_value_head_dim = 128;   // Dv
  int64_t linear_conv_kernel_dim = 4;    // K
  // FFN: dense when num_experts == 0.
  int64_t intermediate_size = 0;
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  int64_t shared_expert_intermediate_size = 0;
  // Misc.
  double rms_norm_eps = 1e-6;
  double rope_theta = 1e7;
  double partial_rotary_factor = 0.25;
  std::vector<int64_t> mrope_section = {11, 11, 10};
  bool mrope_interleaved = true;
  int64_t max_position_embeddings = 262144;
  int64_t mtp_num_hidden_layers = 1;
  bool tie_word_embeddings = false;
  int64_t eos_token_id = -1;  // -1: chosen by the tokenizer layout (synth_tokenizer.h)

  bool is_moe() const { return num_experts > 0; }
  bool is_full(int64_t layer) const { return layer_types[layer] == "full_attention"; }
  // Derived sizes (§1.3 "Derived sizes").
  int64_t q_proj_rows() const { return num_attention_heads * head_dim * (attn_output_gate ? 2 : 1); }
  int64_t kv_rows() const { return num_key_value_heads * head_dim; }
  int64_t attn_out_cols() const { return num_attention_heads * head_dim; }
  int64_t gdn_key_dim() const { return linear_num_key_heads * linear_key_head_dim; }
  int64_t gdn_value_dim() const { return linear_num_value_heads * linear_value_head_dim; }
  int64_t gdn_conv_dim() const { return 2 * gdn_key_dim() + gdn_value_dim(); }

  // Throws mere::Error naming the first inconsistent field (also fills layer_types when empty).
  void validate();
};

// Preset names in a stable order (real shapes first, then the test shapes).
std::vector<std::string> geometry_preset_names();
bool is_geometry_preset(const std::string& name);
Geometry geometry_preset(const std::string& name);  // throws listing the known names
// A text_config object (qwen35.md §1.2 fields) or a whole config.json with a "text_config".
Geometry geometry_from_json(const Json& j, const std::string& name = "json");
// NAME (a preset) or FILE (JSON, as above).
Geometry load_geometry(const std::string& name_or_file);

// The Hugging Face text_config for g (model_type qwen3_5_text / qwen3_5_moe_text, explicit
// layer_types, rope_parameters, mtp fields), in the key order real checkpoints use.
Json geometry_text_config(const Geometry& g, const std::string& dtype_name = "bfloat16");

}  // namespace mere
