#!/usr/bin/env bash
# NOT RUN (5 device starts refused); superseded by s21d.sh, which holds these steps.
# Session 21, third device call (after two refused starts):
#  * the prompt's SwiGLU inside the down projection's X preparation is now really the default
#    (MERE_CUDA_PREFILL_SWIGLU compared `== 0` with env_choice, which gives -1 when unset, so since
#    session 18 the fused form ran only when named);
#  * the ws GEMM's whole-tile grid (WsGrid::WholeTiles: each block the same number of whole tiles, no
#    stream-K partial sums), measured per shape and per group at the first prompt against stream-K;
#  * gdn_prefill_tc without its removed acc2 variant.
# Steps: prefill_check --only gdn (checks) and --only wgemm (checks incl. both grids + benches),
# engine_check on the defaults, ab27 / ab35 (defaults vs SWIGLU=separate vs WS_GROUP=off), b27 / b35
# (5 reps, defaults). LIMIT (300; the ncu profile of a 35B-A3B prompt was dropped: too little device time left).
LIMIT_DEFAULT=300 . tools/cuda/call_prelude.sh
timeout -k 10 60 $B/mere_prefill_check --only gdn --no-bench >$OUT/gdn.log 2>&1; echo "gdn rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/gdn.log | head -5
timeout -k 10 150 $B/mere_prefill_check --only wgemm --json $OUT/wgemm.json >$OUT/wgemm.log 2>&1; rc=$?; echo "wgemm rc=$rc $((SECONDS-t0))s"
grep -E "FAIL|checks|one launch" $OUT/wgemm.log | head -30; pack
[ $rc -ne 0 ] && { echo "checks failed: no engine runs"; exit 0; }
timeout 90 $B/mere_engine_check . >$OUT/ec.log 2>&1; echo "ec [defaults] rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec.log | head; pack
export PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s21c AB="MERE_CUDA_WS_GROUP=auto;MERE_CUDA_PREFILL_SWIGLU=separate;MERE_CUDA_WS_GROUP=off"
left 120 && timeout 130 bash tools/cuda/engine_run.sh ab27 b27 2>&1; pack
left 100 && timeout 130 bash tools/cuda/engine_run.sh ab35 b35 2>&1; pack
for j in $OUT/engine-*-s21c.json; do python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print(sys.argv[1], d['machine']['device'].split('prefill GEMMs')[-1])" $j; done

echo "total $((SECONDS-t0))s"; pack
