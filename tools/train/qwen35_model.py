"""Qwen3.5-family text model (dense or MoE) with an MTP head, in plain PyTorch.

Our own implementation, written for training the bundled tiny models and for
checking checkpoints.  Parameter names follow the Hugging Face checkpoint
names of Qwen3_5ForCausalLM / Qwen3_5MoeForCausalLM (flat, ``model.*`` and
``lm_head.weight``) plus the ``mtp.*`` block of the real checkpoints, so a
``state_dict()`` of this module is (after renaming ``model.`` to
``model.language_model.``) a Qwen3.5 checkpoint.

Math: docs qwen35.md sections 3 and 4.  Every place where Hugging Face does
something dtype-specific is marked; in float32 the results match HF to
rounding (checked by tools/train/check_impl.py against transformers).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F


# --------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------
@dataclass
class Cfg:
    vocab_size: int = 8192
    hidden_size: int = 256
    num_hidden_layers: int = 8
    layer_types: list = field(default_factory=list)
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 64
    linear_num_key_heads: int = 2
    linear_key_head_dim: int = 64
    linear_num_value_heads: int = 4
    linear_value_head_dim: int = 64
    linear_conv_kernel_dim: int = 4
    intermediate_size: int = 512          # dense FFN
    num_experts: int = 0                  # 0 -> dense
    num_experts_per_tok: int = 2
    moe_intermediate_size: int = 128
    shared_expert_intermediate_size: int = 256
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1e7
    partial_rotary_factor: float = 0.25
    tie_word_embeddings: bool = False
    mtp_num_hidden_layers: int = 1        # 0 -> no MTP block

    def __post_init__(self):
        if not self.layer_types:
            self.layer_types = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention"
                                for i in range(self.num_hidden_layers)]

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def rotary_dim(self) -> int:
        return int(self.head_dim * self.partial_rotary_factor)

    @staticmethod
    def from_text_config(tc: dict, mtp: bool | None = None) -> "Cfg":
        rp = tc.get("rope_parameters") or {}
        theta = rp.get("rope_theta", tc.get("rope_theta", 1e7))
        prf = rp.get("partial_rotary_factor", tc.get("partial_rotary_factor", 0.25))
        n = tc["num_hidden_layers"]
        lt = tc.get("layer_types")
        if not lt:
            iv = tc.get("full_attention_interval", 4)
            lt = ["full_attention" if (i + 1) % iv == 0 else "linear_attention" for i in range(n)]
        c = Cfg(
            vocab_size=tc["vocab_size"], hidden_size=tc["hidden_size"], num_hidden_layers=n,
            layer_types=list(lt), num_attention_heads=tc["num_attention_heads"],
            num_key_value_heads=tc["num_key_value_heads"], head_dim=tc.get("head_dim", 256),
            linear_num_key_heads=tc["linear_num_key_heads"], linear_key_head_dim=tc["linear_key_head_dim"],
            linear_num_value_heads=tc["linear_num_value_heads"],
            linear_value_head_dim=tc["linear_value_head_dim"],
            linear_conv_kernel_dim=tc.get("linear_conv_kernel_dim", 4),
            intermediate_size=tc.get("intermediate_size", 0) or 0,
            num_experts=tc.get("num_experts", 0) or 0,
            num_experts_per_tok=tc.get("num_experts_per_tok", 2) or 2,
            moe_intermediate_size=tc.get("moe_intermediate_size", 0) or 0,
            shared_expert_intermediate_size=tc.get("shared_expert_intermediate_size", 0) or 0,
            rms_norm_eps=tc.get("rms_norm_eps", 1e-6), rope_theta=float(theta),
            partial_rotary_factor=float(prf), tie_word_embeddings=bool(tc.get("tie_word_embeddings", False)),
            mtp_num_hidden_layers=tc.get("mtp_num_hidden_layers", 0) if mtp is None else int(bool(mtp)),
        )
        return c


# --------------------------------------------------------------------------
# building blocks
# --------------------------------------------------------------------------
class ZRMSNorm(nn.Module):
    """Zero-centred RMSNorm: x * rsqrt(mean x^2 + eps) * (1 + w), in fp32 (HF Qwen3_5RMSNorm)."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * (1.0 + self.weight.float())).type_as(x)


