#!/usr/bin/env bash
# Session 22, first device call: session 21's planned s21d.sh (which never ran: 6 refused starts; it is
# removed, this holds its steps) on
# binaries of session 22 — the checks of the whole-tile grid (MERE_CUDA_WS_GRID=auto, opt-in until
# this runs) and of gdn_prefill_tc without acc2, engine_check on the defaults (the fused SwiGLU and
# the grouped ws launches), ab27 / ab35 (WS_GRID=auto vs SWIGLU=separate vs WS_GRID=streamk) and the
# 5-rep b27 / b35 receipts — then the routed experts: `mere_prefill_check --only moe` and ncu of one
# moe_stream_tight launch of each kind at the 35B-A3B shapes (speed of light, warp states, memory,
# per-instruction stall samples): where the 45-55% of copy that moe_stream reaches goes. LIMIT 480.
LIMIT_DEFAULT=480 . tools/cuda/call_prelude.sh
timeout -k 10 60 $B/mere_prefill_check --only gdn --no-bench >$OUT/gdn.log 2>&1; echo "gdn rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/gdn.log | head -5
timeout -k 10 90 $B/mere_prefill_check --only wgemm --json $OUT/wgemm.json >$OUT/wgemm.log 2>&1; rc=$?; echo "wgemm rc=$rc $((SECONDS-t0))s"
grep -E "FAIL|checks|one launch" $OUT/wgemm.log | head -30; pack
[ $rc -ne 0 ] && { echo "checks failed: no engine runs"; exit 0; }
timeout 60 $B/mere_engine_check . >$OUT/ec.log 2>&1; echo "ec [defaults] rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec.log | head; pack
export PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s22a AB="MERE_CUDA_WS_GRID=auto;MERE_CUDA_PREFILL_SWIGLU=separate;MERE_CUDA_WS_GRID=streamk"
left 130 && timeout 140 bash tools/cuda/engine_run.sh ab27 b27 2>&1; pack
left 120 && timeout 130 bash tools/cuda/engine_run.sh ab35 b35 2>&1; pack
for j in $OUT/engine-*-s22a.json; do python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print(sys.argv[1], d['machine']['device'].split('prefill GEMMs')[-1])" $j; done
if left 60; then
  for k in "true" "false"; do  # gate_up + SwiGLU, then down; the 4th launch (after the bench's 3 warm-ups)
    timeout 50 ncu --clock-control none --kernel-name-base demangled -k "regex:moe_stream_tight_kernel<$k>" -s 3 -c 1 \
      --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section MemoryWorkloadAnalysis \
      --section SourceCounters --page details --print-details all $B/mere_prefill_check --only moe >$OUT/ncu-moe-$k.txt 2>&1
    grep -E "Duration|DRAM Throughput|Issued Warp|No Eligible|Warp Cycles Per Issued|Achieved Active|Registers Per" $OUT/ncu-moe-$k.txt
  done; pack
fi
left 40 && { timeout 40 ncu --clock-control none --kernel-name-base demangled -k "regex:moe_stream_tight_kernel<true>" -s 3 -c 1 \
  --section WarpStateStats --section SourceCounters --page source --print-source sass --csv $B/mere_prefill_check --only moe \
  >$OUT/ncu-moe-src.csv 2>&1; gzip -f $OUT/ncu-moe-src.csv; pack; }
echo "total $((SECONDS-t0))s"; pack
