"""Checkpoint I/O for Qwen3.5-family checkpoints (our own code).

* a minimal safetensors reader/writer (BF16/F16/F32/U32/I64 ...), so packed MLX
  uint32 weights and bf16 tensors need no dtype support from other libraries;
* MLX affine quantise / dequantise (qwen35.md 5.1: LSB-first packing, w = s*q + b);
* ``load_checkpoint(dir)``: reads any of the layouts we produce or accept
  (flat HF, nested HF, sharded, per-expert or fused experts, MLX names, MLX
  conv1d [C,K,1], MLX +1-folded norms, MLX 4/8-bit quantised) and returns the
  text config plus a float32 state dict in *flat HF naming* (``model.*``,
  ``lm_head.weight``, ``mtp.*``) with fused experts
  (``mlp.experts.gate_up_proj`` [E,2I,H], ``mlp.experts.down_proj`` [E,H,I]).
"""
from __future__ import annotations

import json
import os
import re
import struct

import numpy as np
import torch

# ----------------------------------------------------------------------------
# safetensors
# ----------------------------------------------------------------------------
_NP = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "U32": np.uint32, "I32": np.int32,
       "I64": np.int64, "U8": np.uint8, "I8": np.int8, "U16": np.uint16, "I16": np.int16, "BOOL": np.bool_}


def tensor_to_st(t: torch.Tensor):
    """torch tensor -> (dtype string, shape, bytes)."""
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        return "BF16", list(t.shape), t.view(torch.int16).numpy().tobytes()
    m = {torch.float32: "F32", torch.float16: "F16", torch.int64: "I64", torch.int32: "I32",
         torch.uint8: "U8", torch.int8: "I8", torch.bool: "BOOL", torch.float64: "F64"}
    return m[t.dtype], list(t.shape), t.numpy().tobytes()


def array_to_st(a: np.ndarray):
    a = np.ascontiguousarray(a)
    rev = {np.dtype(v): k for k, v in _NP.items()}
    return rev[a.dtype], list(a.shape), a.tobytes()


def save_safetensors(path: str, tensors: dict, metadata: dict | None = None):
    """tensors: name -> torch.Tensor | np.ndarray | (dtype, shape, bytes). Written in name order."""
    entries = []
    for name in sorted(tensors):
        v = tensors[name]
        if isinstance(v, torch.Tensor):
            v = tensor_to_st(v)
        elif isinstance(v, np.ndarray):
            v = array_to_st(v)
        entries.append((name, v))
    header = {}
    off = 0
    for name, (dt, shape, data) in entries:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
    header["__metadata__"] = metadata or {"format": "pt"}
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for _, (_, _, data) in entries:
            f.write(data)


