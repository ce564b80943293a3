"""Shapes of the bundled models and the Qwen3.5 config.json they are exported with."""
from __future__ import annotations

import copy

LT8 = ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * 2

MODELS = {
    # ~10.2M parameters incl. MTP (4.2M of them embedding + lm_head), 3 GDN : 1 attention
    "dense": dict(
        vocab_size=8192, hidden_size=256, num_hidden_layers=8, layer_types=LT8,
        num_attention_heads=4, num_key_value_heads=2, head_dim=64,
        linear_num_key_heads=2, linear_key_head_dim=64, linear_num_value_heads=4, linear_value_head_dim=64,
        linear_conv_kernel_dim=4, intermediate_size=512, num_experts=0,
        rms_norm_eps=1e-6, rope_theta=1e7, partial_rotary_factor=0.25, tie_word_embeddings=False,
        mtp_num_hidden_layers=1,
    ),
    # ~22.5M total, ~9.3M active (main), 16 experts top-2 + shared expert
    "moe": dict(
        vocab_size=8192, hidden_size=256, num_hidden_layers=8, layer_types=LT8,
        num_attention_heads=4, num_key_value_heads=1, head_dim=64,
        linear_num_key_heads=2, linear_key_head_dim=64, linear_num_value_heads=4, linear_value_head_dim=64,
        linear_conv_kernel_dim=4, intermediate_size=0, num_experts=16, num_experts_per_tok=2,
        moe_intermediate_size=128, shared_expert_intermediate_size=256,
        rms_norm_eps=1e-6, rope_theta=1e7, partial_rotary_factor=0.25, tie_word_embeddings=False,
        mtp_num_hidden_layers=1,
    ),
}

VISION_STUB = {"model_type": "qwen3_5_vision", "depth": 0, "hidden_size": 64, "intermediate_size": 128,
               "num_heads": 2, "out_hidden_size": 256, "patch_size": 16, "spatial_merge_size": 2,
               "temporal_patch_size": 2, "in_channels": 3, "num_position_embeddings": 16,
               "note": "text-only model: no vision weights are shipped"}


def cfg_obj(name):
    import sys, os
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from qwen35_model import Cfg
    return Cfg(**copy.deepcopy(MODELS[name]))


def text_config(name: str, eos_id: int, pad_id: int, max_pos: int = 32768) -> dict:
    m = MODELS[name]
    moe = m["num_experts"] > 0
    rd = int(m["head_dim"] * m["partial_rotary_factor"])
    half = rd // 2
    sec = [half - 2 * (half // 3), half // 3, half // 3]   # sums to rotary_dim/2 (real: [11,11,10] for 32)
    tc = {
        "model_type": "qwen3_5_moe_text" if moe else "qwen3_5_text",
        "vocab_size": m["vocab_size"],
        "hidden_size": m["hidden_size"],
        "num_hidden_layers": m["num_hidden_layers"],
        "layer_types": list(m["layer_types"]),
        "full_attention_interval": 4,
        "num_attention_heads": m["num_attention_heads"],
        "num_key_value_heads": m["num_key_value_heads"],
        "head_dim": m["head_dim"],
        "attn_output_gate": True,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "linear_num_key_heads": m["linear_num_key_heads"],
        "linear_key_head_dim": m["linear_key_head_dim"],
        "linear_num_value_heads": m["linear_num_value_heads"],
        "linear_value_head_dim": m["linear_value_head_dim"],
        "linear_conv_kernel_dim": m["linear_conv_kernel_dim"],
        "hidden_act": "silu",
        "rms_norm_eps": m["rms_norm_eps"],
        "max_position_embeddings": max_pos,
        "rope_parameters": {"rope_type": "default", "rope_theta": m["rope_theta"],
                            "partial_rotary_factor": m["partial_rotary_factor"],
                            "mrope_section": sec, "mrope_interleaved": True},
        "partial_rotary_factor": m["partial_rotary_factor"],
        "mamba_ssm_dtype": "float32",
        "mtp_num_hidden_layers": m["mtp_num_hidden_layers"],
        "mtp_use_dedicated_embeddings": False,
        "tie_word_embeddings": m["tie_word_embeddings"],
        "initializer_range": 0.02,
        "use_cache": True,
        "bos_token_id": None,
        "eos_token_id": eos_id,
        "pad_token_id": pad_id,
        "dtype": "bfloat16",
    }
    if moe:
        tc.update({"num_experts": m["num_experts"], "num_experts_per_tok": m["num_experts_per_tok"],
                   "moe_intermediate_size": m["moe_intermediate_size"],
                   "shared_expert_intermediate_size": m["shared_expert_intermediate_size"],
                   "router_aux_loss_coef": 0.01, "output_router_logits": False})
    else:
        tc["intermediate_size"] = m["intermediate_size"]
    return tc


def nested_config(name: str, eos_id: int, pad_id: int, transformers_version: str = "5.17.0") -> dict:
    tc = text_config(name, eos_id, pad_id)
    moe = "num_experts" in tc
    vs = dict(VISION_STUB)
    if moe:
        vs["model_type"] = "qwen3_5_moe_vision"
    return {
        "architectures": ["Qwen3_5MoeForConditionalGeneration" if moe else "Qwen3_5ForConditionalGeneration"],
        "model_type": "qwen3_5_moe" if moe else "qwen3_5",
        "text_config": tc,
        "vision_config": vs,
        "tie_word_embeddings": tc["tie_word_embeddings"],
        "transformers_version": transformers_version,
    }
