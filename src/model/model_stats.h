// Parameter counts and memory estimates of a bound model (for `model info` and benchmarks).
#pragma once
#include <cstdint>

#include "model/weights.h"

namespace mere {

struct ModelStats {
  int64_t params_main = 0;       // logical weights of the main model (quantised counted unpacked)
  int64_t params_mtp = 0;        // MTP head (shares embedding and lm_head, not counted again)
  int64_t params_active = 0;     // per token: MoE counts only top-k routed experts
  size_t weight_bytes_main = 0;  // stored bytes of the main model's weights
  size_t weight_bytes_mtp = 0;
  size_t kv_bytes_per_token = 0; // fp32 KV cache per token, all full-attention layers
  size_t state_bytes = 0;        // GatedDeltaNet recurrent + conv state per sequence (fp32)
};

ModelStats compute_model_stats(const ModelConfig& c, const ModelWeights& w);

}  // namespace mere
