#!/usr/bin/env bash
# Session 20, first device call:
#  * e9cf442's two refactors, compiled but never run on a GPU (the prefill engine's one GDN form +
#    scratch; prefill_check's one run/check helper): engine_check with the defaults, prefill_check gdn;
#  * gdn_prefill_tc (c4's math with the 4-token blocks' dot products and update as 3xTF32 mma.sync, a
#    warp a 16 rows): prefill_check gdn (vs ops::gdn_step, guard words), engine_check under it, and if
#    both pass an engine A/B against c4 at the 27B and 35B-A3B geometries, then ncu of one launch.
# Prediction (written before the run): tc ~45-60 µs at T = 512 for both geometries (c4 140 / 139 µs on
# an H200), 27B prefill +5-6%, 35B-A3B +7-8% over c4.
LIMIT_DEFAULT=560 . tools/cuda/call_prelude.sh
($B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out /tmp/synth-27b --quiet) &
timeout -k 10 90 $B/mere_prefill_check --only gdn --json $OUT/gdn.json >$OUT/gdn.log 2>&1; rc=$?; echo "gdn rc=$rc $((SECONDS-t0))s"
grep -E "FAIL|checks|^gdn" $OUT/gdn.log | grep -vE "^ok" | head -24; pack
tcbad=$(grep -c "FAIL.*gdn_prefill_tc" $OUT/gdn.log)
timeout 90 $B/mere_engine_check . >$OUT/ec.log 2>&1; echo "ec [defaults] rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec.log | head; pack
[ "$tcbad" = 0 ] && { MERE_CUDA_GDN_PREFILL=tc timeout 90 $B/mere_engine_check . >$OUT/ec-tc.log 2>&1; ectc=$?
  echo "ec [tc] rc=$ectc $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec-tc.log | head; pack; }
wait
if [ "$tcbad" = 0 ] && [ "${ectc:-1}" = 0 ]; then
  left 150 && AB="MERE_CUDA_GDN_PREFILL=tc;MERE_CUDA_GDN_PREFILL=c4" timeout 150 bash tools/cuda/engine_run.sh ab27; pack
  left 140 && AB="MERE_CUDA_GDN_PREFILL=tc;MERE_CUDA_GDN_PREFILL=c4" timeout 135 bash tools/cuda/engine_run.sh ab35; pack
fi
if [ "$tcbad" = 0 ] && left 90; then
  timeout -k 5 80 ncu --clock-control none -k regex:gdn_prefill_tc_kernel -s 5 -c 1 --section SpeedOfLight --section WarpStateStats \
    --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats --section ComputeWorkloadAnalysis \
    $B/mere_prefill_check --only gdn --no-bench >$OUT/ncu-tc.txt 2>&1
  grep -E "Duration|Issued Warp|No Eligible|Warp Cycles Per Issued|Achieved Active|Registers Per|Executed Ipc|Block Limit" $OUT/ncu-tc.txt; pack
fi
echo "total $((SECONDS-t0))s"; pack
