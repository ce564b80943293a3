// `model quantize`: converts a bf16/f16/f32 Hugging Face Qwen3.5 checkpoint to the mlx-community
// affine layout (qwen35.md §5.1-5.2): language_model.model.* / language_model.lm_head names, +1
// folded into zero-centred norms (the MTP's too), conv1d as [C, K, 1], experts stacked as
// switch_mlp.{gate,up,down}_proj, every Linear/Embedding quantised at bits/group except the MoE
// router (mlp.gate) and shared_expert_gate at 8 bits / group 64; norms, conv1d, A_log, dt_bias kept.
// Unlike mlx-lm's converter it KEEPS the MTP head (language_model.mtp.*, experts stacked too).
#pragma once
#include <cstdint>
#include <string>

#include "core/json.h"

namespace mere {

struct QuantizeOptions {
  std::string in_dir, out_dir;
  int bits = 4;         // 4 or 8 (2 also works; mlx-lm reads it)
  int group_size = 64;  // 32, 64 or 128
  bool force = false;   // replace the checkpoint files in an existing, non-empty out_dir
  bool progress = false;
  int threads = 0;      // 0: default_threads()
  int64_t shard_bytes = int64_t{5} << 30;  // max tensor bytes per shard; <= 0: one file
};

struct QuantizeResult {
  std::string out_dir;
  int64_t tensors = 0;           // output tensors
  int64_t quantized_modules = 0;  // modules written as weight/scales/biases
  int64_t in_bytes = 0, out_bytes = 0;  // tensor data
  int64_t files = 0;
  double seconds = 0;
  Json summary() const;
};

// Throws mere::Error "[quantize] ..." on bad options, an already-quantised input, an unknown
// tensor, or an existing output without force.
QuantizeResult quantize_checkpoint(const QuantizeOptions& opt);

}  // namespace mere
