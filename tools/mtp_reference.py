#!/usr/bin/env python3
"""PyTorch reference of the Qwen3.5 MTP (multi-token prediction) head -> golden fixtures.

Main model: Hugging Face transformers (Qwen3_5ForCausalLM / Qwen3_5MoeForCausalLM), float32,
eager attention, one forward over the T input tokens -> main_logits.npy and the
post-final-norm hidden h_i.

MTP (qwen35.md section 4), written out step by step with an explicit KV cache, float32:
  row i (0 <= i <= T-2):  u = fc([norm_e(embed[x_{i+1}]) ; norm_h(h_i)])   (embedding FIRST)
                          full-attention decoder layer at RoPE position i, attending to MTP
                          rows 0..i (the "priming" pass over the prompt; its K/V are cached)
                          m_i = mtp.norm(out);  mtp_logits_1[i] = lm_head(m_i)
  for each b in positions (chained drafts, greedy):
      d1 = argmax mtp_logits_1[b]
      step 2: (m_b, d1) at position b+1, attends to rows 0..b + itself      -> mtp_logits_2, d2
      step 3: (m_2, d2) at position b+2, attends to rows 0..b + step-2 row + itself -> mtp_logits_3
The MTP shares embed_tokens and lm_head with the main model.  4-bit checkpoints are
dequantised first (w = scale*q + bias), so fixtures match an engine that loads the 4-bit file.

usage: python3 tools/mtp_reference.py --model-dir models/qwen35-dense-tiny \
           --ids ids.json --out tests/data/mtp/qwen35-dense-tiny [--positions 0,9,23,41,62]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "train"))
from ckpt_io import build_hf_model, load_checkpoint  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def zrms(x, w, eps):
    """zero-centred RMSNorm, fp32."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + w)


