// Qwen3.5 model configuration read from config.json: nested (text_config inside a
// *ForConditionalGeneration config) or flat (*ForCausalLM exports), validated on load.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/json.h"

namespace mere {

enum class LayerKind { Linear, Full };  // GatedDeltaNet ("linear_attention") or gated full attention

struct QuantSpec {
  int bits = 0;        // 0: not quantised
  int group_size = 0;
};

struct ModelConfig {
  std::string architecture;  // e.g. Qwen3_5ForConditionalGeneration
  std::string model_type;    // text model type: qwen3_5_text / qwen3_5_moe_text
  bool is_moe = false;

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  std::vector<LayerKind> layer_types;

  // gated full attention
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  bool attn_output_gate = true;
  int64_t rotary_dim = 0;  // head_dim * partial_rotary_factor
  double rope_theta = 1e7;

  // GatedDeltaNet
  int64_t lin_k_heads = 0, lin_k_dim = 0, lin_v_heads = 0, lin_v_dim = 0, conv_kernel = 0;

  // FFN
  int64_t intermediate_size = 0;                          // dense
  int64_t num_experts = 0, experts_per_tok = 0;           // MoE
  int64_t moe_intermediate_size = 0, shared_intermediate_size = 0;
  bool norm_topk_prob = true;

  double rms_norm_eps = 1e-6;
  int64_t max_position_embeddings = 262144;
  int64_t mtp_num_layers = 0;
  bool tie_word_embeddings = false;
  std::vector<int64_t> eos_token_ids;

  // MLX-style quantisation ("quantization" / "quantization_config"): default + per-module overrides
  QuantSpec quant;
  std::map<std::string, QuantSpec> quant_overrides;  // key: module path as written in the config

  // derived sizes
  int64_t lin_key_dim() const { return lin_k_heads * lin_k_dim; }    // Hk*Dk
  int64_t lin_value_dim() const { return lin_v_heads * lin_v_dim; }  // Hv*Dv
  int64_t conv_dim() const { return 2 * lin_key_dim() + lin_value_dim(); }
  int64_t num_full_layers() const;
  int64_t num_linear_layers() const { return num_layers - num_full_layers(); }
};

// Parses and validates; `source` names the file in errors.
ModelConfig parse_model_config(const Json& j, const std::string& source);
ModelConfig load_model_config(const std::string& model_dir);

}  // namespace mere
