#!/usr/bin/env python3
"""Train one bundled model (dense or MoE) with its MTP head, on the token streams of data.py.

Loss = CE(main, t+1) + w1 * CE(MTP step 1, t+2) + w2 * CE(MTP chained step 2, t+3)
       [+ aux * MoE load-balancing loss].
Step 2 of the MTP uses the MTP's own post-mtp.norm hidden of step 1 and the true token
x_{t+2} at RoPE position t+1, attending to step-1 rows 0..t plus itself (the KV an
engine holds while drafting), see Qwen35.mtp_chain.

The learning-rate schedule runs on wall-clock time (--time-budget seconds: linear
warm-up over --warmup steps, cosine to 10% at the end of the budget), so the run
fits its device-time slot whatever the throughput.  Tokenizer and data are fully
deterministic; the step count depends on throughput and is recorded.
--replay-lr SUMMARY_JSON instead takes the lr of step s from a recorded run's curve (linear
interpolation over its logged (step, lr) pairs), so that with the same seed and --max-steps N a
re-run replays the first N steps of that run whatever its own throughput (repro_check.py).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections import defaultdict

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from configs import cfg_obj  # noqa: E402
from qwen35_model import Qwen35, count_params  # noqa: E402


def log(*a):
    print(f"[{time.strftime('%H:%M:%S')}]", *a, flush=True)


@torch.no_grad()
def evaluate(model, stream: np.ndarray, n_win: int, T: int, bs: int, device, mtp_steps: int = 3,
             autocast: bool = True):
    """Held-out metrics over the first n_win non-overlapping windows of `stream`."""
    was = model.training
    model.eval()
    model.eager = True          # bypass torch.compile'd layers (other batch shapes)
    n = min(n_win, (len(stream) - 1) // T)
    S = defaultdict(float)
    for i in range(0, n, bs):
        rows = [stream[(i + j) * T:(i + j + 1) * T] for j in range(min(bs, n - i))]
        x = torch.from_numpy(np.stack(rows).astype(np.int64)).to(device)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=autocast):
            h = model.hidden(x)
            lg = model.logits(h).float()
        pred = lg.argmax(-1)
        tgt = x[:, 1:]
        S["main_loss"] += F.cross_entropy(lg[:, :-1].reshape(-1, lg.shape[-1]), tgt.reshape(-1),
                                          reduction="sum").item()
        S["main_correct"] += (pred[:, :-1] == tgt).sum().item()
        S["main_n"] += tgt.numel()
        if mtp_steps and hasattr(model, "mtp"):
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=autocast):
                tf = model.mtp_chain(h, x, mtp_steps, feed=None)
                gr = model.mtp_chain(h, x, mtp_steps, feed="greedy")
            R = T - 1 - mtp_steps            # rows with targets for every step
            ok_gt = torch.ones(x.shape[0], R, dtype=torch.bool, device=device)
            ok_main = ok_gt.clone()
            for s in range(1, mtp_steps + 1):
                lt = tf[s - 1][1].float()
                p_tf = lt[:, :T - 1 - s].argmax(-1)
                t_tf = x[:, s + 1:]
                S[f"tf{s}_correct"] += (p_tf == t_tf).sum().item()
                S[f"tf{s}_n"] += t_tf.numel()
                S[f"tf{s}_loss"] += F.cross_entropy(lt[:, :T - 1 - s].reshape(-1, lt.shape[-1]),
                                                    t_tf.reshape(-1), reduction="sum").item()
                d = gr[s - 1][1][:, :R].float().argmax(-1)
                ok_gt &= d == x[:, s + 1:s + 1 + R]
                ok_main &= d == pred[:, s:s + R]
                S[f"chain{s}_gt"] += ok_gt.sum().item()
                S[f"chain{s}_main"] += ok_main.sum().item()
            S["chain_n"] += ok_gt.numel()
    out = {"windows": n, "tokens": int(S["main_n"]),
           "main_acc": S["main_correct"] / max(1, S["main_n"]),
           "main_loss": S["main_loss"] / max(1, S["main_n"])}
    if S["chain_n"]:
        for s in range(1, mtp_steps + 1):
            out[f"mtp{s}_acc_teacher_forced"] = S[f"tf{s}_correct"] / S[f"tf{s}_n"]
            out[f"mtp{s}_loss_teacher_forced"] = S[f"tf{s}_loss"] / S[f"tf{s}_n"]
            out[f"mtp_chain{s}_acc_vs_truth"] = S[f"chain{s}_gt"] / S["chain_n"]
            out[f"mtp_chain{s}_accept_vs_main_greedy"] = S[f"chain{s}_main"] / S["chain_n"]
        out["expected_accepted_drafts_k3_vs_main"] = sum(out[f"mtp_chain{s}_accept_vs_main_greedy"]
                                                         for s in range(1, mtp_steps + 1))
    model.train(was)
    model.eager = False
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["dense", "moe"], required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--time-budget", type=float, default=300.0, help="seconds of training (excl. final eval)")
    ap.add_argument("--max-steps", type=int, default=10 ** 9)
    ap.add_argument("--mtp-w1", type=float, default=0.3)
    ap.add_argument("--mtp-w2", type=float, default=0.15)
    ap.add_argument("--aux", type=float, default=0.01)
    ap.add_argument("--compile", type=int, default=0)
    ap.add_argument("--eval-every-s", type=float, default=40.0)
    ap.add_argument("--final-eval-windows", type=int, default=192)
    ap.add_argument("--smoke", action="store_true", help="throughput only: no evals, no save")
    ap.add_argument("--replay-lr", metavar="SUMMARY_JSON", default=None,
                    help="lr per step from this recorded train_summary.json's curve instead of the wall clock")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    dev = torch.device("cuda")
    replay = None
    if args.replay_lr:
        rec = json.load(open(args.replay_lr))["curve"]
        # a logged curve step k (1-based, logged after the update) trained with the lr that the
        # loop set while its 0-based counter `step` was k - 1
        replay = (np.asarray(rec["step"], dtype=np.float64) - 1, np.asarray(rec["lr"], dtype=np.float64))
        assert len(replay[0]) >= 2 and np.all(np.diff(replay[0]) > 0), "replay curve: steps must increase"
        log(f"lr replayed from {args.replay_lr}: {len(replay[0])} points, steps {int(replay[0][0])}.."
            f"{int(replay[0][-1])} (0-based), clamped outside")

    c = cfg_obj(args.model)
    model = Qwen35(c)
    model.init_weights(seed=args.seed)
    model.to(dev)
    pc = count_params(model)
    log(f"model={args.model} params={json.dumps(pc)}")

    train = np.load(os.path.join(args.data, "train.npy"), mmap_mode="r")
    ho_code = np.load(os.path.join(args.data, "heldout_code.npy"))
    ho_prose = np.load(os.path.join(args.data, "heldout_prose.npy"))
    stream = torch.from_numpy(np.asarray(train).astype(np.int32)).to(dev)
    N = stream.numel()
    log(f"train tokens={N / 1e6:.2f}M heldout code={len(ho_code) / 1e6:.2f}M prose={len(ho_prose) / 1e6:.2f}M")

    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (decay if p.dim() >= 2 and "embed_tokens" not in n else no_decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.wd},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    if args.compile:
        for layer in list(model.model.layers):
            layer.compile()

    gen = torch.Generator(device=dev).manual_seed(args.seed + 7)
    ar = torch.arange(args.seq, device=dev)
    T = args.seq
    curve = {"step": [], "time": [], "tokens": [], "loss": [], "loss_mtp1": [], "loss_mtp2": [], "lr": []}
    evals = []
    t_start = time.time()
    eval_time = 0.0          # seconds spent in periodic evals (excluded from the budget)
    t_train = 0.0
    last_eval = 0.0
    step = 0
    tokens = 0
    tok_s_hist = []
    t_mark, step_mark = time.time(), 0
    aux = None
    compile_failed = False
    while True:
        t_train = time.time() - t_start - eval_time
        frac = t_train / args.time_budget
        if frac >= 1.0 or step >= args.max_steps:
            break
        if replay is not None:
            lr = float(np.interp(step, replay[0], replay[1]))
        else:
            lr = args.lr * min(1.0, (step + 1) / args.warmup) * (
                args.min_lr_frac + (1 - args.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))
        for g in opt.param_groups:
            g["lr"] = lr
        starts = torch.randint(0, N - T - 1, (args.batch,), device=dev, generator=gen)
        x = stream[starts[:, None] + ar].long()

        def fwd_bwd():
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                h = model.hidden(x)
                lg = model.logits(h)
                loss_main = F.cross_entropy(lg[:, :-1].float().reshape(-1, c.vocab_size), x[:, 1:].reshape(-1))
                outs = model.mtp_chain(h, x, 2)
                l1 = F.cross_entropy(outs[0][1][:, :T - 2].float().reshape(-1, c.vocab_size),
                                     x[:, 2:].reshape(-1))
                l2 = F.cross_entropy(outs[1][1][:, :T - 3].float().reshape(-1, c.vocab_size),
                                     x[:, 3:].reshape(-1))
                loss = loss_main + args.mtp_w1 * l1 + args.mtp_w2 * l2
                aux = model.moe_aux() if c.is_moe else None
                if aux is not None:
                    loss = loss + args.aux * aux
            opt.zero_grad(set_to_none=True)
            loss.backward()
            return loss_main, l1, l2, aux

        if step == 0 and args.compile:
            try:
                tc0 = time.time()
                loss_main, l1, l2, aux = fwd_bwd()
                torch.cuda.synchronize()
                log(f"compiled first step in {time.time() - tc0:.1f}s")
            except Exception as ex:  # fall back to eager
                log(f"torch.compile failed ({ex!r:.300}); continuing eagerly")
                for layer in model.model.layers:
                    layer._compiled_call_impl = None
                compile_failed = True
                opt.zero_grad(set_to_none=True)
                loss_main, l1, l2, aux = fwd_bwd()
        else:
            loss_main, l1, l2, aux = fwd_bwd()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens += args.batch * T
        if step % 10 == 0 or step <= 3:
            lm, a1, a2 = loss_main.item(), l1.item(), l2.item()   # syncs
            if not math.isfinite(lm):
                log("non-finite loss, stopping")
                break
            now = time.time()
            if step % 10 == 0:
                if step > 10:
                    tok_s_hist.append((step - step_mark) * args.batch * T / (now - t_mark))
                t_mark, step_mark = now, step
            curve["step"].append(step)
            curve["time"].append(now - t_start - eval_time)
            curve["tokens"].append(tokens)
            curve["loss"].append(lm)
            curve["loss_mtp1"].append(a1)
            curve["loss_mtp2"].append(a2)
            curve["lr"].append(lr)
        if step % 50 == 0 or step in (1, 2, 3, 10, 20):
            recent = tok_s_hist[-5:]
            log(f"step {step} t={t_train:.0f}s loss {loss_main.item():.3f} mtp1 {l1.item():.3f} "
                f"mtp2 {l2.item():.3f} aux {aux.item() if aux is not None else 0:.3f} gn {gn.item():.2f} "
                f"lr {lr:.2e} tok/s {np.median(recent) if recent else 0:.0f} "
                f"mem {torch.cuda.max_memory_allocated() / 2 ** 30:.1f}GiB")
        if not args.smoke and t_train - last_eval >= args.eval_every_s:
            te0 = time.time()
            last_eval = t_train
            e_code = evaluate(model, ho_code, 16, T, 16, dev, mtp_steps=1)
            e_prose = evaluate(model, ho_prose, 16, T, 16, dev, mtp_steps=1)
            evals.append({"step": step, "time": t_train, "tokens": tokens,
                          "code_loss": e_code["main_loss"], "code_acc": e_code["main_acc"],
                          "code_mtp1_acc": e_code.get("mtp1_acc_teacher_forced"),
                          "prose_loss": e_prose["main_loss"], "prose_acc": e_prose["main_acc"],
                          "prose_mtp1_acc": e_prose.get("mtp1_acc_teacher_forced")})
            log(f"eval step {step}: {json.dumps(evals[-1])}")
            eval_time += time.time() - te0
            t_mark += time.time() - te0
    wall = time.time() - t_start
    tps = float(np.median(tok_s_hist)) if tok_s_hist else 0.0
    log(f"done: steps={step} tokens={tokens / 1e6:.1f}M train_s={t_train:.0f} wall={wall:.0f} "
        f"median tok/s={tps:.0f}")
    summary = {"model": args.model, "params": pc, "steps": step, "tokens_seen": tokens, "train_seconds": t_train,
               "wall_seconds": wall, "median_tokens_per_s": tps, "args": vars(args),
               "peak_mem_gib": torch.cuda.max_memory_allocated() / 2 ** 30,
               "train_stream_tokens": int(N), "epochs": tokens / N,
               "compiled": bool(args.compile) and not compile_failed}
    if replay is not None:
        summary["lr_schedule"] = f"replayed from {args.replay_lr} (not the wall clock; --lr/--warmup/--min-lr-frac unused)"
    if args.smoke:
        json.dump(summary, open(os.path.join(args.out, "smoke.json"), "w"), indent=1)
        return
    te = time.time()
    final = {"code": evaluate(model, ho_code, args.final_eval_windows, T, 32, dev),
             "prose": evaluate(model, ho_prose, args.final_eval_windows, T, 32, dev)}
    log(f"final eval ({time.time() - te:.0f}s): {json.dumps(final, indent=1)}")
    summary["final_eval_bf16_autocast"] = final
    summary["curve"] = curve
    summary["evals"] = evals
    json.dump(summary, open(os.path.join(args.out, "train_summary.json"), "w"), indent=1)
    sd = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
    torch.save(sd, os.path.join(args.out, "state.pt"))
    log("saved")


if __name__ == "__main__":
    main()
