"""Export a trained flat state dict as a Qwen3.5 checkpoint directory.

* HF layout (bf16): nested config, names model.language_model.*, lm_head.weight, mtp.*;
  A_log kept float32 like the official checkpoints; main MoE experts fused 3-D
  (mlp.experts.gate_up_proj / down_proj, no .weight suffix), MTP experts per expert
  (mtp.layers.0.mlp.experts.{e}.{gate,up,down}_proj.weight); shards <= 14 MB.
* MLX layout (affine 4-bit, group 64): names language_model.model.*, language_model.lm_head.*,
  mtp.* kept (quantised the same way, experts stacked as mtp.layers.0.mlp.switch_mlp.*),
  +1 folded into zero-centred norms (not linear_attn.norm), conv1d [C,K,1], experts as
  switch_mlp.{gate,up,down}_proj [E,out,in/8]; router mlp.gate and mlp.shared_expert_gate at
  8 bits (per-module overrides in "quantization"/"quantization_config"); norms, conv1d,
  dt_bias (bf16) and A_log (f32) unquantised.
"""
from __future__ import annotations

import json
import os
import re
import shutil

import torch

from ckpt_io import is_zero_centred, quantize, save_sharded

EIGHT_BIT = ("mlp.gate.weight", "mlp.shared_expert_gate.weight")


def hf_tensors(sd: dict, num_experts: int) -> dict:
    out = {}
    for k, v in sd.items():
        v = v.detach().float().cpu()
        dt = torch.float32 if k.endswith("A_log") else torch.bfloat16
        if k.startswith("model."):
            nk = "model.language_model." + k[len("model."):]
        else:
            nk = k  # lm_head.weight, mtp.*
        if k.startswith("mtp.") and k.endswith("mlp.experts.gate_up_proj"):
            pfx = nk[: -len("gate_up_proj")]
            I = v.shape[1] // 2
            for e in range(v.shape[0]):
                out[f"{pfx}{e}.gate_proj.weight"] = v[e, :I].to(dt).contiguous()
                out[f"{pfx}{e}.up_proj.weight"] = v[e, I:].to(dt).contiguous()
            continue
        if k.startswith("mtp.") and k.endswith("mlp.experts.down_proj"):
            pfx = nk[: -len("down_proj")]
            for e in range(v.shape[0]):
                out[f"{pfx}{e}.down_proj.weight"] = v[e].to(dt).contiguous()
            continue
        out[nk] = v.to(dt).contiguous()
    return out


def mlx_name(k: str) -> str:
    if k.startswith("model."):
        return "language_model.model." + k[len("model."):]
    if k.startswith("lm_head."):
        return "language_model." + k
    return k


def mlx_tensors(sd: dict, bits: int = 4, group: int = 64):
    """Returns (tensors, quantization dict)."""
    out = {}
    q = {"group_size": group, "bits": bits, "mode": "affine"}

    def put_linear(name_w: str, w: torch.Tensor):
        mod = name_w[: -len(".weight")]
        b = 8 if name_w.endswith(EIGHT_BIT) else bits
        if w.shape[-1] % group != 0:
            out[name_w] = w.to(torch.bfloat16)
            return
        packed, s, bb = quantize(w, b, group)
        out[name_w] = packed
        out[mod + ".scales"] = s
        out[mod + ".biases"] = bb
        if b != bits:
            q[mod] = {"group_size": group, "bits": b}

    for k, v in sd.items():
        v = v.detach().float().cpu()
        nk = mlx_name(k)
        if k.endswith("mlp.experts.gate_up_proj"):
            pfx = nk[: -len("experts.gate_up_proj")] + "switch_mlp."
            I = v.shape[1] // 2
            put_linear(pfx + "gate_proj.weight", v[:, :I])
            put_linear(pfx + "up_proj.weight", v[:, I:])
        elif k.endswith("mlp.experts.down_proj"):
            pfx = nk[: -len("experts.down_proj")] + "switch_mlp."
            put_linear(pfx + "down_proj.weight", v)
        elif k.endswith("conv1d.weight"):
            out[nk] = v.permute(0, 2, 1).contiguous().to(torch.bfloat16)     # [C,1,K] -> [C,K,1]
        elif k.endswith("A_log"):
            out[nk] = v.float()
        elif k.endswith("dt_bias"):
            out[nk] = v.to(torch.bfloat16)
        elif v.dim() == 1:   # norms
            out[nk] = ((v + 1.0) if is_zero_centred(k) else v).to(torch.bfloat16)
        else:
            put_linear(nk, v)
    return out, q


def generation_config(eos_ids, pad_id):
    return {"do_sample": True, "eos_token_id": eos_ids, "pad_token_id": pad_id, "bos_token_id": None,
            "temperature": 0.7, "top_p": 0.95, "top_k": 20,
            # mere.run's own key: these bundled models opt in to MTP speculation by default
            # (sampling penalties would make requests ineligible, so none are set here).
            "mererun_mtp": {"enabled": True, "block_size": 4},
            "transformers_version": "5.17.0"}


def write_model_dir(d: str, tensors: dict, config: dict, tok_dir: str, gen: dict, max_shard=14 * 2 ** 20):
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    files = save_sharded(d, tensors, max_shard_bytes=max_shard)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    with open(os.path.join(d, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
        f.write("\n")
    if tok_dir:
        for fn in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(tok_dir, fn), os.path.join(d, fn))
    return files


def dir_bytes(d: str) -> int:
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs)
