#!/usr/bin/env bash
# Session 21, third device call: the prompt's SwiGLU inside the down projection's X preparation is now
# really the default (MERE_CUDA_PREFILL_SWIGLU compared `== 0` with env_choice, which gives -1 when
# unset, so since session 18 the fused form ran only when named), with s21b's grouped ws launches.
#  * prefill_check --only gdn (checks only: the tc kernel without its removed acc2 variant)
#  * engine_check on the defaults
#  * ab27 / ab35: PREFILL_SWIGLU fused (now the default) vs separate; b27 / b35 (5 reps) on the defaults
#  * ncupf35: ncu per-kernel times of one 35B-A3B prompt pass (where its time goes now)
# LIMIT (400).
LIMIT_DEFAULT=400 . tools/cuda/call_prelude.sh
timeout -k 10 60 $B/mere_prefill_check --only gdn --no-bench >$OUT/gdn.log 2>&1; echo "gdn rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/gdn.log | head -5
timeout 90 $B/mere_engine_check . >$OUT/ec.log 2>&1; echo "ec [defaults] rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec.log | head; pack
export PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s21c AB="MERE_CUDA_PREFILL_SWIGLU=fused;MERE_CUDA_PREFILL_SWIGLU=separate"
left 140 && timeout 140 bash tools/cuda/engine_run.sh ab27 b27 2>&1; pack
left 110 && timeout 120 bash tools/cuda/engine_run.sh ab35 b35 2>&1; pack
for j in $OUT/engine-*-s21c.json; do python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print(sys.argv[1], d['machine']['device'].split('prefill GEMMs')[-1])" $j; done
left 100 && timeout 110 bash tools/cuda/engine_run.sh ncupf35 2>&1 | head -40; rm -f $OUT/ncu-pf35.csv.gz; gzip -9 $OUT/ncu-pf35.csv 2>/dev/null
echo "total $((SECONDS-t0))s"; pack
