#!/usr/bin/env bash
# Session 20, last device call: the defaults after gdn_prefill_tc became the GDN prefill form
# (MERE_CUDA_GDN_PREFILL unset): engine_check, then issue 6's benchmarks, 27B and 35B-A3B, 512-token
# prompt, 128 generated, 5 reps (memory peak included). LIMIT (330).
LIMIT_DEFAULT=330 . tools/cuda/call_prelude.sh
timeout 90 $B/mere_engine_check . >$OUT/ec.log 2>&1; echo "ec [defaults] rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec.log | head; pack
export PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s20e
left 130 && timeout 130 bash tools/cuda/engine_run.sh b27 2>&1; pack
left 100 && timeout 100 bash tools/cuda/engine_run.sh b35 2>&1; pack
echo "total $((SECONDS-t0))s"; pack
