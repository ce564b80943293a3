#!/usr/bin/env bash
# Written in session 31, NOT run (no device time left): the next session's first call (mere.run:
# `tools/cuda/make_carry.sh --bins mere.run --out build/carry/run.tar.xz`; bench/ and tests/data/mtp
# aside). e0207b6 (the serial steps after the fallback no longer read the hidden state back) on the
# bundled models: both, five workloads, baseline / adaptive interleaved, 5 reps; then MoE prose with
# --cost-ratio 5 (every adaptive request falls back before a round), which s31a measured 2.0 ms slower
# than the baseline over 256 tokens: it should now match it.
CARRY=build/carry/run.tar.xz LIMIT_DEFAULT=${LIMIT:-240} . tools/cuda/call_prelude.sh
for m in moe dense; do
  timeout 100 $B/mere.run model benchmark --model models/qwen35-$m-tiny --backend cuda --variants baseline,adaptive \
    --tokens 256 --repetitions 5 --quiet --json >$OUT/mb-$m.json 2>$OUT/mb-$m.err
  mb_summary $OUT/mb-$m.json $m
done; pack
timeout 30 $B/mere.run model benchmark --model models/qwen35-moe-tiny --backend cuda --workloads prose \
  --variants baseline,adaptive --cost-ratio 5 --tokens 256 --repetitions 5 --quiet --json >$OUT/c5.json 2>&1
python3 - $OUT/c5.json <<'PY'
import json, sys
for s in json.load(open(sys.argv[1]))["scenarios"]:
    v = {x["variant"]: sorted(r["decodeSeconds"] * 1e3 for r in x["repetitions"]) for x in s["variants"]}
    print("cost-ratio 5 prose: baseline ms %.2f [%.2f-%.2f], adaptive ms %.2f [%.2f-%.2f]" % (
        v["baseline"][2], v["baseline"][0], v["baseline"][-1], v["adaptive"][2], v["adaptive"][0], v["adaptive"][-1]))
PY
echo "total $((SECONDS-t0))s"; pack
