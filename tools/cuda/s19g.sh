#!/usr/bin/env bash
# Session 19, seventh device call: engine_check with MERE_CUDA_QMATVEC=mma after the fix of the prefill
# GEMM choice (s19f: a tiled dense matrix of a shape measured on an MLX expert went to the ws GEMM and
# threw, 2 checks of qwen35-moe-tiny) and on the defaults (the benches were dropped: two failed starts
# left too little device time; no default path changed this session). LIMIT (200).
LIMIT_DEFAULT=200 . tools/cuda/call_prelude.sh
MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=db4 timeout 100 $B/mere_engine_check . >$OUT/ec-mma.log 2>&1
echo "ec [mma db4] rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec-mma.log | head; pack
timeout 100 $B/mere_engine_check . >$OUT/ec.log 2>&1
echo "ec [defaults] rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec.log | head; pack
echo "total $((SECONDS-t0))s"; pack
