#!/usr/bin/env bash
# Session 21, the last planned device call — NOT RUN: after 6 refused starts too little device time
# was left to start a machine. The next session should run it first (on binaries rebuilt from HEAD):
# the checks of the whole-tile grid (MERE_CUDA_WS_GRID=auto, opt-in until this runs) and of
# gdn_prefill_tc without acc2, engine_check on the defaults (the SwiGLU fused default and the grouped
# ws launches, whose engine_check has not run: s21b ran it before the env fix), ab27 (WS_GRID=auto vs
# SWIGLU=separate vs WS_GRID=streamk) ab35 (the same) and the 5-rep b27 / b35 receipts. LIMIT (400).
LIMIT_DEFAULT=400 . tools/cuda/call_prelude.sh
timeout -k 10 60 $B/mere_prefill_check --only gdn --no-bench >$OUT/gdn.log 2>&1; echo "gdn rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/gdn.log | head -5
timeout -k 10 90 $B/mere_prefill_check --only wgemm --json $OUT/wgemm.json >$OUT/wgemm.log 2>&1; rc=$?; echo "wgemm rc=$rc $((SECONDS-t0))s"
grep -E "FAIL|checks|one launch" $OUT/wgemm.log | head -30; pack
[ $rc -ne 0 ] && { echo "checks failed: no engine runs"; exit 0; }
timeout 60 $B/mere_engine_check . >$OUT/ec.log 2>&1; echo "ec [defaults] rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec.log | head; pack
export PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s21d AB="MERE_CUDA_WS_GRID=auto;MERE_CUDA_PREFILL_SWIGLU=separate;MERE_CUDA_WS_GRID=streamk"
left 130 && timeout 140 bash tools/cuda/engine_run.sh ab27 b27 2>&1; pack
left 120 && timeout 130 bash tools/cuda/engine_run.sh ab35 b35 2>&1; pack
for j in $OUT/engine-*-s21d.json; do python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print(sys.argv[1], d['machine']['device'].split('prefill GEMMs')[-1])" $j; done
echo "total $((SECONDS-t0))s"; pack