class MTPRef:
    def __init__(self, tc: dict, sd: dict):
        self.tc = tc
        self.sd = sd
        self.eps = tc.get("rms_norm_eps", 1e-6)
        self.H = tc["hidden_size"]
        self.nh = tc["num_attention_heads"]
        self.nkv = tc["num_key_value_heads"]
        self.hd = tc.get("head_dim", 256)
        rp = tc.get("rope_parameters") or {}
        self.theta = float(rp.get("rope_theta", tc.get("rope_theta", 1e7)))
        self.rd = int(self.hd * float(rp.get("partial_rotary_factor", tc.get("partial_rotary_factor", 0.25))))
        self.E = sd["model.embed_tokens.weight"]
        self.W = sd["model.embed_tokens.weight"] if tc.get("tie_word_embeddings") else sd["lm_head.weight"]
        self.moe = bool(tc.get("num_experts"))
        self.p = "mtp.layers.0."
        self.K = []   # cached keys per row: [nkv, hd]
        self.V = []

    def w(self, name):
        return self.sd[name]

    def rope(self, x, pos):
        """x [heads, hd] rotate-half on the first rd dims at integer position pos."""
        rd = self.rd
        inv = 1.0 / (self.theta ** (torch.arange(0, rd, 2, dtype=torch.float32) / rd))
        f = pos * inv
        cos = torch.cat([f, f]).cos()
        sin = torch.cat([f, f]).sin()
        xr, xp = x[:, :rd], x[:, rd:]
        h = rd // 2
        rot = torch.cat([-xr[:, h:], xr[:, :h]], dim=-1)
        return torch.cat([xr * cos + rot * sin, xp], dim=-1)

    def ffn(self, x):
        p = self.p + "mlp."
        if not self.moe:
            return self.w(p + "down_proj.weight") @ (F.silu(self.w(p + "gate_proj.weight") @ x)
                                                     * (self.w(p + "up_proj.weight") @ x))
        tc = self.tc
        probs = torch.softmax(self.w(p + "gate.weight") @ x, dim=-1)
        topv, topi = probs.topk(tc["num_experts_per_tok"])
        topv = topv / topv.sum()
        gu = self.w(p + "experts.gate_up_proj")
        dn = self.w(p + "experts.down_proj")
        I = gu.shape[1] // 2
        y = torch.zeros_like(x)
        for wgt, e in zip(topv.tolist(), topi.tolist()):
            g = gu[e, :I] @ x
            u = gu[e, I:] @ x
            y = y + wgt * (dn[e] @ (F.silu(g) * u))
        sh = self.w(p + "shared_expert.down_proj.weight") @ (
            F.silu(self.w(p + "shared_expert.gate_proj.weight") @ x) * (self.w(p + "shared_expert.up_proj.weight") @ x))
        return y + torch.sigmoid(self.w(p + "shared_expert_gate.weight") @ x) * sh

    def step(self, hidden, token, pos, extra_kv):
        """One MTP row. hidden [H] (main post-norm hidden or previous MTP output m), token id,
        RoPE position. Attends to cached rows self.K/self.V (all of them) + extra_kv + itself.
        Returns (m, logits, k, v)."""
        p = self.p
        e = zrms(self.E[token], self.w("mtp.pre_fc_norm_embedding.weight"), self.eps)
        hn = zrms(hidden, self.w("mtp.pre_fc_norm_hidden.weight"), self.eps)
        u = self.w("mtp.fc.weight") @ torch.cat([e, hn])
        x = zrms(u, self.w(p + "input_layernorm.weight"), self.eps)
        qg = (self.w(p + "self_attn.q_proj.weight") @ x).view(self.nh, 2 * self.hd)
        q, gate = qg[:, :self.hd], qg[:, self.hd:]
        q = zrms(q, self.w(p + "self_attn.q_norm.weight"), self.eps)
        k = zrms((self.w(p + "self_attn.k_proj.weight") @ x).view(self.nkv, self.hd),
                 self.w(p + "self_attn.k_norm.weight"), self.eps)
        v = (self.w(p + "self_attn.v_proj.weight") @ x).view(self.nkv, self.hd)
        q = self.rope(q, pos)
        k = self.rope(k, pos)
        Ks = torch.stack(self.K + [kv[0] for kv in extra_kv] + [k])   # [L, nkv, hd]
        Vs = torch.stack(self.V + [kv[1] for kv in extra_kv] + [v])
        grp = self.nh // self.nkv
        o = torch.empty(self.nh, self.hd)
        for h in range(self.nh):
            kh = Ks[:, h // grp]
            vh = Vs[:, h // grp]
            a = torch.softmax((kh @ q[h]) / (self.hd ** 0.5), dim=0)
            o[h] = a @ vh
        o = o.reshape(-1) * torch.sigmoid(gate.reshape(-1))
        x1 = u + self.w(p + "self_attn.o_proj.weight") @ o
        x2 = x1 + self.ffn(zrms(x1, self.w(p + "post_attention_layernorm.weight"), self.eps))
        m = zrms(x2, self.w("mtp.norm.weight"), self.eps)
        return m, self.W @ m, k, v


@torch.no_grad()
def run(model_dir, ids, positions, out_dir, check_parallel=True):
    tc, cfg, sd, info = load_checkpoint(model_dir)
    sd = {k: v.float() for k, v in sd.items()}
    hf = build_hf_model(tc, sd)
    x = torch.tensor([ids])
    T = len(ids)
    out = hf.model(input_ids=x, use_cache=False)
    h = out.last_hidden_state[0].float()                      # post-final-norm hidden
    main_logits = hf(input_ids=x, use_cache=False).logits[0].float()
    ref = MTPRef(tc, sd)
    M, L1 = [], []
    for i in range(T - 1):
        m, lg, k, v = ref.step(h[i], ids[i + 1], i, [])
        ref.K.append(k)
        ref.V.append(v)
        M.append(m)
        L1.append(lg)
    L1 = torch.stack(L1)
    L2, L3, drafts = [], [], []
    allK, allV = ref.K, ref.V
    for b in positions:
        assert 0 <= b <= T - 2
        ref.K, ref.V = allK[: b + 1], allV[: b + 1]
        d1 = int(L1[b].argmax())
        m2, lg2, k2, v2 = ref.step(M[b], d1, b + 1, [])
        d2 = int(lg2.argmax())
        m3, lg3, k3, v3 = ref.step(m2, d2, b + 2, [(k2, v2)])
        d3 = int(lg3.argmax())
        L2.append(lg2)
        L3.append(lg3)
        drafts.append({"b": b, "d1": d1, "d2": d2, "d3": d3,
                       "truth_x_b2": ids[b + 2] if b + 2 < T else None,
                       "truth_x_b3": ids[b + 3] if b + 3 < T else None,
                       "truth_x_b4": ids[b + 4] if b + 4 < T else None})
    ref.K, ref.V = allK, allV
    L2 = torch.stack(L2)
    L3 = torch.stack(L3)
    os.makedirs(out_dir, exist_ok=True)
    json.dump([int(i) for i in ids], open(os.path.join(out_dir, "input_ids.json"), "w"))
    json.dump([int(b) for b in positions], open(os.path.join(out_dir, "positions.json"), "w"))
    json.dump(drafts, open(os.path.join(out_dir, "drafts.json"), "w"), indent=1)
    np.save(os.path.join(out_dir, "main_logits.npy"), main_logits.numpy().astype(np.float32))
    np.save(os.path.join(out_dir, "mtp_logits_1.npy"), L1.numpy().astype(np.float32))
    np.save(os.path.join(out_dir, "mtp_logits_2.npy"), L2.numpy().astype(np.float32))
    np.save(os.path.join(out_dir, "mtp_logits_3.npy"), L3.numpy().astype(np.float32))
    checks = {}
    # main-model agreement of transformers with our own implementation, and MTP parallel vs sequential
    if check_parallel:
        try:
            from ckpt_io import build_own_model
            own, _ = build_own_model(tc, sd, with_mtp=True)
            own.eval()
            hh = own.hidden(x)
            checks["main_logits_maxabs_own_vs_transformers"] = float((own.logits(hh)[0] - main_logits).abs().max())
            chain = own.mtp_chain(hh, x, 1)
            checks["mtp1_maxabs_parallel_vs_reference"] = float(
                (chain[0][1][0, :T - 1] - L1).abs().max())
            # greedy chained steps 2/3 on the same rows via the parallel masked form
            g = own.mtp_chain(hh, x, 3, feed="greedy")
            pb = torch.tensor(positions)
            checks["mtp2_maxabs_parallel_vs_reference"] = float((g[1][1][0, pb] - L2).abs().max())
            checks["mtp3_maxabs_parallel_vs_reference"] = float((g[2][1][0, pb] - L3).abs().max())
        except Exception as ex:  # keep the fixture even if the cross-check cannot run
            checks["error"] = repr(ex)
    acc1 = float((L1[:-1].argmax(-1) == torch.tensor(ids[2:])).float().mean()) if T > 2 else None
    acc_main = float((main_logits[:-1].argmax(-1) == torch.tensor(ids[1:])).float().mean())
    meta = {
        "model_dir": os.path.relpath(model_dir, os.path.join(HERE, "..")),
        "layout": info["layout"], "quantized_source": info["quantized"],
        "weights": "dequantised 4-bit (w = scale*q + bias), computed in float32" if info["quantized"]
        else "checkpoint values (bf16/f32 as stored) converted to float32",
        "T": T, "vocab_size": int(main_logits.shape[1]), "positions": positions,
        "files": {
            "input_ids.json": "token ids x_0..x_{T-1} (a held-out sequence)",
            "main_logits.npy": "[T, V] float32: main model logits, one forward over all T tokens (transformers)",
            "mtp_logits_1.npy": "[T-1, V] float32: MTP row i = (post-final-norm h_i, token x_{i+1}) at RoPE "
                                "position i, causal attention over MTP rows 0..i (priming pass)",
            "positions.json": "P draft base positions b",
            "mtp_logits_2.npy": "[P, V] float32: step 2 = (m_1 = post-mtp.norm hidden of MTP row b, "
                                "d1 = argmax mtp_logits_1[b]) at position b+1, attending to MTP rows 0..b + itself",
            "mtp_logits_3.npy": "[P, V] float32: step 3 = (m_2, d2 = argmax mtp_logits_2) at position b+2, "
                                "attending to MTP rows 0..b + the step-2 row + itself",
            "drafts.json": "per b: d1, d2, d3 (argmax drafts) and the true tokens x_{b+2..b+4}",
        },
        "main_next_token_acc_on_this_sequence": acc_main,
        "mtp1_acc_on_this_sequence": acc1,
        "cross_checks": checks,
        "generator": "tools/mtp_reference.py",
    }
    import transformers
    meta["transformers_version"] = transformers.__version__
    meta["torch_version"] = torch.__version__
    json.dump(meta, open(os.path.join(out_dir, "meta.json"), "w"), indent=2)
    return meta


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--ids", required=True, help="JSON file with a list of token ids")
    ap.add_argument("--out", required=True)
    ap.add_argument("--positions", default=None)
    args = ap.parse_args()
    ids = json.load(open(args.ids))
    T = len(ids)
    pos = [int(p) for p in args.positions.split(",")] if args.positions else \
        sorted({0, T // 7, T // 3, (2 * T) // 3, T - 2})
    meta = run(args.model_dir, ids, pos, args.out)
    print(json.dumps(meta["cross_checks"]))


if __name__ == "__main__":
    main()