def read_safetensors(path: str) -> dict:
    """name -> torch tensor (BF16 -> torch.bfloat16, U32 -> np.uint32 array kept as numpy)."""
    with open(path, "rb") as f:
        buf = f.read()
    n = struct.unpack("<Q", buf[:8])[0]
    header = json.loads(buf[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        raw = buf[base + b: base + e]
        shape = info["shape"]
        dt = info["dtype"]
        if dt == "BF16":
            a = np.frombuffer(raw, dtype=np.int16).reshape(shape).copy()
            out[name] = torch.from_numpy(a).view(torch.bfloat16)
        elif dt == "U32":
            out[name] = np.frombuffer(raw, dtype=np.uint32).reshape(shape).copy()
        else:
            out[name] = torch.from_numpy(np.frombuffer(raw, dtype=_NP[dt]).reshape(shape).copy())
    return out


def save_sharded(dirpath: str, tensors: dict, max_shard_bytes: int = 14 * 1024 * 1024,
                 base: str = "model", n_shards: int | None = None):
    """Writes base.safetensors, or base-0000i-of-0000n.safetensors + base.safetensors.index.json."""
    conv = {}
    for k, v in tensors.items():
        conv[k] = tensor_to_st(v) if isinstance(v, torch.Tensor) else (array_to_st(v) if isinstance(v, np.ndarray) else v)
    total = sum(len(v[2]) for v in conv.values())
    if total <= max_shard_bytes and not n_shards:
        save_safetensors(os.path.join(dirpath, f"{base}.safetensors"), conv)
        return [f"{base}.safetensors"]
    shards, cur, cur_b = [], {}, 0
    if n_shards:   # exactly n contiguous groups of about equal size
        acc = 0
        for k in sorted(conv):
            sz = len(conv[k][2])
            idx = min(n_shards - 1, int(acc * n_shards / total))
            while len(shards) <= idx:
                shards.append({})
            shards[idx][k] = conv[k]
            acc += sz
        shards = [sh for sh in shards if sh]
    else:
        for k in sorted(conv):
            sz = len(conv[k][2])
            if cur and cur_b + sz > max_shard_bytes:
                shards.append(cur)
                cur, cur_b = {}, 0
            cur[k] = conv[k]
            cur_b += sz
        if cur:
            shards.append(cur)
    n = len(shards)
    wm = {}
    names = []
    for i, sh in enumerate(shards):
        fn = f"{base}-{i + 1:05d}-of-{n:05d}.safetensors"
        save_safetensors(os.path.join(dirpath, fn), sh)
        names.append(fn)
        for k in sh:
            wm[k] = fn
    with open(os.path.join(dirpath, f"{base}.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(wm.items()))}, f, indent=2)
    return names


def read_checkpoint_tensors(dirpath: str) -> dict:
    idx = os.path.join(dirpath, "model.safetensors.index.json")
    if os.path.exists(idx):
        files = sorted(set(json.load(open(idx))["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    out = {}
    for fn in files:
        out.update(read_safetensors(os.path.join(dirpath, fn)))
    return out


# ----------------------------------------------------------------------------
# MLX affine quantisation
# ----------------------------------------------------------------------------
def quantize(w: torch.Tensor, bits: int = 4, group: int = 64):
    """w [..., in] float -> (packed uint32 [..., in*bits/32] numpy, scales bf16, biases bf16).

    Per group of `group` inputs: scale = (max-min)/(2^bits-1), bias = min (both rounded to bf16),
    q = clamp(round((w - bias)/scale)).  Dequant: w = scale*q + bias (qwen35.md 5.1).
    """
    w = w.detach().float().cpu()
    *lead, n_in = w.shape
    assert n_in % group == 0, (w.shape, group)
    wg = w.reshape(*lead, n_in // group, group)
    wmin = wg.amin(-1)
    wmax = wg.amax(-1)
    nb = (1 << bits) - 1
    scale = ((wmax - wmin) / nb).clamp_min(1e-8).to(torch.bfloat16)
    bias = wmin.to(torch.bfloat16)
    s = scale.float()[..., None]
    b = bias.float()[..., None]
    q = torch.round((wg - b) / s).clamp(0, nb).to(torch.int64).reshape(*lead, n_in)
    vpw = 32 // bits
    qn = q.numpy().reshape(*lead, n_in // vpw, vpw)
    packed = np.zeros(qn.shape[:-1], dtype=np.uint64)
    for j in range(vpw):
        packed |= (qn[..., j].astype(np.uint64) << np.uint64(bits * j))
    return packed.astype(np.uint32), scale, bias


def dequantize(packed: np.ndarray, scales: torch.Tensor, biases: torch.Tensor, bits: int = 4,
               group: int = 64) -> torch.Tensor:
    vpw = 32 // bits
    p = packed.astype(np.uint64)
    mask = np.uint64((1 << bits) - 1)
    qs = [((p >> np.uint64(bits * j)) & mask) for j in range(vpw)]
    q = np.stack(qs, axis=-1).reshape(*packed.shape[:-1], packed.shape[-1] * vpw).astype(np.float32)
    q = torch.from_numpy(q)
    *lead, n_in = q.shape
    qg = q.reshape(*lead, n_in // group, group)
    w = scales.float()[..., None] * qg + biases.float()[..., None]
    return w.reshape(*lead, n_in)


# ----------------------------------------------------------------------------
# loading any layout -> flat HF float32 state dict
# ----------------------------------------------------------------------------
ZERO_CENTRED_SUFFIXES = ("input_layernorm.weight", "post_attention_layernorm.weight", "q_norm.weight",
                         "k_norm.weight", "pre_fc_norm_embedding.weight", "pre_fc_norm_hidden.weight")


def is_zero_centred(flat_name: str) -> bool:
    if flat_name in ("model.norm.weight", "mtp.norm.weight"):
        return True
    if "linear_attn" in flat_name:
        return False
    return flat_name.endswith(ZERO_CENTRED_SUFFIXES)


def text_config_of(cfg: dict) -> dict:
    tc = dict(cfg.get("text_config") or cfg)
    if "tie_word_embeddings" not in tc and "tie_word_embeddings" in cfg:
        tc["tie_word_embeddings"] = cfg["tie_word_embeddings"]
    return tc


def flat_name(name: str) -> str | None:
    """Checkpoint name -> flat HF name (None = ignore)."""
    if name.startswith(("model.visual.", "visual.", "vision_tower.", "model.vision_tower.")):
        return None
    if name.startswith("model.language_model."):
        return "model." + name[len("model.language_model."):]
    if name.startswith("language_model.model."):
        return "model." + name[len("language_model.model."):]
    if name.startswith("language_model.lm_head."):
        return "lm_head." + name[len("language_model.lm_head."):]
    if name.startswith("language_model.mtp."):
        return name[len("language_model."):]
    return name


def load_checkpoint(dirpath: str):
    """Returns (text_config dict, full config dict, flat f32 state dict, info dict)."""
    cfg = json.load(open(os.path.join(dirpath, "config.json")))
    tc = text_config_of(cfg)
    qcfg = cfg.get("quantization") or cfg.get("quantization_config")
    raw = read_checkpoint_tensors(dirpath)
    info = {"layout": "hf", "quantized": bool(qcfg), "ignored": []}
    mlx = any(k.startswith("language_model.") for k in raw) or any(
        k.endswith("conv1d.weight") and v.shape[-1] == 1 for k, v in raw.items() if isinstance(v, torch.Tensor))
    if mlx:
        info["layout"] = "mlx"
    # dequantise
    tens = {}
    for k, v in raw.items():
        if k.endswith((".scales", ".biases")):
            continue
        if isinstance(v, np.ndarray):  # packed U32
            mod = k[: -len(".weight")]
            bits, group = qcfg.get("bits", 4), qcfg.get("group_size", 64)
            ov = qcfg.get(mod)
            if isinstance(ov, dict):
                bits, group = ov.get("bits", bits), ov.get("group_size", group)
            w = dequantize(v, raw[mod + ".scales"], raw[mod + ".biases"], bits, group)
            tens[k] = w
        else:
            tens[k] = v.float()
    sd = {}
    for k, v in tens.items():
        fk = flat_name(k)
        if fk is None:
            info["ignored"].append(k)
            continue
        if fk.endswith("conv1d.weight") and v.dim() == 3 and v.shape[-1] == 1:
            v = v.permute(0, 2, 1).contiguous()       # MLX [C,K,1] -> HF [C,1,K]
        if mlx and is_zero_centred(fk):
            v = v - 1.0                                # MLX folds the +1
        sd[fk] = v
    # experts: per-expert or switch_mlp -> fused
    fused = {}
    pe = re.compile(r"^(.*\.mlp)\.experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")
    sw = re.compile(r"^(.*\.mlp)\.switch_mlp\.(gate_proj|up_proj|down_proj)\.weight$")
    per = {}
    for k in list(sd):
        m = pe.match(k)
        if m:
            per.setdefault(m.group(1), {}).setdefault(m.group(3), {})[int(m.group(2))] = sd.pop(k)
            continue
        m = sw.match(k)
        if m:
            fused.setdefault(m.group(1), {})[m.group(2)] = sd.pop(k)
    for pfx, d in per.items():
        E = len(d["gate_proj"])
        fused[pfx] = {p: torch.stack([d[p][e] for e in range(E)]) for p in d}
        info.setdefault("per_expert_blocks", []).append(pfx)
    for pfx, d in fused.items():
        sd[pfx + ".experts.gate_up_proj"] = torch.cat([d["gate_proj"], d["up_proj"]], dim=1)
        sd[pfx + ".experts.down_proj"] = d["down_proj"]
    return tc, cfg, sd, info


def build_own_model(tc: dict, sd: dict, with_mtp: bool | None = None):
    """Our Qwen35 module in float32 loaded from a flat state dict."""
    from qwen35_model import Cfg, Qwen35
    has_mtp = any(k.startswith("mtp.") for k in sd)
    c = Cfg.from_text_config(tc, mtp=has_mtp if with_mtp is None else with_mtp)
    m = Qwen35(c).float()
    own = m.state_dict()
    load = {k: v for k, v in sd.items() if k in own}
    missing = [k for k in own if k not in load]
    if c.tie_word_embeddings:
        missing = [k for k in missing if k != "lm_head.weight"]
    unexpected = [k for k in sd if k not in own]
    if missing:
        raise KeyError(f"missing weights: {missing[:10]} (+{max(0, len(missing) - 10)})")
    for k, v in load.items():
        if own[k].shape != v.shape:
            raise ValueError(f"shape mismatch {k}: {tuple(own[k].shape)} vs {tuple(v.shape)}")
    m.load_state_dict(load, strict=False)
    return m, unexpected


def eagerize(config):
    for attr in ("_attn_implementation", "_experts_implementation"):
        try:
            setattr(config, attr, "eager")
        except Exception:
            pass


def build_hf_model(tc: dict, sd: dict):
    """transformers Qwen3_5ForCausalLM / Qwen3_5MoeForCausalLM in float32 (eager attention)."""
    import transformers as T
    tc = dict(tc)
    moe = bool(tc.get("num_experts"))
    for drop in ("architectures", "transformers_version", "dtype", "torch_dtype", "model_type"):
        tc.pop(drop, None)
    Cfgcls = T.Qwen3_5MoeTextConfig if moe else T.Qwen3_5TextConfig
    Mcls = T.Qwen3_5MoeForCausalLM if moe else T.Qwen3_5ForCausalLM
    config = Cfgcls(**tc)
    eagerize(config)
    model = Mcls(config).float().eval()
    eagerize(model.config)
    main = {k: v for k, v in sd.items() if not k.startswith("mtp.")}
    res = model.load_state_dict(main, strict=False)
    missing = [k for k in res.missing_keys if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or res.unexpected_keys:
        raise KeyError(f"HF load: missing={missing[:8]} unexpected={res.unexpected_keys[:8]}")
    if config.tie_word_embeddings:
        model.tie_weights()
    return model
