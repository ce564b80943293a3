#!/usr/bin/env bash
# Session 19, seventh device call: gdn_prefill_c4 (4 tokens an exchange: one reduction of 4 tokens'
# dot products, a 4 x 4 triangular recurrence a row from the tokens' Gram entries) and engine_check
# with MERE_CUDA_QMATVEC=mma after the prefill GEMM choice's fix (s19f: a tiled dense matrix of a shape
# measured on an MLX expert went to the ws GEMM and threw, 2 checks of qwen35-moe-tiny).
# Prediction (written before the run): c4 ~95-105 µs at 27B (v1 181), ~70 at 35B-A3B (v1 156).
#  * prefill_check --only gdn; engine_check [mma db4]; engine_check [c4]; ab27 / ab35: c4 vs recurrent
# LIMIT (390).
LIMIT_DEFAULT=390 . tools/cuda/call_prelude.sh
($B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out /tmp/synth-27b --quiet) &
timeout -k 10 60 $B/mere_prefill_check --only gdn --json $OUT/gdn.json >$OUT/gdn.log 2>&1; rc=$?; echo "gdn rc=$rc $((SECONDS-t0))s"
grep -E "FAIL|checks|^gdn" $OUT/gdn.log | grep -vE "^ok" | head -20; pack
MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=db4 timeout 60 $B/mere_engine_check . >$OUT/ec-mma.log 2>&1
echo "ec [mma db4] rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec-mma.log | head; pack
[ $rc -eq 0 ] && { MERE_CUDA_GDN_PREFILL=c4 timeout 60 $B/mere_engine_check . >$OUT/ec-c4.log 2>&1
  echo "ec [c4] rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec-c4.log | head; pack; }
wait
if [ $rc -eq 0 ]; then
  left 150 && AB="MERE_CUDA_GDN_PREFILL=c4;MERE_CUDA_GDN_PREFILL=recurrent" timeout 150 bash tools/cuda/engine_run.sh ab27; pack
  left 140 && AB="MERE_CUDA_GDN_PREFILL=c4;MERE_CUDA_GDN_PREFILL=recurrent" timeout 135 bash tools/cuda/engine_run.sh ab35; pack
fi
echo "total $((SECONDS-t0))s"; pack
