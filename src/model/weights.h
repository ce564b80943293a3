// The model's weights after the load-time transform: canonical structure, norm weights as fp32
// with the zero-centred +1 already applied, A stored as -exp(A_log), conv as [C, K].
// The forward pass reads these and never fixes weights itself.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/config.h"
#include "model/matrix.h"

namespace mere {

using Vec = std::vector<float>;

struct AttnWeights {
  Matrix q_proj;   // [nh*hd*2, H]: per head [q(hd) | gate(hd)]
  Matrix k_proj;   // [nkv*hd, H]
  Matrix v_proj;   // [nkv*hd, H]
  Matrix o_proj;   // [H, nh*hd]
  Vec q_norm;      // [hd]  (1+w applied)
  Vec k_norm;      // [hd]
};

struct GdnWeights {
  Matrix in_proj_qkv;  // [2*Hk*Dk + Hv*Dv, H]
  Matrix in_proj_z;    // [Hv*Dv, H]
  Matrix in_proj_b;    // [Hv, H]
  Matrix in_proj_a;    // [Hv, H]
  Matrix out_proj;     // [H, Hv*Dv]
  Vec conv;            // [C, K]: conv[ch*K + j], j = K-1 multiplies the current token
  Vec dt_bias;         // [Hv]
  Vec neg_a;           // [Hv] = -exp(A_log)
  Vec norm;            // [Dv] plain weight (no +1)
};

struct MlpWeights {
  Matrix gate;  // [I, H]
  Matrix up;    // [I, H]
  Matrix down;  // [H, I]
};

struct MoeWeights {
  Matrix router;                    // [E, H]
  std::vector<MlpWeights> experts;  // E entries, each [Ie, H] / [H, Ie]
  MlpWeights shared;                // [Is, H] / [H, Is]
  Matrix shared_gate;               // [1, H]
};

struct LayerWeights {
  LayerKind kind = LayerKind::Linear;
  Vec input_norm;  // [H] (1+w applied)
  Vec post_norm;   // [H]
  AttnWeights attn;  // kind == Full
  GdnWeights gdn;    // kind == Linear
  MlpWeights mlp;    // dense models
  MoeWeights moe;    // MoE models
};

struct MtpWeights {
  bool present = false;
  Vec pre_fc_norm_embedding;  // [H]
  Vec pre_fc_norm_hidden;     // [H]
  Matrix fc;                  // [H, 2H]: input = [norm_e(emb) | norm_h(hidden)]
  LayerWeights layer;         // full attention + the model's FFN type
  Vec norm;                   // [H]
};

struct ModelWeights {
  Matrix embed;    // [V, H]
  Matrix lm_head;  // [V, H] (the embedding when tied)
  Vec final_norm;  // [H]
  std::vector<LayerWeights> layers;
  MtpWeights mtp;
  std::string format;  // "hf" or "mlx": how the checkpoint was laid out
};

// The one load-time transform: maps either naming (HF, MLX-community), checks every shape against
// the config, applies norm/conv/A fixes, and rejects tensors it does not understand.
ModelWeights bind_weights(const ModelConfig& cfg, const TensorStore& store);

}  // namespace mere
