#!/usr/bin/env bash
# Session 28, issue 7: each verification width its own group-integer shape. Carried: the tree's
# mere.run and mere_cuda_check (MERE_CUDA_GM=width, cuda_check --gm-sweep).
#  1. 27B oracle-fed verification, widths 1, 4, 8, 9, 5 reps, under MERE_CUDA_QMATVEC=mma with
#     MERE_CUDA_GM = ring (the default), db4 and width (the per-width table, a guess from s27c's
#     [17408, 5120] sweep at T = 1 and 8);
#  2. the group-integer benchmark with every compiled shape at every T on the four 27B projections
#     (--gm-sweep): the data for the per-width table.
LIMIT_DEFAULT=${LIMIT:-400} . tools/cuda/call_prelude.sh
export D27=/tmp/synth-27b
$B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet
for v in ring db4 width; do
  left 40 && MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=$v timeout 90 $B/mere.run model verify-bench --model $D27 --backend cuda \
    --widths 1,4,8,9 --prompt-tokens 128 --passes 8 --reps 5 --json >$OUT/vb-$v.json 2>$OUT/vb-$v.err &&
    vb_summary $OUT/vb-$v.json $v
  pack
done
rm -rf $D27
left 60 && { timeout -k 5 $((LIMIT - SECONDS + t0 - 10)) $B/mere_cuda_check --only "bench qmatvec" --kernels gmma --gm-sweep \
  --json $OUT/cc-sweep.json >$OUT/cc-sweep.log 2>&1; echo "sweep rc=$? $((SECONDS-t0))s"; }
python3 - $OUT/cc-sweep.json <<'PY' 2>&1 | tee $OUT/sweep-best.txt
import json, re, sys, collections
rows = collections.defaultdict(dict)
for b in json.load(open(sys.argv[1])).get("bench", []):
    m = re.match(r"q4gmma \[(\d+),(\d+)\] T=(\d+) gmma (P=\d+ G=\d+)( db)?", b["bench"])
    if m: rows[(m.group(1) + "x" + m.group(2), int(m.group(3)))][m.group(4) + (" db" if m.group(5) else "")] = b.get("graph_us_per_launch", 0)
for k in sorted(rows, key=lambda k: (k[1], k[0])):
    r = rows[k]; best = min(r, key=r.get)
    print("T=%d %-11s best %-12s %6.1f | %s" % (k[1], k[0], best, r[best], " ".join("%s:%.1f" % (c, v) for c, v in sorted(r.items()))))
PY
echo "total $((SECONDS-t0))s"; pack
