#!/usr/bin/env python3
"""End-to-end pipeline on the GPU machine: data + tokenizer -> train dense and MoE (concurrently,
one process each) -> export models/ -> verify (own implementation, transformers, tokenizer) ->
MTP/main golden fixtures -> loss curves + model cards -> bundle for the trip back.

usage (repo root, GPU machine):
  PYTHONUNBUFFERED=1 python3 tools/train/run_all.py --out $OUT --budget-dense 330 --budget-moe 330
The bundle ($OUT/bundle.tar.partNN) unpacks at the repo root: models/, tests/data/mtp/,
tools/train/runs/<stamp>/ (logs, summaries, data statistics).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))

NAMES = {"dense": "qwen35-dense-tiny", "moe": "qwen35-moe-tiny", "dense4": "qwen35-dense-tiny-4bit"}
FIXTURE_POSITIONS = [0, 9, 23, 41, 62]


def log(*a):
    print(f"[run_all {time.strftime('%H:%M:%S')}]", *a, flush=True)


def sh(cmd, logfile=None, env=None):
    log("$", " ".join(cmd))
    if logfile:
        with open(logfile, "w") as f:
            p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
        print(open(logfile).read()[-3000:], flush=True)
    else:
        p = subprocess.run(cmd, env=env)
    return p.returncode


def choose_tokenizer_class(data_dir, report):
    """Pick a tokenizer_class that transformers loads to exactly the tokenizers.json behaviour."""
    from tokenizers import Tokenizer
    import tokenizer_build as TB
    tok = Tokenizer.from_file(os.path.join(data_dir, "tokenizer.json"))
    text = ("def f(x):\n    return x**2  # héllo wörld, e\u0301, क्षि 12345\n<|im_start|>user\nhi<|im_end|>\n"
            "<think>\n\n</think>\n\n<tool_call>\n")
    want = tok.encode(text, add_special_tokens=False).ids
    res = {}
    for cls in ("Qwen2Tokenizer", "Qwen3_5Tokenizer", "PreTrainedTokenizerFast", "TokenizersBackend"):
        try:
            TB.save_config(tok, data_dir, tokenizer_class=cls)
            from transformers import AutoTokenizer
            t = AutoTokenizer.from_pretrained(data_dir)
            got = t.encode(text, add_special_tokens=False)
            chat = t.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False,
                                         add_generation_prompt=True, enable_thinking=False)
            res[cls] = {"match": got == want, "chat": chat, "type": type(t).__name__}
            if got == want:
                report["tokenizer_class"] = cls
                report["tokenizer_hf_check"] = res
                return cls
        except Exception as ex:
            res[cls] = {"error": repr(ex)[:300]}
    report["tokenizer_hf_check"] = res
    TB.save_config(tok, data_dir, tokenizer_class="Qwen2Tokenizer")
    return "Qwen2Tokenizer"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--data", default="/tmp/mr_data")
    ap.add_argument("--work", default="/tmp/mr_work")
    ap.add_argument("--skip-data", action="store_true")
    ap.add_argument("--code-cap-mb", type=float, default=200)
    ap.add_argument("--tok-sample-mb", type=float, default=32)
    ap.add_argument("--check-repro", action="store_true")
    ap.add_argument("--budget-dense", type=float, default=330)
    ap.add_argument("--budget-moe", type=float, default=330)
    ap.add_argument("--lr-dense", type=float, default=2.5e-3)
    ap.add_argument("--lr-moe", type=float, default=2e-3)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--compile", type=int, default=0)
    ap.add_argument("--final-eval-windows", type=int, default=192)
    ap.add_argument("--dense-4bit", choices=["auto", "yes", "no"], default="auto")
    ap.add_argument("--models-limit-mb", type=float, default=39.5)
    ap.add_argument("--stamp", default=time.strftime("%Y%m%d-%H%M%S"))
    ap.add_argument("--bundle", choices=["full", "small"], default="full",
                    help="small: configs, cards, plots, fixtures' meta and logs only (smoke runs)")
    args = ap.parse_args()
    t0 = time.time()
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.work, exist_ok=True)
    rundir = os.path.join(ROOT, "tools", "train", "runs", args.stamp)
    os.makedirs(rundir, exist_ok=True)
    report = {"stamp": args.stamp, "args": vars(args)}
    py = sys.executable
    env = dict(os.environ, PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="true")

    # ---------------------------------------------------------------- data + tokenizer
    if not args.skip_data:
        cmd = [py, os.path.join(HERE, "data.py"), "--out", args.data, "--code-cap-mb", str(args.code_cap_mb),
               "--tok-sample-mb", str(args.tok_sample_mb)]
        if args.check_repro:
            cmd.append("--check-repro")
        rc = sh(cmd, os.path.join(rundir, "data.log"), env)
        if rc:
            raise SystemExit("data.py failed")
    report["t_data"] = time.time() - t0
    shutil.copy(os.path.join(args.data, "data_stats.json"), rundir)

    # ---------------------------------------------------------------- training (concurrent)
    procs = {}
    for kind, budget, lr in (("dense", args.budget_dense, args.lr_dense), ("moe", args.budget_moe, args.lr_moe)):
        if budget <= 0:
            continue
        od = os.path.join(args.work, kind)
        os.makedirs(od, exist_ok=True)
        cmd = [py, os.path.join(HERE, "train.py"), "--model", kind, "--data", args.data, "--out", od,
               "--time-budget", str(budget), "--lr", str(lr), "--batch", str(args.batch),
               "--compile", str(args.compile), "--final-eval-windows", str(args.final_eval_windows)]
        log("$", " ".join(cmd))
        procs[kind] = (subprocess.Popen(cmd, stdout=open(os.path.join(rundir, f"train_{kind}.log"), "w"),
                                        stderr=subprocess.STDOUT, env=env), od)
    for kind, (p, od) in procs.items():
        rc = p.wait()
        report[f"train_rc_{kind}"] = rc
        print(open(os.path.join(rundir, f"train_{kind}.log")).read()[-2500:], flush=True)
    report["t_train_done"] = time.time() - t0

    # ---------------------------------------------------------------- export + verify + fixtures
    try:
        post(args, procs, rundir, report)
    except Exception:
        traceback.print_exc()
        report["post_error"] = traceback.format_exc()
    report["t_total"] = time.time() - t0
    json.dump(report, open(os.path.join(rundir, "report.json"), "w"), indent=1, default=str)

    # ---------------------------------------------------------------- bundle
    tar = os.path.join(args.work, "bundle.tar")
    items = [p for p in ("models", "tests/data/mtp", os.path.relpath(rundir, ROOT)) if os.path.exists(os.path.join(ROOT, p))]
    if args.bundle == "small":
        items = [os.path.relpath(p, ROOT) for p in
                 glob.glob(os.path.join(ROOT, "models", "*", "*.json")) + glob.glob(os.path.join(ROOT, "models", "*", "*.md"))
                 + glob.glob(os.path.join(ROOT, "models", "*", "*.png"))
                 + glob.glob(os.path.join(ROOT, "tests", "data", "mtp", "*", "*.json"))] + [os.path.relpath(rundir, ROOT)]
    subprocess.run(["tar", "cf", tar, "-C", ROOT] + items, check=True)
    subprocess.run(["split", "-b", "15m", "-d", tar, os.path.join(args.out, "bundle.tar.part")], check=True)
    shutil.copy(os.path.join(rundir, "report.json"), os.path.join(args.out, "report.json"))
    log(f"bundle: {os.path.getsize(tar) / 2 ** 20:.1f} MiB -> {sorted(os.listdir(args.out))}; total {time.time() - t0:.0f}s")


def post(args, procs, rundir, report):
    import numpy as np
    import torch
    from tokenizers import Tokenizer
    import cards
    import configs
    import export as X
    import mtp_reference
    from ckpt_io import build_hf_model, build_own_model, load_checkpoint
    from train import evaluate

    tok_cls = choose_tokenizer_class(args.data, report)
    log("tokenizer class:", tok_cls, json.dumps(report.get("tokenizer_hf_check"))[:600])
    tok = Tokenizer.from_file(os.path.join(args.data, "tokenizer.json"))
    eos = tok.token_to_id("<|endoftext|>")
    im_end = tok.token_to_id("<|im_end|>")
    gen = X.generation_config([im_end, eos], eos)
    data_stats = json.load(open(os.path.join(args.data, "data_stats.json")))
    ho_code = np.load(os.path.join(args.data, "heldout_code.npy"))
    ho_prose = np.load(os.path.join(args.data, "heldout_prose.npy"))
    # fixture sequence: 64 tokens of held-out code starting right after the 10th document boundary
    eos_pos = np.nonzero(ho_code == eos)[0]
    st = int(eos_pos[min(10, len(eos_pos) - 1)]) + 1
    fx_ids = [int(i) for i in ho_code[st:st + 64]]
    report["fixture_ids_source"] = f"heldout_code.npy[{st}:{st + 64}]"
    dev = torch.device("cuda")
    models_dir = os.path.join(ROOT, "models")
    os.makedirs(models_dir, exist_ok=True)

    todo = []
    states = {}
    for kind, (p, od) in procs.items():
        if not os.path.exists(os.path.join(od, "state.pt")):
            log(f"no state for {kind}")
            continue
        states[kind] = (torch.load(os.path.join(od, "state.pt")), json.load(open(os.path.join(od, "train_summary.json"))))
    if "dense" in states:
        sd, summ = states["dense"]
        cfg = configs.nested_config("dense", eos, eos)
        d = os.path.join(models_dir, NAMES["dense"])
        X.write_model_dir(d, X.hf_tensors(sd, 0), cfg, args.data, gen)
        todo.append(("dense", d, "bf16 safetensors, Hugging Face layout (names `model.language_model.*`, "
                     "`lm_head.weight`, `mtp.*`; `A_log` float32), sharded (< 15 MB per file)", summ))
        if args.dense_4bit != "no":
            tens, q = X.mlx_tensors(sd, 4, 64)
            cfg4 = configs.nested_config("dense", eos, eos)
            cfg4["quantization"] = q
            cfg4["quantization_config"] = q
            d4 = os.path.join(models_dir, NAMES["dense4"])
            X.write_model_dir(d4, tens, cfg4, args.data, gen)
            todo.append(("dense4", d4, "MLX affine 4-bit, group 64 (uint32 LSB-first packing, bf16 scales/biases, "
                         "`w = scale*q + bias`); MLX names `language_model.model.*`, +1 folded into zero-centred norms, "
                         "conv1d [C,K,1]; `mtp.*` kept and quantised the same way", summ))
    if "moe" in states:
        sd, summ = states["moe"]
        tens, q = X.mlx_tensors(sd, 4, 64)
        cfg = configs.nested_config("moe", eos, eos)
        cfg["quantization"] = q
        cfg["quantization_config"] = q
        d = os.path.join(models_dir, NAMES["moe"])
        X.write_model_dir(d, tens, cfg, args.data, gen)
        todo.append(("moe", d, "MLX affine 4-bit, group 64 (uint32 LSB-first packing, bf16 scales/biases, "
                     "`w = scale*q + bias`); router `mlp.gate` and `mlp.shared_expert_gate` at 8 bits (per-module "
                     "overrides in `quantization`); norms (+1 folded), conv1d [C,K,1], dt_bias (bf16) and A_log (f32) "
                     "unquantised; MLX names `language_model.model.*`; experts `switch_mlp.{gate,up,down}_proj` "
                     "[E,out,in/8]; `mtp.*` kept, quantised, experts stacked as `mtp.layers.0.mlp.switch_mlp.*`", summ))
    # size budget
    sizes = {k: X.dir_bytes(d) for k, d, _, _ in todo}
    total = sum(sizes.values())
    if args.dense_4bit == "auto" and "dense4" in sizes and total > args.models_limit_mb * 2 ** 20:
        shutil.rmtree(os.path.join(models_dir, NAMES["dense4"]))
        todo = [t for t in todo if t[0] != "dense4"]
        report["dense4_dropped_for_size"] = total / 2 ** 20
        sizes.pop("dense4")
    report["model_sizes_mib"] = {k: v / 2 ** 20 for k, v in sizes.items()}
    log("model sizes MiB:", report["model_sizes_mib"])

    for kind, d, fmt, summ in todo:
        name = NAMES[kind]
        r = report.setdefault(name, {})
        try:
            tc, cfg, sd2, info = load_checkpoint(d)
            own, unexpected = build_own_model(tc, sd2, with_mtp=True)
            r["unexpected_keys"] = unexpected
            own = own.to(dev).eval()
            torch.backends.cuda.matmul.allow_tf32 = False
            ev = {"code": evaluate(own, ho_code, args.final_eval_windows, 512, 16, dev, autocast=False),
                  "prose": evaluate(own, ho_prose, args.final_eval_windows, 512, 16, dev, autocast=False)}
            ev["_note"] = ("Weights loaded back from the files in this directory" +
                           (" and dequantised" if info["quantized"] else "") +
                           f", float32 inference; {args.final_eval_windows} windows of 512 tokens from held-out "
                           "files per split; accuracies are top-1 (argmax) against the true next tokens; "
                           "'teacher-forced' feeds the true previous token into chained MTP steps, 'greedy chain' "
                           "feeds the MTP's own argmax drafts (what speculative decoding does).")
            r["eval_shipped"] = ev
            log(name, "shipped eval:", json.dumps({s: {k: round(v, 4) for k, v in e.items() if isinstance(v, float)}
                                                    for s, e in ev.items() if s != "_note"}))
            # greedy samples
            samples = []
            prompts = ['def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n',
                       "The following example shows how to",
                       "<|im_start|>user\nWrite a Python function `is_prime(n)` that returns True if n is a prime "
                       "number.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"]
            for pr in prompts:
                ids = tok.encode(pr, add_special_tokens=False).ids
                x = torch.tensor([ids], device=dev)
                with torch.no_grad():
                    for _ in range(64):
                        nxt = own.logits(own.hidden(x))[0, -1].argmax()
                        x = torch.cat([x, nxt.view(1, 1)], dim=1)
                        if int(nxt) in (eos, im_end):
                            break
                samples.append(tok.decode(x[0].tolist(), skip_special_tokens=False))
            r["samples"] = samples
            own = own.cpu()
            # transformers check on the fixture sequence (CPU, float32)
            hf = build_hf_model(tc, sd2)
            xx = torch.tensor([fx_ids])
            with torch.no_grad():
                lh = hf(input_ids=xx, use_cache=False).logits[0]
                lo = own.logits(own.hidden(xx))[0]
            r["transformers_vs_own_maxabs"] = float((lh - lo).abs().max())
            r["transformers_logit_absmax"] = float(lh.abs().max())
            # fixtures
            fxd = os.path.join(ROOT, "tests", "data", "mtp", name)
            if os.path.isdir(fxd):
                shutil.rmtree(fxd)
            meta = mtp_reference.run(d, fx_ids, FIXTURE_POSITIONS, fxd)
            r["fixture_cross_checks"] = meta["cross_checks"]
            log(name, "fixture checks:", meta["cross_checks"], "HF vs own:", r["transformers_vs_own_maxabs"])
            # card
            png = os.path.join(d, "loss_curves.png")
            cards.plot_curves(summ, png, name)
            tcx = dict(tc)
            tcx["_im_end"] = im_end
            files = sorted(os.listdir(d)) + ["MODEL_CARD.md"]
            extra = ""
            tr_ev = summ.get("final_eval_bf16_autocast")
            if tr_ev:
                extra = ("\n## Evaluation of the trained weights before export (bf16 autocast)\n\n" +
                         cards.eval_table(tr_ev) + "\n")
            cards.write_card(os.path.join(d, "MODEL_CARD.md"), name, "moe" if kind == "moe" else "dense", fmt, summ,
                             ev, data_stats, files, X.dir_bytes(d), tcx, samples, extra)
            r["files"] = {f: os.path.getsize(os.path.join(d, f)) for f in sorted(os.listdir(d))}
        except Exception:
            traceback.print_exc()
            r["error"] = traceback.format_exc()
    for kind, (_, od) in procs.items():
        f = os.path.join(od, "train_summary.json")
        if os.path.exists(f):
            shutil.copy(f, os.path.join(rundir, f"train_summary_{kind}.json"))
    report["models_total_mib"] = sum(X.dir_bytes(os.path.join(models_dir, n)) for n in os.listdir(models_dir)
                                     if os.path.isdir(os.path.join(models_dir, n))) / 2 ** 20


if __name__ == "__main__":
    main()
