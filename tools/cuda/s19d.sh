#!/usr/bin/env bash
# Session 19, fourth device call: gdn_prefill_lazy v3c (8 rows a warp: k and q read once for 8 rows;
# 1/c' off the token's chain as one rcp.approx; staged addresses once a chunk). v3b (4 rows a warp)
# measured 204.9 µs vs v1 181.1 (s19c, H200): 156 instructions a token a warp, issue-bound.
# Prediction (written before the run): rw8 ~80 µs at 27B and 35B-A3B (the token's ~300-cycle chain);
# rw4 ~150 µs.
#  * prefill_check --only gdn (both rw, checks + bench); engine_check with MERE_CUDA_GDN_PREFILL=lazy;
#    ab27 / ab35 lazy vs recurrent
# LIMIT (480).
LIMIT_DEFAULT=480 . tools/cuda/call_prelude.sh
($B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out /tmp/synth-27b --quiet) &
($B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out /tmp/synth-ab35 --quiet) &
timeout -k 10 120 $B/mere_prefill_check --only gdn --json $OUT/gdn.json >$OUT/gdn.log 2>&1; rc=$?; echo "gdn rc=$rc $((SECONDS-t0))s"
grep -E "FAIL|checks|^gdn" $OUT/gdn.log | grep -vE "^ok" | head -20; pack
[ $rc -eq 0 ] && { MERE_CUDA_GDN_PREFILL=lazy timeout 100 $B/mere_engine_check . >$OUT/ec-lazy.log 2>&1
  echo "ec [lazy] rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec-lazy.log | head; pack; }
wait
if [ $rc -eq 0 ]; then
  left 200 && AB="MERE_CUDA_GDN_PREFILL=lazy;MERE_CUDA_GDN_PREFILL=recurrent" timeout 200 bash tools/cuda/engine_run.sh ab27; pack
  left 130 && AB="MERE_CUDA_GDN_PREFILL=lazy;MERE_CUDA_GDN_PREFILL=recurrent" timeout 130 bash tools/cuda/engine_run.sh ab35; pack
fi
echo "total $((SECONDS-t0))s"; pack
