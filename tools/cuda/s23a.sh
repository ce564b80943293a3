#!/usr/bin/env bash
# Session 23's first device call (written in session 22, which had no device time left): on binaries
# rebuilt from HEAD —
#  1. the persistent MoE weight stream (moe_stream v2e, MERE_CUDA_MOE_STREAM=chain|chain3, opt-in, never
#     run): `mere_prefill_check --only moe` (each bitwise the register kernel, then every variant at the
#     35B-A3B shapes), engine_check with chain, ab35 tight vs chain vs chain3;
#  2. where a decode step's time goes now (session 22's unrun s22d.sh): ncu per-kernel times of one
#     1-token step at the 27B and 35B-A3B geometries with warm caches (NCU_CACHE=none), no graph;
#  3. ncu of one attention_prefill_tc launch at the 27B heads (stall reasons, for its next version).
# If chain or chain3 passes and wins ab35, make it the default (engine_prefill.cpp moe_stream_loads). LIMIT 480.
LIMIT_DEFAULT=480 . tools/cuda/call_prelude.sh
timeout -k 10 90 $B/mere_prefill_check --only moe --json $OUT/moe.json >$OUT/moe.log 2>&1; rc=$?; echo "moe rc=$rc $((SECONDS-t0))s"
grep -E "FAIL|checks|moe_stream.*E=256" $OUT/moe.log | head -30; pack
if [ $rc -eq 0 ]; then
  MERE_CUDA_MOE_STREAM=chain timeout 70 $B/mere_engine_check . >$OUT/ec-chain.log 2>&1; echo "ec [chain] rc=$? $((SECONDS-t0))s"
  grep -E "FAIL|checks" $OUT/ec-chain.log | head; pack
  PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s23a AB="MERE_CUDA_MOE_STREAM=tight;MERE_CUDA_MOE_STREAM=chain;MERE_CUDA_MOE_STREAM=chain3" \
    timeout 130 bash tools/cuda/engine_run.sh ab35 2>&1; pack
fi
export PROMPT=64 GEN=16 NOGRAPH= TAG=s23a-ncu NCU_CACHE=none
left 100 && timeout 110 bash tools/cuda/engine_run.sh b27 2>&1 | grep -v "^memory"; pack
left 80 && timeout 90 bash tools/cuda/engine_run.sh b35 2>&1 | grep -v "^memory"; pack
left 25 && { timeout 25 ncu --clock-control none -k regex:attention_prefill_tc -s 2 -c 1 --section SpeedOfLight --section WarpStateStats \
  --section SchedulerStats --section Occupancy $B/mere_prefill_check --only attn >$OUT/ncu-attn-tc.txt 2>&1
  grep -E "Duration|Issued Warp|Warp Cycles Per Issued|Achieved Active|Registers Per" $OUT/ncu-attn-tc.txt | head; pack; }
echo "total $((SECONDS-t0))s"; pack
