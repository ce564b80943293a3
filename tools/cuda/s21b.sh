#!/usr/bin/env bash
# Session 21, second device call: the grouped ws GEMM (wgemm_group: the matrices a layer multiplies by
# one X — 27B GDN qkv/z/b/a, attention q/k/v, gate/up; 35B-A3B shared gate/up — as ONE stream-K launch,
# chosen per set at the first prompt under MERE_CUDA_WS_GROUP=auto).
#  * prefill_check --only wgemm: every ws form incl. the group checks, then the benches (groups vs one
#    launch a matrix)
#  * engine_check on the defaults (grouping measured and on where faster)
#  * ab27 / ab35: MERE_CUDA_WS_GROUP=auto vs off, then b27 / b35 (5 reps) on the defaults
# LIMIT (420).
LIMIT_DEFAULT=420 . tools/cuda/call_prelude.sh
timeout -k 10 150 $B/mere_prefill_check --only wgemm --json $OUT/wgemm.json >$OUT/wgemm.log 2>&1; rc=$?; echo "wgemm rc=$rc $((SECONDS-t0))s"
grep -E "FAIL|checks|d2d|one launch|^wgemm_group" $OUT/wgemm.log | head -30; pack
[ $rc -ne 0 ] && { echo "checks failed: no engine runs"; exit 0; }
timeout 90 $B/mere_engine_check . >$OUT/ec.log 2>&1; echo "ec [defaults] rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec.log | head; pack
export PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s21b AB="MERE_CUDA_WS_GROUP=auto;MERE_CUDA_WS_GROUP=off"
left 150 && timeout 150 bash tools/cuda/engine_run.sh ab27 b27 2>&1; pack
left 110 && timeout 120 bash tools/cuda/engine_run.sh ab35 b35 2>&1; pack
for j in $OUT/engine-*-s21b.json; do python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print(sys.argv[1], d['machine']['device'].split('prefill GEMMs')[-1])" $j; done
echo "total $((SECONDS-t0))s"; pack
