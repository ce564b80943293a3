#!/usr/bin/env bash
# Session 19, seventh device call: engine_check with MERE_CUDA_QMATVEC=mma after the fix of the prefill
# GEMM choice (s19f: a tiled dense matrix of a shape measured on an MLX expert went to the ws GEMM and
# threw, 2 checks of qwen35-moe-tiny) and on the defaults; then the session's defaults as issue 6 asks:
# 35B-A3B and 27B bench, 512-token prompt, 128 generated, 5 reps. LIMIT (520).
LIMIT_DEFAULT=520 . tools/cuda/call_prelude.sh
MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=db4 timeout 100 $B/mere_engine_check . >$OUT/ec-mma.log 2>&1
echo "ec [mma db4] rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec-mma.log | head; pack
timeout 100 $B/mere_engine_check . >$OUT/ec.log 2>&1
echo "ec [defaults] rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec.log | head; pack
export PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s19g
left 300 && timeout 150 bash tools/cuda/engine_run.sh b35 2>&1; pack
left 150 && timeout 150 bash tools/cuda/engine_run.sh b27 2>&1; pack
echo "total $((SECONDS-t0))s"; pack
