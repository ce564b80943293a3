#!/usr/bin/env bash
# Session 30's 5th call (as s30d): where the MoE prose requests lose ~4.3 ms against the baseline.
# s30e's rounds add up to ~5.6 ms for 13 tokens (~2.1 ms over serial steps); is the pipelined decode
# after the fallback as fast as the baseline's? model benchmark prose and summary, both bundled models,
# baseline / adaptive interleaved, 5 reps, MERERUN_Q35_MTP_DEBUG (each round's head and verify ms), with
# the calibration now timing steady-state passes only (its first GPU run).
CARRY=build/carry/run.tar.xz LIMIT_DEFAULT=${LIMIT:-120} . tools/cuda/call_prelude.sh
for m in moe dense; do
  MERERUN_Q35_MTP_DEBUG=1 timeout 60 $B/mere.run model benchmark --model models/qwen35-$m-tiny --backend cuda \
    --workloads prose,summary --variants baseline,adaptive --tokens 256 --repetitions 5 --json >$OUT/dbg-$m.json 2>$OUT/dbg-$m.err
  mb_summary $OUT/dbg-$m.json "$m debug"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('$m greedy parity', [s['greedyOutputParity'] for s in d['scenarios']])" $OUT/dbg-$m.json
  grep -m2 "mtp-debug\] head" $OUT/dbg-$m.err | cut -c1-200
done
python3 - $OUT/dbg-moe.json $OUT/dbg-moe.err <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
err = open(sys.argv[2]).read().split("\n")
# rounds of each adaptive request, in order: warm-up, then repetitions (interleaved with baseline ones)
reqs, cur = [], []
for l in err:
    if "] round " in l:
        cur.append(l)
    elif "[benchmark]" in l and "adaptive" in l:
        reqs.append(cur); cur = []
for s in d["scenarios"]:
    v = {x["variant"]: x for x in s["variants"]}
    base = [r["decodeSeconds"] for r in v["baseline"]["repetitions"]]
    print(s["name"], "baseline decode ms", [round(b * 1e3, 2) for b in base])
    for r in v["adaptive"]["repetitions"]:
        print(s["name"], "adaptive decode ms %.2f" % (r["decodeSeconds"] * 1e3), "captures", r.get("graphCaptures"),
              "%.2f ms" % (r.get("graphCaptureSeconds", 0) * 1e3), "rounds", r["acceleration"]["rounds"])
for i, rq in enumerate(reqs):
    ms = sum(float(x) for l in rq for x in re.findall(r"(?:head|verify) ([0-9.]+) ms", l))
    toks = sum(int(re.search(r" acc (\d+)", l).group(1)) + 1 for l in rq)
    print("request", i, "rounds", len(rq), "round ms %.2f" % ms, "tokens", toks)
PY
pack
