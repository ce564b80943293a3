#!/usr/bin/env python3
"""Cross-checks of our own PyTorch implementation and loaders against transformers.

1. every golden case under tests/data/goldens: load with ckpt_io (all layouts) ->
   (a) our model's logits vs logits.npy, (b) transformers built from the loaded weights vs logits.npy;
2. random-weight models with MTP (dense bf16 HF layout, MoE MLX 4-bit layout) exported with
   export.py, then tools/mtp_reference.py: sequential explicit MTP vs our parallel masked MTP.
Prints one JSON report; exit code 1 on a mismatch.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))
from ckpt_io import build_hf_model, build_own_model, load_checkpoint  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.set_num_threads(8)


@torch.no_grad()
def check_goldens(gdir):
    rep = {}
    ok = True
    for case in sorted(os.listdir(gdir)):
        d = os.path.join(gdir, case)
        if not os.path.isfile(os.path.join(d, "logits.npy")):
            continue
        ref = np.load(os.path.join(d, "logits.npy"))
        ids = json.load(open(os.path.join(d, "input_ids.json")))
        tc, cfg, sd, info = load_checkpoint(d)
        own, unexpected = build_own_model(tc, sd, with_mtp=False)
        own.eval()
        x = torch.tensor([ids])
        lo = own.logits(own.hidden(x))[0].numpy()
        hf = build_hf_model(tc, sd)
        lh = hf(input_ids=x, use_cache=False).logits[0].float().numpy()
        scale = float(np.abs(ref).max())
        r = {"layout": info["layout"], "ignored": len(info["ignored"]), "unexpected": unexpected[:5],
             "own_vs_golden_maxabs": float(np.abs(lo - ref).max()),
             "hf_reload_vs_golden_maxabs": float(np.abs(lh - ref).max()), "logit_scale": scale}
        r["ok"] = r["own_vs_golden_maxabs"] < 2e-3 * max(1, scale) and r["hf_reload_vs_golden_maxabs"] < 1e-4 * max(1, scale)
        ok &= r["ok"]
        rep[case] = r
    return rep, ok


def random_mtp_roundtrip(kind, tmp):
    import mtp_reference
    from configs import MODELS, cfg_obj
    from export import hf_tensors, mlx_tensors, write_model_dir
    from qwen35_model import Cfg, Qwen35
    import copy
    m = copy.deepcopy(MODELS[kind])
    m.update(vocab_size=512, hidden_size=128, num_hidden_layers=4, layer_types=m["layer_types"][:4])
    if kind == "moe":
        m.update(num_experts=8, moe_intermediate_size=64, shared_expert_intermediate_size=64)
    else:
        m.update(intermediate_size=256)
    c = Cfg(**m)
    model = Qwen35(c)
    model.init_weights(seed=5, std=0.15)
    with torch.no_grad():   # non-trivial norms
        g = torch.Generator().manual_seed(9)
        for n, p in model.named_parameters():
            if p.dim() == 1 and "norm" in n:
                p.add_(0.2 * torch.randn(p.shape, generator=g))
    sd = {k: v.float() for k, v in model.state_dict().items()}
    import configs as C
    saved = C.MODELS.get("_tmp")
    C.MODELS["_tmp"] = m
    cfg = C.nested_config("_tmp", eos_id=1, pad_id=0)
    d = os.path.join(tmp, kind)
    if kind == "moe":
        tens, q = mlx_tensors(sd, 4, 64)
        cfg["quantization"] = q
        cfg["quantization_config"] = q
    else:
        tens = hf_tensors(sd, c.num_experts)
    write_model_dir(d, tens, cfg, None, {"eos_token_id": [1]}, max_shard=200_000)
    ids = torch.randint(0, 512, (40,), generator=torch.Generator().manual_seed(3)).tolist()
    meta = mtp_reference.run(d, ids, [0, 7, 20, 38], os.path.join(tmp, kind + "_fx"))
    return meta["cross_checks"], sorted(os.listdir(d))


def main():
    rep = {}
    gdir = os.path.join(ROOT, "tests", "data", "goldens")
    ok = True
    if os.path.isdir(gdir):
        rep["goldens"], ok = check_goldens(gdir)
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("dense", "moe"):
            try:
                cc, files = random_mtp_roundtrip(kind, tmp)
                good = all(v < 1e-3 for k, v in cc.items() if k.endswith("maxabs_parallel_vs_reference")) and \
                    cc.get("main_logits_maxabs_own_vs_transformers", 1) < 1e-3
                rep[f"mtp_roundtrip_{kind}"] = {"checks": cc, "files": files, "ok": good}
                ok &= good
            except Exception as ex:
                import traceback
                traceback.print_exc()
                rep[f"mtp_roundtrip_{kind}"] = {"error": repr(ex), "ok": False}
                ok = False
    print(json.dumps(rep, indent=1))
    print("CHECK_IMPL", "PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
