#!/usr/bin/env bash
# Session 25's second device call, on binaries of the working tree with MERE_CUDA_MOE_BLOCK
# (build/carry/bin.tar.xz: mere.run, mere_engine_check; the tree with models/ and tests/):
#  1. engine_check (only its "MoE block" sections unless EC_ONLY= is set empty): its new pairs compare
#     MERE_CUDA_MOE_BLOCK=on (a decode step's MoE half as one launch with two grid barriers,
#     k_moe_block.cu) with the default launches bitwise, on
#     qwen35-moe-tiny and the 4-layer 35B-A3B-geometry checkpoint (decode, verification, MTP head);
#  2. ab35 of MOE_BLOCK off / on. Prediction (written before any run, from the s24c trace: 31 µs a
#     MoE layer in four launches, ~14-18 µs as one): 35B-A3B decode +20-30% (0.5-0.7 ms of 2.5).
#  3. if both on-runs beat the faster off-run: the 35B-A3B receipt (5 reps) with it on.
# A hang (a barrier that never opens) ends at the timeouts. LIMIT 185 (the session's device time ran low:
# ab35 one round unless ROUNDS=2).
LIMIT_DEFAULT=185 . tools/cuda/call_prelude.sh
timeout -k 5 90 $B/mere_engine_check . "${EC_ONLY-MoE block}" >$OUT/ec.log 2>&1; ec=$?
echo "ec rc=$ec $((SECONDS-t0))s"; grep -E "FAIL|checks|MoE block" $OUT/ec.log | head -20; pack
export PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s25b
[ $ec -eq 0 ] && left 60 && AB="MERE_CUDA_MOE_BLOCK=off;MERE_CUDA_MOE_BLOCK=on" KEEP35=1 ROUNDS=${ROUNDS:-1} \
  timeout -k 10 $((LIMIT - (SECONDS - t0) - 45)) bash tools/cuda/engine_run.sh ab35 2>&1
pack
# 3. where it gained (both on-runs above the faster off-run): the 35B-A3B receipt with it on (5 reps)
if [ $ec -eq 0 ] && left 40 && python3 - $OUT <<'PY'
import json, sys, glob
r = lambda v: [json.load(open(f))["runs"][0]["decode_tok_s"]["median"] for f in sorted(glob.glob(sys.argv[1] + "/ab35-v%d-r*.json" % v))]
off, on = r(0), r(1)
sys.exit(0 if off and len(on) == len(off) and min(on) > max(off) else 1)
PY
then
  MERE_CUDA_MOE_BLOCK=on timeout 40 $B/mere.run bench --model /tmp/synth-ab35 --backend cuda --prompt-tokens 512 \
    --gen-tokens 128 --reps 5 --json >$OUT/engine-35b-s25b.json 2>$OUT/bench-35b.log && python3 -c "
import json,sys;r=json.load(open(sys.argv[1]))['runs'][0];d=r['decode_tok_s'];p=r['prefill_tok_s']
print('receipt 35B-A3B (MOE_BLOCK=on): decode %.1f [%.1f-%.1f] prefill %.0f [%.0f-%.0f] %s'%(d['median'],d['min'],d['max'],p['median'],p['min'],p['max'],r.get('decode_pct_of_copy','')))" $OUT/engine-35b-s25b.json
fi
rm -rf /tmp/synth-ab35
echo "total $((SECONDS-t0))s"; pack
