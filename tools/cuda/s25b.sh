#!/usr/bin/env bash
# Session 25's second device call, on binaries of the working tree with MERE_CUDA_MOE_BLOCK
# (build/carry/bin.tar.xz: mere.run, mere_engine_check; the tree with models/ and tests/):
#  1. engine_check: its new pairs compare MERE_CUDA_MOE_BLOCK=on (a decode step's MoE half as one
#     launch with two grid barriers, k_moe_block.cu) with the default launches bitwise, on
#     qwen35-moe-tiny and the 4-layer 35B-A3B-geometry checkpoint (decode, verification, MTP head);
#  2. ab35 of MOE_BLOCK off / on. Prediction (written before any run, from the s24c trace: 31 µs a
#     MoE layer in four launches, ~14-18 µs as one): 35B-A3B decode +20-30% (0.5-0.7 ms of 2.5).
# A hang (a barrier that never opens) ends at the timeouts. LIMIT 330.
LIMIT_DEFAULT=330 . tools/cuda/call_prelude.sh
timeout -k 10 150 $B/mere_engine_check . >$OUT/ec.log 2>&1; ec=$?
echo "ec rc=$ec $((SECONDS-t0))s"; grep -E "FAIL|checks|MoE block" $OUT/ec.log | head -20; pack
export PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s25b
[ $ec -eq 0 ] && left 120 && AB="MERE_CUDA_MOE_BLOCK=off;MERE_CUDA_MOE_BLOCK=on" \
  timeout -k 10 150 bash tools/cuda/engine_run.sh ab35 2>&1
echo "total $((SECONDS-t0))s"; pack
