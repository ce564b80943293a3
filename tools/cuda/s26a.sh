#!/usr/bin/env bash
# Session 26's first device call: session 25's s25b.sh and s25c.sh in one call (a full budget, one
# cold start), plus the split argmax. Carried: build/carry/bin.tar.xz with mere.run, mere_engine_check,
# mere_cuda_check and trace/mere.run (the trace build, cmake -DMERE_CUDA_TRACE=ON); the tree travels
# without models/qwen35-dense-tiny (only engine_check's "MoE block" and "tiny argmax" sections run).
#  1. cuda_check's argmax phase (v1 and the split form against the host rule on breaking rows);
#     engine_check "MoE block" (MERE_CUDA_MOE_BLOCK=on, k_moe_block.cu, bitwise against the launches;
#     the 35B-A3B-geometry section also pairs MERE_CUDA_ARGMAX=split) and "tiny argmax";
#  2. ab35: MOE_BLOCK off / on / on + ARGMAX=split, two rounds. Predictions (before any run): the
#     block +20-30% (session 25); the split argmax ~25 µs a step of 2.5 ms, +1%;
#  3. the 35B-A3B receipt (5 reps) with the variant that beat the others in both rounds;
#  4. trace35 with the block on (+ the split argmax where it passed): the block's time in sequence against s24c's four launches (31 µs a layer);
#  5. issue 7: 27B verification traces of width 1 and 8 (MERE_CUDA_TRACE_ROWS) under mma db4, the graph
#     rates, and the 27B receipt with this tree's defaults (+ ARGMAX=split where it passed). LIMIT 560.
LIMIT_DEFAULT=560 . tools/cuda/call_prelude.sh
export BT=$B/trace
timeout -k 5 60 $B/mere_cuda_check --only argmax --no-bench >$OUT/cc-argmax.log 2>&1; cc=$?
echo "cuda_check argmax rc=$cc"; grep -E "FAIL|checks|failures" $OUT/cc-argmax.log | head -8
timeout -k 5 90 $B/mere_engine_check . "MoE block" >$OUT/ec.log 2>&1; ec=$?
echo "ec MoE block rc=$ec $((SECONDS-t0))s"; grep -E "FAIL|checks|MoE block|argmax" $OUT/ec.log | head -20
timeout -k 5 40 $B/mere_engine_check . "tiny argmax" >$OUT/ec-argmax.log 2>&1; ea=$?
echo "ec tiny argmax rc=$ea"; grep -E "FAIL|checks" $OUT/ec-argmax.log | head -5; pack
export PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s26a
ARG=""; [ $cc -eq 0 ] && [ $ea -eq 0 ] && [ $ec -eq 0 ] && ARG="MERE_CUDA_ARGMAX=split"
[ $ec -eq 0 ] && AB="MERE_CUDA_MOE_BLOCK=off;MERE_CUDA_MOE_BLOCK=on;MERE_CUDA_MOE_BLOCK=on MERE_CUDA_ARGMAX=split" KEEP35=1 ROUNDS=2 \
  timeout -k 10 150 bash tools/cuda/engine_run.sh ab35 2>&1
pack
# the variant that beat every other variant's runs in both rounds (block only if it beat off; the
# split argmax only if its checks passed)
BEST=$(python3 - $OUT "$ARG" <<'PY'
import json, sys, glob
r = lambda v: [json.load(open(f))["runs"][0]["decode_tok_s"]["median"] for f in sorted(glob.glob(sys.argv[1] + "/ab35-v%d-r*.json" % v))]
v = [r(0), r(1), r(2)]
best = ""
if v[0] and v[1] and min(v[1]) > max(v[0]):
    best = "MERE_CUDA_MOE_BLOCK=on"
    if sys.argv[2] and v[2] and min(v[2]) > max(v[1]): best += " " + sys.argv[2]
print(best)
PY
)
echo "35B receipt variant: '${BEST}'"
env $BEST timeout 40 $B/mere.run bench --model /tmp/synth-ab35 --backend cuda --prompt-tokens 512 \
  --gen-tokens 128 --reps 5 --json >$OUT/engine-35b-s26a.json 2>$OUT/bench-35b.log && python3 -c "
import json,sys;r=json.load(open(sys.argv[1]))['runs'][0];d=r['decode_tok_s'];p=r['prefill_tok_s']
print('receipt 35B-A3B [%s]: decode %.1f [%.1f-%.1f] prefill %.0f [%.0f-%.0f] %s%% of copy'%(sys.argv[2],d['median'],d['min'],d['max'],p['median'],p['min'],p['max'],r.get('decode_pct_of_copy_bw','')))" $OUT/engine-35b-s26a.json "$BEST"
pack
[ $ec -eq 0 ] && env MERE_CUDA_MOE_BLOCK=on $ARG timeout 100 bash tools/cuda/engine_run.sh trace35 2>&1
rm -rf /tmp/synth-ab35; pack
D27=/tmp/synth-27b
$B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet
echo "synth 27B done $((SECONDS-t0))s"
summary() {
  python3 - "$@" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
print("%s: %d passes traced, %.1f us a pass in sequence" % (sys.argv[2], t["steps"], t["us_per_step"]))
for k in t["kernels"][:16]:
    print("  %-44s %6.2f a pass %8.1f us a pass %7.2f us each" % (k["name"][:44], k["launches_per_step"], k["us_per_step"], k["us_each"]))
PY
}
left 60 && env $ARG timeout 80 $B/mere.run bench --model $D27 --backend cuda --prompt-tokens 512 --gen-tokens 128 --reps 5 --json \
  >$OUT/engine-27b-s26a.json 2>$OUT/bench-27b.log && python3 -c "
import json,sys;r=json.load(open(sys.argv[1]))['runs'][0];d=r['decode_tok_s'];p=r['prefill_tok_s']
print('receipt 27B [$ARG]: decode %.1f [%.1f-%.1f] prefill %.0f [%.0f-%.0f] %s%% of copy'%(d['median'],d['min'],d['max'],p['median'],p['min'],p['max'],r.get('decode_pct_of_copy_bw','')))" $OUT/engine-27b-s26a.json
pack
left 40 && MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=db4 timeout 60 $B/mere.run model verify-bench --model $D27 --backend cuda \
  --widths 1,4,8,9 --prompt-tokens 128 --passes 8 --reps 3 --json >$OUT/vb-graph.json 2>/dev/null && python3 -c "
import json,sys;d=json.load(open(sys.argv[1]))
for x in d['widths']: print('graph mma db4: w%d %.1f tok/s [%.1f-%.1f] x%.2f'%(x['width'],x['tokens_per_s']['median'],x['tokens_per_s']['min'],x['tokens_per_s']['max'],x['speedup_vs_width1']))" $OUT/vb-graph.json
pack
for w in 1 8; do
  left 40 && MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=db4 MERE_CUDA_GRAPH=0 MERE_CUDA_TRACE_OUT=$OUT/trace-v27-w$w.json \
    MERE_CUDA_TRACE_ROWS=$w MERE_CUDA_TRACE_STEPS=8 timeout 60 $BT/mere.run model verify-bench --model $D27 --backend cuda \
    --widths $w --prompt-tokens 128 --passes 8 --reps 3 --json >$OUT/vb-trace-w$w.json 2>$OUT/vb-trace-w$w.err ||
    tail -3 $OUT/vb-trace-w$w.err
  summary $OUT/trace-v27-w$w.json "width $w"
  pack
done
rm -rf $D27
echo "total $((SECONDS-t0))s"; pack
