#!/usr/bin/env python3
"""Reproducibility check of the shipped training run (tools/train/runs/final), issue 4:
"re-running the pipeline with the same seed reproduces the tokenizer byte for byte and the loss
curve within noise".

usage (GPU machine, repo root):
  PYTHONUNBUFFERED=1 python3 tools/train/repro_check.py --steps 600 --out $OUT/repro_check.json

1. data.py with the shipped run's arguments (from runs/final/report.json, as run_all.py passes
   them) into a scratch dir; the sha256 of its tokenizer.json is compared with models/*/tokenizer.json
   and the one in docs/training.md, and its data statistics with runs/final/data_stats.json.
2. train.py for dense and MoE concurrently (as run_all.py did), with the recorded summaries' args,
   --replay-lr <recorded summary> --max-steps N and a time budget that never stops the run: the
   shipped run's lr came from its wall clock, so only a replay of its per-step lr makes the first N
   steps comparable (same seed, same batches, same lr at every step).
3. At the common logged steps: |re-run - recorded| of loss, loss_mtp1, loss_mtp2 (mean and max,
   all steps and steps >= 100) against the noise of the recorded curve = std of the differences
   between consecutive logged values (10 steps apart) over recorded steps 200..last compared step,
   divided by sqrt(2), i.e. the scatter of one logged loss around its trend.  A metric is "within
   noise" iff its mean |diff| over steps >= 100 is <= that noise.
Writes a JSON report (--out) and, next to it, the logs of data.py / train.py.
Exit status: 0 all checks pass, 2 the check ran but something does not match, 1 a step failed.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
DOC_SHA = "6924be73c3d081ba51411e25911b733a381d144ba075bf549f2c1fc9c6ce96a2"   # docs/training.md
MODELS = ("dense", "moe")
METRICS = ("loss", "loss_mtp1", "loss_mtp2")
# train.py hyper-parameters taken over from the recorded summary's "args" (not data/out/time/steps)
TRAIN_KEYS = ("seed", "seq", "batch", "lr", "min_lr_frac", "wd", "warmup", "mtp_w1", "mtp_w2", "aux",
              "compile", "eval_every_s", "final_eval_windows")
COMPARE_FROM = 100   # verdict over logged steps >= this
NOISE_FROM = 200     # noise estimated on recorded steps >= this


def log(*a):
    print(f"[repro {time.strftime('%H:%M:%S')}]", *a, flush=True)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def tail(path, n=25):
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 8000))
            return "\n".join(f.read().decode("utf-8", "replace").splitlines()[-n:])
    except OSError:
        return ""


def last_step_line(path):
    lines = [x for x in tail(path, 40).splitlines() if "] step " in x or "compiled" in x or "done:" in x]
    return lines[-1].split("] ", 1)[-1][:90] if lines else "(starting)"


def f4(x):
    return "n/a" if x is None else f"{x:.4f}"


def compare(rec, new, max_step):
    """Per-step recorded vs re-run values at the common logged steps, statistics, verdict."""
    rs = {s: i for i, s in enumerate(rec["step"])}
    steps = [s for s in new["step"] if s in rs and s <= max_step]
    ri = [rs[s] for s in steps]
    ni = [new["step"].index(s) for s in steps]
    out = {"steps": steps,
           "lr_recorded": [rec["lr"][i] for i in ri], "lr_rerun": [new["lr"][i] for i in ni],
           "recorded": {m: [rec[m][i] for i in ri] for m in METRICS},
           "rerun": {m: [new[m][i] for i in ni] for m in METRICS}, "stats": {}}
    out["lr_max_rel_diff"] = max((abs(a - b) / a for a, b in zip(out["lr_recorded"], out["lr_rerun"])), default=None)
    last = steps[-1] if steps else 0
    for m in METRICS:
        d = [b - a for a, b in zip(out["recorded"][m], out["rerun"][m])]
        late = [x for s, x in zip(steps, d) if s >= COMPARE_FROM]
        nv = [v for s, v in zip(rec["step"], rec[m]) if NOISE_FROM <= s <= last]
        window = f"recorded steps {NOISE_FROM}..{last}"
        if len(nv) < 6:   # too short a re-run: use the whole recorded curve after NOISE_FROM
            nv = [v for s, v in zip(rec["step"], rec[m]) if s >= NOISE_FROM]
            window = f"recorded steps {NOISE_FROM}..{rec['step'][-1]}"
        noise = statistics.stdev([b - a for a, b in zip(nv, nv[1:])]) / math.sqrt(2)
        st = {"n_steps": len(d), "mean_abs_diff_all": statistics.fmean(map(abs, d)) if d else None,
              "max_abs_diff_all": max(map(abs, d)) if d else None,
              "n_steps_ge%d" % COMPARE_FROM: len(late),
              "mean_abs_diff_ge%d" % COMPARE_FROM: statistics.fmean(map(abs, late)) if late else None,
              "max_abs_diff_ge%d" % COMPARE_FROM: max(map(abs, late)) if late else None,
              "mean_signed_diff_ge%d" % COMPARE_FROM: statistics.fmean(late) if late else None,
              "noise": noise, "noise_window": window}
        st["within_noise"] = bool(late) and st["mean_abs_diff_ge%d" % COMPARE_FROM] <= noise
        out["stats"][m] = st
    out["within_noise"] = all(out["stats"][m]["within_noise"] for m in METRICS)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=600, help="steps replayed per model (--max-steps of train.py)")
    ap.add_argument("--out", default=os.path.join(os.environ["OUT"], "repro_check.json") if os.environ.get("OUT")
                    else None, help="JSON report (default $OUT/repro_check.json); logs are written next to it")
    ap.add_argument("--recorded", default=os.path.join(HERE, "runs", "final"),
                    help="run directory with report.json, data_stats.json, train_summary_{dense,moe}.json")
    ap.add_argument("--work", default="/tmp/mr_repro", help="scratch: data/, dense/, moe/ (checkpoints land here)")
    ap.add_argument("--skip-data", action="store_true", help="reuse WORK/data from an earlier call")
    ap.add_argument("--train-timeout", type=float, default=450, help="seconds before the trainings are killed")
    args = ap.parse_args()
    if not args.out:
        ap.error("--out is required when $OUT is not set")
    t0 = time.time()
    args.work, args.recorded = os.path.abspath(args.work), os.path.abspath(args.recorded)
    out = os.path.abspath(args.out)
    logdir = os.path.dirname(out)
    os.makedirs(logdir, exist_ok=True)
    py = sys.executable
    env = dict(os.environ, PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="true")   # as run_all.py
    rec_report = json.load(open(os.path.join(args.recorded, "report.json")))
    recs = {k: json.load(open(os.path.join(args.recorded, f"train_summary_{k}.json"))) for k in MODELS}
    report = {"argv": sys.argv, "steps_requested": args.steps, "recorded_dir": os.path.relpath(args.recorded, ROOT),
              "compare_from_step": COMPARE_FROM,
              "noise_definition": (f"std of the differences between consecutive logged values (10 steps apart) of "
                                   f"the recorded curve over steps >= {NOISE_FROM} up to the last compared step, "
                                   "divided by sqrt(2): the scatter of one logged loss around its local trend"),
              "verdict_rule": f"within noise iff mean |rerun - recorded| over logged steps >= {COMPARE_FROM} <= noise",
              "wall_s": {}, "errors": []}

    def write():
        report["wall_s"]["total"] = time.time() - t0
        with open(out, "w") as f:
            json.dump(report, f, indent=1)

    def fail(msg):
        report["errors"].append(msg)
        write()
        raise SystemExit(f"repro_check FAILED: {msg}")

    # ------------------------------------------------------------------ 1. data + tokenizer
    data = os.path.join(args.work, "data")
    ra = rec_report["args"]
    cmd = [py, os.path.join(HERE, "data.py"), "--out", data, "--code-cap-mb", str(ra["code_cap_mb"]),
           "--tok-sample-mb", str(ra["tok_sample_mb"])] + (["--check-repro"] if ra.get("check_repro") else [])
    report["data_cmd"] = cmd
    if not args.skip_data:
        dlog = os.path.join(logdir, "repro_data.log")
        log("$", " ".join(cmd), f"  (~55 s; log {dlog})")
        td = time.time()
        with open(dlog, "w") as f:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=ROOT).returncode
        report["wall_s"]["data"] = time.time() - td
        if rc:
            print(tail(dlog, 40), file=sys.stderr, flush=True)
            fail(f"data.py exited with {rc} (log {dlog})")
        print(tail(dlog, 8), flush=True)
    for f in ("tokenizer.json", "train.npy", "data_stats.json"):
        if not os.path.exists(os.path.join(data, f)):
            fail(f"{data}/{f} missing")
    shipped = {os.path.relpath(p, ROOT): sha256(p) for p in sorted(
        os.path.join(ROOT, "models", d, "tokenizer.json") for d in os.listdir(os.path.join(ROOT, "models")))
        if os.path.exists(p)}
    new_sha = sha256(os.path.join(data, "tokenizer.json"))
    tok_ok = bool(shipped) and all(v == new_sha for v in shipped.values()) and new_sha == DOC_SHA
    report["tokenizer"] = {"rerun_sha256": new_sha, "docs_sha256": DOC_SHA, "shipped_sha256": shipped,
                           "identical": tok_ok}
    ds_new = json.load(open(os.path.join(data, "data_stats.json")))
    ds_rec = json.load(open(os.path.join(args.recorded, "data_stats.json")))
    keys = ("files", "bytes", "tokens")
    report["data_stats"] = {"recorded": {k: ds_rec.get(k) for k in keys}, "rerun": {k: ds_new.get(k) for k in keys},
                            "identical": all(ds_rec.get(k) == ds_new.get(k) for k in keys),
                            "rerun_train_npy_sha256": sha256(os.path.join(data, "train.npy"))}
    log(f"tokenizer sha256 {new_sha}: {'IDENTICAL to' if tok_ok else 'DIFFERENT from'} the shipped one; "
        f"data statistics {'identical' if report['data_stats']['identical'] else 'DIFFERENT'}")
    write()

    # ------------------------------------------------------------------ 2. replayed training, concurrently
    procs = {}
    tt = time.time()
    for k in MODELS:
        a = recs[k]["args"]
        od = os.path.join(args.work, k)
        os.makedirs(od, exist_ok=True)
        sj = os.path.join(od, "train_summary.json")
        if os.path.exists(sj):
            os.remove(sj)
        cmd = [py, os.path.join(HERE, "train.py"), "--model", k, "--data", data, "--out", od,
               "--time-budget", "1e9", "--max-steps", str(args.steps),
               "--replay-lr", os.path.join(args.recorded, f"train_summary_{k}.json")]
        for key in TRAIN_KEYS:
            cmd += ["--" + key.replace("_", "-"), str(a[key])]
        tlog = os.path.join(logdir, f"repro_train_{k}.log")
        log("$", " ".join(cmd))
        procs[k] = (subprocess.Popen(cmd, stdout=open(tlog, "w"), stderr=subprocess.STDOUT, env=env, cwd=ROOT),
                    tlog, sj)
        report.setdefault("models", {})[k] = {"cmd": cmd}
    done = {}
    t_print = tt
    while len(done) < len(procs):
        time.sleep(2)
        for k, (p, tlog, _) in procs.items():
            if k not in done and p.poll() is not None:
                done[k] = time.time() - tt
                log(f"{k} exited with {p.returncode} after {done[k]:.0f}s")
        if time.time() - tt > args.train_timeout:
            for k, (p, _, _) in procs.items():
                if p.poll() is None:
                    p.kill()
                    p.wait()
                    done.setdefault(k, time.time() - tt)
                    report["errors"].append(f"train.py {k} killed after --train-timeout {args.train_timeout:.0f}s")
        if time.time() - t_print >= 20 and len(done) < len(procs):
            t_print = time.time()
            log(" | ".join(f"{k}: {last_step_line(procs[k][1])}" for k in MODELS if k not in done))
    report["wall_s"]["train"] = time.time() - tt

    # ------------------------------------------------------------------ 3. comparison
    for k, (p, tlog, sj) in procs.items():
        r = report["models"][k]
        r["rc"], r["wall_s"], r["log"] = p.returncode, done[k], tlog
        if p.returncode or not os.path.exists(sj):
            print(f"---- {tlog} (tail)\n{tail(tlog, 40)}", file=sys.stderr, flush=True)
            report["errors"].append(f"train.py {k} exited with {p.returncode} (log {tlog})")
            continue
        s = json.load(open(sj))
        with open(os.path.join(logdir, f"repro_train_summary_{k}.json"), "w") as f:
            json.dump(s, f, indent=1)
        r["rerun_summary"] = {x: s.get(x) for x in ("steps", "train_seconds", "wall_seconds", "median_tokens_per_s",
                                                    "compiled", "peak_mem_gib", "lr_schedule")}
        r.update(compare(recs[k]["curve"], s["curve"], args.steps))
    ok_models = [k for k in MODELS if "stats" in report["models"].get(k, {})]
    report["verdict"] = {
        "tokenizer_byte_identical": tok_ok,
        "data_identical": report["data_stats"]["identical"],
        **{f"{k}_within_noise": report["models"][k]["within_noise"] for k in ok_models},
        "pass": tok_ok and report["data_stats"]["identical"] and len(ok_models) == len(MODELS) and all(report["models"][k]["within_noise"]
                                                                  for k in ok_models) and not report["errors"]}
    write()

    # ------------------------------------------------------------------ summary
    print("\n==== reproducibility check ====", flush=True)
    print(f"tokenizer.json sha256 re-run {new_sha}\n  shipped {sorted(set(shipped.values()))}, docs {DOC_SHA}: "
          f"{'byte-identical' if tok_ok else 'NOT identical'}; data statistics "
          f"{'identical' if report['data_stats']['identical'] else 'DIFFERENT'}")
    for k in ok_models:
        r = report["models"][k]
        print(f"{k}: {r['rerun_summary']['steps']} steps, {r['rerun_summary']['median_tokens_per_s'] / 1e3:.0f} k tok/s, "
              f"{len(r['steps'])} logged steps compared, lr max rel diff {r['lr_max_rel_diff']:.1e}")
        for m in METRICS:
            st = r["stats"][m]
            late = st["n_steps_ge%d" % COMPARE_FROM]
            print(f"  {m:9s} mean|d| (steps>={COMPARE_FROM}) {f4(st['mean_abs_diff_ge%d' % COMPARE_FROM])} "
                  f"max|d| {f4(st['max_abs_diff_ge%d' % COMPARE_FROM])} (all steps: mean {f4(st['mean_abs_diff_all'])} "
                  f"max {f4(st['max_abs_diff_all'])}) noise {f4(st['noise'])} -> "
                  + ("within noise" if st["within_noise"] else "NOT within noise" if late
                     else f"NOT judged: no logged step >= {COMPARE_FROM}"))
    for e in report["errors"]:
        print("ERROR:", e)
    print(f"verdict: {'PASS' if report['verdict']['pass'] else 'FAIL'}; report {out}; "
          f"total {time.time() - t0:.0f}s", flush=True)
    if report["errors"]:
        raise SystemExit("repro_check FAILED: " + "; ".join(report["errors"]))
    sys.exit(0 if report["verdict"]["pass"] else 2)


if __name__ == "__main__":
    main()
