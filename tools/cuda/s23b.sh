#!/usr/bin/env bash
# Session 23, second call (the warm machine of s23a, the same binaries): session 22's planned decode
# profile — ncu per-kernel times of one 1-token step at the 27B and 35B-A3B geometries with warm caches
# (NCU_CACHE=none), no graph — and ncu of one attention_prefill_tc launch at the 27B heads. LIMIT 300.
LIMIT_DEFAULT=300 . tools/cuda/call_prelude.sh
export PROMPT=64 GEN=16 NOGRAPH= TAG=s23b-ncu NCU_CACHE=none
left 100 && timeout 110 bash tools/cuda/engine_run.sh b27 2>&1 | grep -v "^memory"; pack
left 80 && timeout 90 bash tools/cuda/engine_run.sh b35 2>&1 | grep -v "^memory"; pack
left 25 && { timeout 25 ncu --clock-control none -k regex:attention_prefill_tc -s 2 -c 1 --section SpeedOfLight --section WarpStateStats \
  --section SchedulerStats --section Occupancy $B/mere_prefill_check --only attn >$OUT/ncu-attn-tc.txt 2>&1
  grep -E "Duration|Issued Warp|Warp Cycles Per Issued|Achieved Active|Registers Per" $OUT/ncu-attn-tc.txt | head; pack; }
echo "total $((SECONDS-t0))s"; pack
