#!/usr/bin/env python3
"""Golden fixtures for the C++ engine, computed by Hugging Face transformers.

Writes tests/data/goldens/<case>/ with config.json, safetensors weights,
input_ids.json, logits.npy (float32 [T, vocab], all positions, one forward
over the whole sequence) and meta.json.  Random but sane weights (see
`randomize`), fixed seeds.  Logits are computed in float32 on the CPU from
exactly the values stored on disk (weights are rounded to the storage dtype
first).  Run on the GPU machine (it has transformers); see README.md here.

usage: python3 tools/goldens/make_goldens.py [--out tests/data/goldens]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "train"))
from ckpt_io import eagerize, save_sharded, save_safetensors, is_zero_centred  # noqa: E402

import transformers as T  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.set_num_threads(min(8, os.cpu_count() or 1))

VISION_STUB = {"model_type": "qwen3_5_vision", "depth": 1, "hidden_size": 32, "intermediate_size": 64,
               "num_heads": 2, "out_hidden_size": 64, "patch_size": 16, "spatial_merge_size": 2,
               "temporal_patch_size": 2, "in_channels": 3, "num_position_embeddings": 16}


def rope(theta, section):
    return {"rope_type": "default", "rope_theta": theta, "partial_rotary_factor": 0.25,
            "mrope_section": section, "mrope_interleaved": True}


def text_kwargs(**over):
    kw = dict(vocab_size=256, hidden_size=64, intermediate_size=64, num_hidden_layers=4,
              num_attention_heads=4, num_key_value_heads=2, head_dim=32, hidden_act="silu",
              max_position_embeddings=4096, rms_norm_eps=1e-6, tie_word_embeddings=False,
              rope_parameters=rope(1e7, [2, 1, 1]), attention_bias=False, linear_conv_kernel_dim=4,
              linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2,
              linear_num_value_heads=4, eos_token_id=1, pad_token_id=0, bos_token_id=None)
    kw.update(over)
    return kw


def q128(t):
    """Round to multiples of 1/128 so that both w and 1+w are exact in bf16/f16."""
    return torch.round(t * 128) / 128


@torch.no_grad()
def randomize(model, seed, norm_grid=True):
    g = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        shp = p.shape
        if name.endswith("A_log"):
            v = torch.empty(shp).uniform_(1, 16, generator=g).log()
        elif name.endswith("dt_bias"):
            v = torch.empty(shp).uniform_(-3, 1, generator=g)
        elif name.endswith("linear_attn.norm.weight"):
            v = 1 + 0.3 * torch.randn(shp, generator=g)
            v = q128(v) if norm_grid else v
        elif name.endswith("norm.weight"):
            v = 0.3 * torch.randn(shp, generator=g)
            v = q128(v) if norm_grid else v
        elif name.endswith("conv1d.weight"):
            v = 0.5 * torch.randn(shp, generator=g)
        elif name.endswith("embed_tokens.weight"):
            v = torch.randn(shp, generator=g)
        elif name.endswith("lm_head.weight"):
            v = 2.0 * torch.randn(shp, generator=g) / math.sqrt(shp[-1])
        else:  # every matrix (2-D Linear [out,in] or 3-D experts [E,out,in]): N(0, 1/fan_in)
            v = torch.randn(shp, generator=g) / math.sqrt(shp[-1])
        p.copy_(v)


@torch.no_grad()
def round_to(model, dtype):
    for p in model.parameters():
        p.copy_(p.to(dtype).float())


@torch.no_grad()
def hf_logits(model, ids):
    eagerize(model.config)
    model.eval()
    out = model(input_ids=torch.tensor([ids]), use_cache=False)
    return out.logits[0].float().numpy()


def write_common(d, ids, logits, meta):
    with open(os.path.join(d, "input_ids.json"), "w") as f:
        json.dump([int(i) for i in ids], f)
    np.save(os.path.join(d, "logits.npy"), logits.astype(np.float32))
    meta = dict(meta)
    meta.update({"transformers_version": T.__version__, "torch_version": torch.__version__,
                 "T": len(ids), "vocab_size": int(logits.shape[1]),
                 "logits_shape": list(logits.shape), "logits_std": float(logits.std()),
                 "logits_absmax": float(np.abs(logits).max()),
                 "compute": "float32 on CPU, eager attention, one forward over all T tokens, no cache",
                 "generator": "tools/goldens/make_goldens.py"})
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)


def st_dtype(dtype):
    return {torch.bfloat16: "bfloat16", torch.float16: "float16", torch.float32: "float32"}[dtype]


def hf_save(model, d, dtype):
    """Save exactly as transformers saves it (save_pretrained), in `dtype`."""
    tmp = model.to(dtype)
    tmp.save_pretrained(d, safe_serialization=True)
    model.float()
    # keep only what the engine needs
    for fn in os.listdir(d):
        if fn not in ("config.json", "model.safetensors", "model.safetensors.index.json") and \
                not fn.endswith(".safetensors"):
            os.remove(os.path.join(d, fn))


def nested_config(text_cfg: dict, moe: bool, tie: bool):
    tc = dict(text_cfg)
    tc["model_type"] = "qwen3_5_moe_text" if moe else "qwen3_5_text"
    tc.pop("architectures", None)
    tc.pop("transformers_version", None)
    tc["tie_word_embeddings"] = tie
    vs = dict(VISION_STUB)
    if moe:
        vs["model_type"] = "qwen3_5_moe_vision"
    return {"architectures": ["Qwen3_5MoeForConditionalGeneration" if moe else "Qwen3_5ForConditionalGeneration"],
            "model_type": "qwen3_5_moe" if moe else "qwen3_5", "text_config": tc, "vision_config": vs,
            "image_token_id": 248056, "video_token_id": 248057, "vision_start_token_id": 248053,
            "vision_end_token_id": 248054, "tie_word_embeddings": tie,
            "transformers_version": T.__version__}


def state_in(model, dtype):
    return {k: v.detach().to(dtype).contiguous() for k, v in model.state_dict().items()}


def names_of(d):
    from ckpt_io import read_checkpoint_tensors
    t = read_checkpoint_tensors(d)
    return {k: [str(getattr(v, "dtype", "")), list(v.shape)] for k, v in sorted(t.items())}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "..", "..", "tests", "data", "goldens"))
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(1234)

    def fresh(name):
        d = os.path.join(out, name)
        if os.path.isdir(d):
            shutil.rmtree(d)
        os.makedirs(d)
        return d

    summary = {}

    # ---------------- case 1: dense flat untied, bf16, Hv/Hk=2, T=100 -----------------
    cfg1 = T.Qwen3_5TextConfig(**text_kwargs())
    m1 = T.Qwen3_5ForCausalLM(cfg1).float()
    randomize(m1, 1)
    round_to(m1, torch.bfloat16)
    ids1 = rng.integers(0, cfg1.vocab_size, 100).tolist()
    lg1 = hf_logits(m1, ids1)
    d = fresh("dense_flat_untied")
    hf_save(m1, d, torch.bfloat16)
    write_common(d, ids1, lg1, {
        "case": "dense_flat_untied",
        "covers": "Qwen3_5ForCausalLM as transformers save_pretrained writes it: flat config, model.* names, "
                  "lm_head.weight (untied), bf16 on disk (every tensor, A_log too), GDN Hv/Hk=2, "
                  "layer_types [lin,lin,lin,full], T=100 > 64 (GDN chunk + remainder)",
        "dtype_on_disk": "bfloat16", "tensors": names_of(d)})
    summary["dense_flat_untied"] = lg1.shape

    # ---------------- case 6: same weights in MLX-community layout ----------------------
    d = fresh("dense_mlx_layout")
    sd = state_in(m1, torch.bfloat16)
    mlx = {}
    for k, v in sd.items():
        if k.startswith("model."):
            nk = "language_model.model." + k[len("model."):]
        elif k.startswith("lm_head."):
            nk = "language_model." + k
        else:
            raise KeyError(k)
        if k.endswith("conv1d.weight"):
            v = v.permute(0, 2, 1).contiguous()            # [C,1,K] -> [C,K,1]
        if is_zero_centred(k):
            v = (v.float() + 1.0).to(torch.bfloat16)       # exact: norms are on a 1/128 grid
        mlx[nk] = v
    save_safetensors(os.path.join(d, "model.safetensors"), mlx)
    json.dump(nested_config(cfg1.to_dict(), moe=False, tie=False), open(os.path.join(d, "config.json"), "w"),
              indent=2)
    write_common(d, ids1, lg1, {
        "case": "dense_mlx_layout",
        "covers": "same weights and logits as dense_flat_untied in MLX-community layout: names "
                  "language_model.model.* and language_model.lm_head.weight, conv1d stored [C,K,1], +1 folded "
                  "into input_layernorm/post_attention_layernorm/final norm/q_norm/k_norm (NOT linear_attn.norm), "
                  "nested config, not quantised, bf16",
        "dtype_on_disk": "bfloat16", "same_as": "dense_flat_untied", "tensors": names_of(d)})

    # ---------------- case 2: nested, tied, Hv/Hk=1, f32, 2 shards + visual dummies --------------
    kw2 = text_kwargs(tie_word_embeddings=True, num_attention_heads=2, num_key_value_heads=1, head_dim=64,
                      linear_key_head_dim=32, linear_value_head_dim=32, linear_num_key_heads=2,
                      linear_num_value_heads=2, rope_parameters=rope(1e7, [4, 2, 2]))
    cfg2 = T.Qwen3_5TextConfig(**kw2)
    m2 = T.Qwen3_5ForCausalLM(cfg2).float()
    randomize(m2, 2)
    try:
        m2.tie_weights()
    except Exception as ex:
        print('tie_weights:', ex)
    assert m2.lm_head.weight.data_ptr() == m2.model.embed_tokens.weight.data_ptr(), 'lm_head not tied'
    ids2 = rng.integers(0, cfg2.vocab_size, 90).tolist()
    lg2 = hf_logits(m2, ids2)
    d = fresh("dense_nested_tied")
    sd = {}
    for k, v in m2.state_dict().items():
        if k == "lm_head.weight":
            continue
        sd["model.language_model." + k[len("model."):]] = v.detach().float().contiguous()
    g = torch.Generator().manual_seed(22)
    sd["model.visual.patch_embed.proj.weight"] = torch.randn(8, 3, 2, 4, 4, generator=g) * 0.02
    sd["model.visual.merger.linear_fc2.weight"] = torch.randn(16, 32, generator=g) * 0.02
    total = sum(v.numel() * 4 for v in sd.values())
    save_sharded(d, sd, n_shards=2)
    json.dump(nested_config(cfg2.to_dict(), moe=False, tie=True), open(os.path.join(d, "config.json"), "w"),
              indent=2)
    write_common(d, ids2, lg2, {
        "case": "dense_nested_tied",
        "covers": "real Qwen3.5 nested config (Qwen3_5ForConditionalGeneration / qwen3_5 / text_config "
                  "qwen3_5_text / vision_config stub), tie_word_embeddings=true (no lm_head.weight), names "
                  "model.language_model.*, dummy model.visual.* tensors that must be ignored, GDN Hv/Hk=1, "
                  "head_dim 64, f32 weights, 2 shards + model.safetensors.index.json",
        "dtype_on_disk": "float32", "tensors": names_of(d)})

    # ---------------- case 3: Hv/Hk=3, irregular layer types, T=150, f16 -------------------
    lt = ["linear_attention", "full_attention", "linear_attention", "linear_attention", "linear_attention",
          "full_attention"]
    kw3 = text_kwargs(vocab_size=320, num_hidden_layers=6, layer_types=lt, linear_num_key_heads=2,
                      linear_num_value_heads=6, rope_parameters=rope(10000.0, [2, 1, 1]),
                      num_attention_heads=4, num_key_value_heads=1)
    cfg3 = T.Qwen3_5TextConfig(**kw3)
    m3 = T.Qwen3_5ForCausalLM(cfg3).float()
    randomize(m3, 3)
    round_to(m3, torch.float16)
    ids3 = rng.integers(0, cfg3.vocab_size, 150).tolist()
    lg3 = hf_logits(m3, ids3)
    d = fresh("dense_ratio3_irregular")
    hf_save(m3, d, torch.float16)
    write_common(d, ids3, lg3, {
        "case": "dense_ratio3_irregular",
        "covers": "GDN Hv/Hk=3 (value head j uses key head j/3), explicit irregular layer_types "
                  "[lin,full,lin,lin,lin,full], GQA 4:1, rope_theta 10000 (read it from rope_parameters), "
                  "T=150 (two full 64-chunks + remainder), f16 weights, flat save_pretrained layout",
        "dtype_on_disk": "float16", "tensors": names_of(d)})

    # ---------------- case 4: MoE flat (save_pretrained), bf16, T=80 -------------------------
    kw4 = text_kwargs(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=16,
                      shared_expert_intermediate_size=32)
    kw4.pop("intermediate_size")
    cfg4 = T.Qwen3_5MoeTextConfig(**kw4)
    m4 = T.Qwen3_5MoeForCausalLM(cfg4).float()
    randomize(m4, 4)
    round_to(m4, torch.bfloat16)
    ids4 = rng.integers(0, cfg4.vocab_size, 80).tolist()
    lg4 = hf_logits(m4, ids4)
    d = fresh("moe_flat")
    # transformers 5.17 save_pretrained writes MoE experts PER EXPERT (its reverse weight conversion); that
    # layout is covered by moe_per_expert.  Here: the model's own fused 3-D tensors, as official Qwen3.5-MoE
    # checkpoints store the main layers (mlp.experts.gate_up_proj [E,2I,H], mlp.experts.down_proj [E,H,I]).
    save_safetensors(os.path.join(d, "model.safetensors"), state_in(m4, torch.bfloat16))
    c4 = cfg4.to_dict()
    c4["architectures"] = ["Qwen3_5MoeForCausalLM"]
    c4["transformers_version"] = T.__version__
    json.dump(c4, open(os.path.join(d, "config.json"), "w"), indent=2)
    write_common(d, ids4, lg4, {
        "case": "moe_flat",
        "covers": "Qwen3_5MoeForCausalLM flat config and flat names (model.*, lm_head.weight) with FUSED 3-D "
                  "experts (mlp.experts.gate_up_proj [E,2I,H] rows 0..I-1 gate / I..2I-1 up, no .weight suffix; "
                  "mlp.experts.down_proj [E,H,I]) as official checkpoints store them; 8 experts top-2 "
                  "softmax+renormalise, shared expert with sigmoid gate, bf16, T=80. (transformers 5.17 "
                  "save_pretrained itself writes per-expert tensors: see moe_per_expert.)",
        "dtype_on_disk": "bfloat16", "tensors": names_of(d)})

    # ---------------- case 5: same MoE weights, per-expert tensors, nested naming -------------
    d = fresh("moe_per_expert")
    sd = {}
    I = cfg4.moe_intermediate_size
    for k, v in m4.state_dict().items():
        v = v.detach().to(torch.bfloat16)
        nk = "model.language_model." + k[len("model."):] if k.startswith("model.") else k
        if k.endswith("mlp.experts.gate_up_proj"):
            pfx = nk[: -len("gate_up_proj")]
            for e in range(v.shape[0]):
                sd[f"{pfx}{e}.gate_proj.weight"] = v[e, :I].contiguous()
                sd[f"{pfx}{e}.up_proj.weight"] = v[e, I:].contiguous()
        elif k.endswith("mlp.experts.down_proj"):
            pfx = nk[: -len("down_proj")]
            for e in range(v.shape[0]):
                sd[f"{pfx}{e}.down_proj.weight"] = v[e].contiguous()
        else:
            sd[nk] = v.contiguous()
    save_safetensors(os.path.join(d, "model.safetensors"), sd)
    json.dump(nested_config(cfg4.to_dict(), moe=True, tie=False), open(os.path.join(d, "config.json"), "w"),
              indent=2)
    write_common(d, ids4, lg4, {
        "case": "moe_per_expert",
        "covers": "same weights and logits as moe_flat, experts stored per expert "
                  "(mlp.experts.{e}.gate_proj/up_proj/down_proj.weight), nested config "
                  "(Qwen3_5MoeForConditionalGeneration), names model.language_model.*, bf16",
        "dtype_on_disk": "bfloat16", "same_as": "moe_flat", "tensors": names_of(d)})

    tot = 0
    for root, _, files in os.walk(out):
        for fn in files:
            tot += os.path.getsize(os.path.join(root, fn))
    print(json.dumps({"cases": sorted(os.listdir(out)), "bytes_total": tot,
                      "transformers": T.__version__}, indent=1))


if __name__ == "__main__":
    main()