class GatedRMSNorm(nn.Module):
    """GDN output norm: w * norm(x) * silu(z); plain weight (init ones)."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x, z):
        dt = x.dtype
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        y = self.weight * y.to(dt)
        y = y * F.silu(z.float())
        return y.to(dt)


def rope_tables(positions: torch.Tensor, rotary_dim: int, theta: float):
    """cos/sin [.., rotary_dim] in fp32 for rotate-half RoPE (text-only MRoPE == 1-D RoPE)."""
    inv = 1.0 / (theta ** (torch.arange(0, rotary_dim, 2, dtype=torch.float32,
                                        device=positions.device) / rotary_dim))
    f = positions.float()[..., None] * inv
    emb = torch.cat([f, f], dim=-1)
    return emb.cos(), emb.sin()


def apply_rope(x, cos, sin):
    """x [B, T, heads, hd]; cos/sin [T, rd] (or [B,T,rd]); rotate first rd dims (rotate-half pairing)."""
    rd = cos.shape[-1]
    if cos.dim() == 2:
        cos = cos[None, :, None, :]
        sin = sin[None, :, None, :]
    else:
        cos = cos[:, :, None, :]
        sin = sin[:, :, None, :]
    cos = cos.to(x.dtype)
    sin = sin.to(x.dtype)
    xr, xp = x[..., :rd], x[..., rd:]
    h = rd // 2
    rot = torch.cat([-xr[..., h:], xr[..., :h]], dim=-1)
    return torch.cat([xr * cos + rot * sin, xp], dim=-1)


def l2norm(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


def chunk_gated_delta_rule(q, k, v, g, beta, chunk: int = 64):
    """Chunked gated delta rule (qwen35.md 3.5.1), all fp32.

    q, k: [B, T, Hk, Dk] (raw, l2-normalised here), v: [B, T, Hv, Dv], g, beta: [B, T, Hv].
    Returns o [B, T, Hv, Dv] (fp32).
    """
    B, T, Hk, Dk = k.shape
    Hv, Dv = v.shape[2], v.shape[3]
    with torch.autocast(device_type=q.device.type, enabled=False):
        q = q.float()
        k = k.float()
        v = v.float()
        g = g.float()
        beta = beta.float()
        if Hv != Hk:
            r = Hv // Hk
            q = q.repeat_interleave(r, dim=2)
            k = k.repeat_interleave(r, dim=2)
        q = l2norm(q) * (Dk ** -0.5)
        k = l2norm(k)
        # [B, H, T, D]
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        g = g.transpose(1, 2)
        beta = beta.transpose(1, 2)
        pad = (chunk - T % chunk) % chunk
        if pad:
            q = F.pad(q, (0, 0, 0, pad))
            k = F.pad(k, (0, 0, 0, pad))
            v = F.pad(v, (0, 0, 0, pad))
            g = F.pad(g, (0, pad))
            beta = F.pad(beta, (0, pad))
        N = (T + pad) // chunk
        H = Hv
        q = q.reshape(B, H, N, chunk, Dk)
        k = k.reshape(B, H, N, chunk, Dk)
        v = v.reshape(B, H, N, chunk, Dv)
        g = g.reshape(B, H, N, chunk)
        beta = beta.reshape(B, H, N, chunk)
        G = g.cumsum(-1)
        upper = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).triu(1)
        decay = (G[..., :, None] - G[..., None, :]).masked_fill(upper, float("-inf")).exp()
        kb = k * beta[..., None]
        vb = v * beta[..., None]
        A = (kb @ k.transpose(-1, -2)) * decay          # diag ignored by unitriangular solve
        rhs = torch.cat([vb, kb * G.exp()[..., None]], dim=-1)
        X = torch.linalg.solve_triangular(A, rhs, upper=False, unitriangular=True)
        U, W = X[..., :Dv], X[..., Dv:]
        M = (q @ k.transpose(-1, -2)) * decay
        qd = q * G.exp()[..., None]
        Glast = G[..., -1:]
        kd = k * (Glast - G).exp()[..., None]
        cd = Glast.exp()[..., None]                      # [B,H,N,1,1]
        S = q.new_zeros(B, H, Dk, Dv)
        outs = []
        for n in range(N):
            vnew = U[:, :, n] - W[:, :, n] @ S
            outs.append(qd[:, :, n] @ S + M[:, :, n] @ vnew)
            S = S * cd[:, :, n] + kd[:, :, n].transpose(-1, -2) @ vnew
        o = torch.stack(outs, dim=2).reshape(B, H, N * chunk, Dv)[:, :, :T]
        return o.transpose(1, 2)


class GatedDeltaNet(nn.Module):
    def __init__(self, c: Cfg):
        super().__init__()
        self.c = c
        self.key_dim = c.linear_num_key_heads * c.linear_key_head_dim
        self.value_dim = c.linear_num_value_heads * c.linear_value_head_dim
        self.conv_dim = 2 * self.key_dim + self.value_dim
        H = c.hidden_size
        self.in_proj_qkv = nn.Linear(H, self.conv_dim, bias=False)
        self.in_proj_z = nn.Linear(H, self.value_dim, bias=False)
        self.in_proj_b = nn.Linear(H, c.linear_num_value_heads, bias=False)
        self.in_proj_a = nn.Linear(H, c.linear_num_value_heads, bias=False)
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, c.linear_conv_kernel_dim,
                                groups=self.conv_dim, bias=False, padding=c.linear_conv_kernel_dim - 1)
        self.dt_bias = nn.Parameter(torch.ones(c.linear_num_value_heads))
        self.A_log = nn.Parameter(torch.zeros(c.linear_num_value_heads))
        self.norm = GatedRMSNorm(c.linear_value_head_dim, c.rms_norm_eps)
        self.out_proj = nn.Linear(self.value_dim, H, bias=False)

    def forward(self, x):
        c = self.c
        B, T, _ = x.shape
        qkv = self.in_proj_qkv(x).transpose(1, 2)
        w = self.conv1d.weight
        qkv = F.conv1d(qkv.to(w.dtype) if not torch.is_autocast_enabled() else qkv, w,
                       padding=c.linear_conv_kernel_dim - 1, groups=self.conv_dim)[..., :T]
        qkv = F.silu(qkv).transpose(1, 2)
        q, k, v = torch.split(qkv, [self.key_dim, self.key_dim, self.value_dim], dim=-1)
        q = q.reshape(B, T, c.linear_num_key_heads, c.linear_key_head_dim)
        k = k.reshape(B, T, c.linear_num_key_heads, c.linear_key_head_dim)
        v = v.reshape(B, T, c.linear_num_value_heads, c.linear_value_head_dim)
        z = self.in_proj_z(x).reshape(B, T, c.linear_num_value_heads, c.linear_value_head_dim)
        beta = self.in_proj_b(x).float().sigmoid()
        g = -self.A_log.float().exp() * F.softplus(self.in_proj_a(x).float() + self.dt_bias.float())
        o = chunk_gated_delta_rule(q, k, v, g, beta).to(q.dtype)
        o = self.norm(o, z).reshape(B, T, self.value_dim)
        return self.out_proj(o)


class Attention(nn.Module):
    def __init__(self, c: Cfg):
        super().__init__()
        self.c = c
        H, hd = c.hidden_size, c.head_dim
        self.q_proj = nn.Linear(H, c.num_attention_heads * hd * 2, bias=False)
        self.k_proj = nn.Linear(H, c.num_key_value_heads * hd, bias=False)
        self.v_proj = nn.Linear(H, c.num_key_value_heads * hd, bias=False)
        self.o_proj = nn.Linear(c.num_attention_heads * hd, H, bias=False)
        self.q_norm = ZRMSNorm(hd, c.rms_norm_eps)
        self.k_norm = ZRMSNorm(hd, c.rms_norm_eps)

    def qkv(self, x, cos, sin):
        """Returns q [B,nh,T,hd], k/v [B,nkv,T,hd], gate [B,T,nh*hd]."""
        c = self.c
        B, T, _ = x.shape
        qg = self.q_proj(x).view(B, T, c.num_attention_heads, 2 * c.head_dim)
        q, gate = qg[..., :c.head_dim], qg[..., c.head_dim:]
        gate = gate.reshape(B, T, -1)
        q = self.q_norm(q)
        k = self.k_norm(self.k_proj(x).view(B, T, c.num_key_value_heads, c.head_dim))
        v = self.v_proj(x).view(B, T, c.num_key_value_heads, c.head_dim)
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), gate

    def out(self, o, gate):
        B, nh, T, hd = o.shape
        o = o.transpose(1, 2).reshape(B, T, nh * hd)
        return self.o_proj(o * torch.sigmoid(gate))

    def forward(self, x, cos, sin):
        q, k, v, gate = self.qkv(x, cos, sin)
        o = sdpa(q, k, v, causal=True, scale=self.c.head_dim ** -0.5)
        return self.out(o, gate)


def sdpa(q, k, v, causal=False, mask=None, scale=None):
    nrep = q.shape[1] // k.shape[1]
    if nrep > 1:
        k = k.repeat_interleave(nrep, dim=1)
        v = v.repeat_interleave(nrep, dim=1)
    if mask is not None:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)


class MLP(nn.Module):
    def __init__(self, H, I):
        super().__init__()
        self.gate_proj = nn.Linear(H, I, bias=False)
        self.up_proj = nn.Linear(H, I, bias=False)
        self.down_proj = nn.Linear(I, H, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Experts(nn.Module):
    """Fused expert weights as HF stores them: gate_up_proj [E, 2I, H], down_proj [E, H, I]."""

    def __init__(self, E, H, I):
        super().__init__()
        self.gate_up_proj = nn.Parameter(torch.empty(E, 2 * I, H))
        self.down_proj = nn.Parameter(torch.empty(E, H, I))


class MoE(nn.Module):
    def __init__(self, c: Cfg):
        super().__init__()
        self.c = c
        H = c.hidden_size
        self.gate = nn.Linear(H, c.num_experts, bias=False)
        self.experts = Experts(c.num_experts, H, c.moe_intermediate_size)
        self.shared_expert = MLP(H, c.shared_expert_intermediate_size)
        self.shared_expert_gate = nn.Linear(H, 1, bias=False)
        self.aux_loss = None

    def route(self, x2):
        with torch.autocast(device_type=x2.device.type, enabled=False):
            logits = F.linear(x2.float(), self.gate.weight.float())
        probs = logits.softmax(-1)
        topv, topi = probs.topk(self.c.num_experts_per_tok, dim=-1)
        topv = topv / topv.sum(-1, keepdim=True)
        return probs, topv, topi

    def forward(self, x, sparse: bool = False):
        c = self.c
        shp = x.shape
        x2 = x.reshape(-1, shp[-1])
        probs, topv, topi = self.route(x2)
        if self.training:
            E = c.num_experts
            f = torch.zeros(E, device=x.device).scatter_add_(0, topi.reshape(-1),
                                                             torch.ones(topi.numel(), device=x.device))
            f = f / topi.numel()
            self.aux_loss = E * (f * probs.mean(0)).sum()
        if sparse:
            out = torch.zeros_like(x2, dtype=torch.float32)
            for e in range(c.num_experts):
                rows, slot = torch.where(topi == e)
                if rows.numel() == 0:
                    continue
                xe = x2[rows]
                gu = F.linear(xe, self.experts.gate_up_proj[e])
                gte, up = gu.chunk(2, dim=-1)
                ye = F.linear(F.silu(gte) * up, self.experts.down_proj[e])
                out.index_add_(0, rows, ye.float() * topv[rows, slot, None])
            routed = out.to(x2.dtype) if not torch.is_autocast_enabled() else out
        else:
            # dense compute over all experts, weights zero for unselected experts (training speed path)
            w = torch.zeros(x2.shape[0], c.num_experts, device=x.device, dtype=topv.dtype)
            w.scatter_(1, topi, topv)
            gu = torch.matmul(x2.unsqueeze(0), self.experts.gate_up_proj.transpose(1, 2))  # [E,N,2I]
            gte, up = gu.chunk(2, dim=-1)
            y = torch.matmul(F.silu(gte) * up, self.experts.down_proj.transpose(1, 2))     # [E,N,H]
            routed = (y * w.t().unsqueeze(-1).to(y.dtype)).sum(0)
        shared = torch.sigmoid(self.shared_expert_gate(x2)) * self.shared_expert(x2)
        return (routed + shared).reshape(shp)


class DecoderLayer(nn.Module):
    def __init__(self, c: Cfg, layer_type: str):
        super().__init__()
        self.layer_type = layer_type
        if layer_type == "linear_attention":
            self.linear_attn = GatedDeltaNet(c)
        else:
            self.self_attn = Attention(c)
        self.mlp = MoE(c) if c.is_moe else MLP(c.hidden_size, c.intermediate_size)
        self.input_layernorm = ZRMSNorm(c.hidden_size, c.rms_norm_eps)
        self.post_attention_layernorm = ZRMSNorm(c.hidden_size, c.rms_norm_eps)

    def ffn(self, h):
        return h + self.mlp(self.post_attention_layernorm(h))

    def forward(self, x, cos, sin):
        u = self.input_layernorm(x)
        if self.layer_type == "linear_attention":
            x = x + self.linear_attn(u)
        else:
            x = x + self.self_attn(u, cos, sin)
        return self.ffn(x)


class TextModel(nn.Module):
    def __init__(self, c: Cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList([DecoderLayer(c, t) for t in c.layer_types])
        self.norm = ZRMSNorm(c.hidden_size, c.rms_norm_eps)


class MTP(nn.Module):
    def __init__(self, c: Cfg):
        super().__init__()
        H = c.hidden_size
        self.pre_fc_norm_embedding = ZRMSNorm(H, c.rms_norm_eps)
        self.pre_fc_norm_hidden = ZRMSNorm(H, c.rms_norm_eps)
        self.fc = nn.Linear(2 * H, H, bias=False)
        self.layers = nn.ModuleList([DecoderLayer(c, "full_attention")])
        self.norm = ZRMSNorm(H, c.rms_norm_eps)


class Qwen35(nn.Module):
    def __init__(self, c: Cfg):
        super().__init__()
        self.c = c
        self.model = TextModel(c)
        if not c.tie_word_embeddings:
            self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        if c.mtp_num_hidden_layers:
            self.mtp = MTP(c)

    # ---- weights ------------------------------------------------------------
    def head_weight(self):
        return self.model.embed_tokens.weight if self.c.tie_word_embeddings else self.lm_head.weight

    def logits(self, h):
        return F.linear(h, self.head_weight())

    @torch.no_grad()
    def init_weights(self, seed: int = 0, std: float = 0.02):
        gen = torch.Generator().manual_seed(seed)
        c = self.c
        nl = c.num_hidden_layers + c.mtp_num_hidden_layers
        out_std = std / math.sqrt(2 * nl)
        for name, p in self.named_parameters():
            if name.endswith("A_log"):
                p.copy_(torch.empty(p.shape).uniform_(1, 16, generator=gen).log())
            elif name.endswith("dt_bias"):
                dt = torch.exp(torch.empty(p.shape).uniform_(math.log(1e-3), math.log(1e-1), generator=gen))
                p.copy_(dt + torch.log(-torch.expm1(-dt)))
            elif name.endswith("linear_attn.norm.weight"):
                p.fill_(1.0)
            elif name.endswith("norm.weight") or "norm_" in name.split(".")[-2]:
                p.zero_()
            elif name.endswith("conv1d.weight"):
                K = p.shape[-1]
                p.copy_(torch.empty(p.shape).uniform_(-1 / math.sqrt(K), 1 / math.sqrt(K), generator=gen))
            elif any(name.endswith(s) for s in ("o_proj.weight", "out_proj.weight", "down_proj.weight",
                                                "experts.down_proj")):
                p.copy_(torch.randn(p.shape, generator=gen) * out_std)
            else:
                p.copy_(torch.randn(p.shape, generator=gen) * std)

    # ---- forward ------------------------------------------------------------
    def hidden(self, ids):
        """Post-final-norm hidden [B, T, H]."""
        c = self.c
        T = ids.shape[1]
        pos = torch.arange(T, device=ids.device)
        cos, sin = rope_tables(pos, c.rotary_dim, c.rope_theta)
        x = self.model.embed_tokens(ids)
        eager = getattr(self, "eager", False)
        for layer in self.model.layers:
            x = layer.forward(x, cos, sin) if eager else layer(x, cos, sin)
        return self.model.norm(x)

    def mtp_chain(self, h, ids, steps: int, feed=None):
        """Parallel chained MTP over all rows.

        Row t of step s (s = 1..steps) models a draft at position t+s-1: step 1 takes
        (h_t, x_{t+1}); step s takes (m_{s-1,t}, y_{s,t}) where y is the true token
        x_{t+s} (feed=None, teacher forcing) or the argmax draft of step s-1 (feed="greedy").
        Attention of step s row t: step-1 rows 0..t (causal), plus rows t of steps 2..s
        (exactly the KV an engine holds while drafting).  RoPE position t+s-1.
        Returns list of (m_s [B,T,H], logits_s [B,T,V]); rows with t+s >= T use a
        dummy token (0) and must be masked by the caller.
        """
        c = self.c
        mt = self.mtp
        layer = mt.layers[0]
        att = layer.self_attn
        B, T = ids.shape
        dev = ids.device
        ks, vs = [], []
        outs = []
        hid = h
        prev_logits = None
        for s in range(1, steps + 1):
            if feed == "greedy" and s > 1:
                tok = prev_logits.argmax(-1)
            else:
                tok = torch.zeros_like(ids)
                tok[:, : T - s] = ids[:, s:]
            e = mt.pre_fc_norm_embedding(self.model.embed_tokens(tok))
            hn = mt.pre_fc_norm_hidden(hid)
            u = mt.fc(torch.cat([e, hn], dim=-1))
            pos = torch.arange(T, device=dev) + (s - 1)
            cos, sin = rope_tables(pos, c.rotary_dim, c.rope_theta)
            x_in = layer.input_layernorm(u)
            q, k, v, gate = att.qkv(x_in, cos, sin)
            ks.append(k)
            vs.append(v)
            scale = c.head_dim ** -0.5
            if s == 1:
                o = sdpa(q, k, v, causal=True, scale=scale)
            else:
                K = torch.cat(ks, dim=2)
                V = torch.cat(vs, dim=2)
                causal = torch.ones(T, T, dtype=torch.bool, device=dev).tril()
                eye = torch.eye(T, dtype=torch.bool, device=dev)
                mask = torch.cat([causal] + [eye] * (s - 1), dim=1)
                o = sdpa(q, K, V, mask=mask, scale=scale)
            xo = u + att.out(o, gate)
            xo = layer.ffn(xo)
            m = mt.norm(xo)
            lg = self.logits(m)
            outs.append((m, lg))
            hid = m
            prev_logits = lg
        return outs

    def moe_aux(self):
        tot = None
        for mod in self.modules():
            if isinstance(mod, MoE) and mod.aux_loss is not None:
                tot = mod.aux_loss if tot is None else tot + mod.aux_loss
        return tot


def count_params(m: Qwen35):
    c = m.c
    tot = sum(p.numel() for p in m.parameters())
    mtp = sum(p.numel() for n, p in m.named_parameters() if n.startswith("mtp."))
    emb = m.model.embed_tokens.weight.numel()
    head = 0 if c.tie_word_embeddings else m.lm_head.weight.numel()
    active = tot - mtp
    if c.is_moe:
        per_expert = 3 * c.hidden_size * c.moe_intermediate_size
        inactive = (c.num_experts - c.num_experts_per_tok) * per_expert * c.num_hidden_layers
        active -= inactive
    return {"total": tot, "mtp": mtp, "main": tot - mtp, "embedding": emb, "lm_head": head,
            "active_main": active, "active_main_non_embedding": active - emb}
