#!/usr/bin/env bash
# Ran in session 25 on an H100 (the H200 was not lent): bench/cuda/s25/h100-a; the block routing was removed, v2 became the default.
# Session 25's first device call (written in session 24, which had no device time left for it), on
# binaries rebuilt from HEAD (build/carry/bin.tar.xz: mere.run, mere_engine_check; the tree with
# models/ and tests/, bench/cuda/s6..s20 moved out to fit 64 MiB):
#  1. engine_check: its new pairs compare MERE_CUDA_MOE_ROUTE=block (the gate/up launch's whole block
#     routes by rank, k_moe.cu route_token_block) with the warp routing bitwise, on qwen35-moe-tiny
#     (16 experts, top-2) and a 4-layer 35B-A3B-geometry checkpoint (256 experts, top-8);
#  2. ab35 of MOE_ROUTE=fused (the default) vs block. Prediction (written before any run, from the
#     s24c trace: moe_gate_up 13.4 µs a launch in sequence, the routing ~2 µs of it while 7 warps
#     wait at the barrier): ~1.2 µs a layer, 35B-A3B decode +1.5-2%; 27B has no MoE;
#  3. MERE_CUDA_ATTN_COMBINE=v2 (the span merge with its factors computed once, bitwise v1; engine_check
#     pairs on qwen35-moe-tiny and the 0.8B geometry) in ab35 and ab27: predicted +1.4% / +0.8%
#     (docs/cuda-kernels.md §5.9b).
# Then s24d.sh (trace of issue 7's verification passes) and, if block wins, a trace35 under it
# (trace build; docs/cuda-engine.md "Kernel trace") to see the gate/up launch's new time. LIMIT 420.
LIMIT_DEFAULT=420 . tools/cuda/call_prelude.sh
timeout -k 10 150 $B/mere_engine_check . >$OUT/ec.log 2>&1; ec=$?
echo "ec rc=$ec $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec.log | head; pack
export PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s25a
[ $ec -eq 0 ] && left 130 && AB="MERE_CUDA_MOE_ROUTE=fused;MERE_CUDA_MOE_ROUTE=block;MERE_CUDA_ATTN_COMBINE=v2" \
  timeout 150 bash tools/cuda/engine_run.sh ab35 2>&1; pack
[ $ec -eq 0 ] && left 90 && AB="MERE_CUDA_ATTN_COMBINE=v1;MERE_CUDA_ATTN_COMBINE=v2" timeout 100 bash tools/cuda/engine_run.sh ab27 2>&1
echo "total $((SECONDS-t0))s"; pack
