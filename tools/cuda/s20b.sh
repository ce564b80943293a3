#!/usr/bin/env bash
# Session 20, second device call: gdn_prefill_tc with the tf32 splits as LOP3 + FADD (s20a, H100: the
# cvt.rna.tf32 splits made 1,266 instructions a 4-token block a warp, 176 µs vs c4's 141) and the first
# dot-product mma on a zero accumulator.
# Prediction (written before the run): ~480 instructions a block at ~0.55 issued a cycle -> ~55-65 µs
# at T = 512 (27B and 35B-A3B alike: one warp a scheduler either way); engine prefill +5-8% over c4.
#  * prefill_check gdn (checks + benches); the kernel's SASS; ncu of one 27B-shape launch (sections
#    and per-instruction stall samples); engine_check under tc; ab27 / ab35 tc vs c4 if tc is faster.
LIMIT_DEFAULT=560 . tools/cuda/call_prelude.sh
($B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out /tmp/synth-27b --quiet) &
timeout -k 10 90 $B/mere_prefill_check --only gdn --json $OUT/gdn.json >$OUT/gdn.log 2>&1; rc=$?; echo "gdn rc=$rc $((SECONDS-t0))s"
grep -E "FAIL|checks|^gdn" $OUT/gdn.log | grep -vE "^ok" | head -24; pack
tcbad=$(grep -c "FAIL.*gdn_prefill_tc" $OUT/gdn.log)
cuobjdump -sass $B/mere_prefill_check | awk '/Function : /{f=($0 ~ /gdn_prefill_tc_kernel/)} f' >$OUT/sass-tc.txt
echo "sass: $(wc -l <$OUT/sass-tc.txt) lines, $(grep -c HMMA $OUT/sass-tc.txt) HMMA"; pack
if [ "$tcbad" = 0 ]; then
  timeout -k 5 80 ncu --clock-control none -k regex:gdn_prefill_tc_kernel -s 5 -c 1 --section SpeedOfLight --section WarpStateStats \
    --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis $B/mere_prefill_check --only gdn --no-bench >$OUT/ncu-tc.txt 2>&1
  grep -E "Duration|Issued Warp|No Eligible|Warp Cycles Per Issued|Executed Instructions  |Registers Per|L1/TEX Hit|Bank" $OUT/ncu-tc.txt; pack
  timeout -k 5 80 ncu --clock-control none -k regex:gdn_prefill_tc_kernel -s 5 -c 1 --section WarpStateStats --section SourceCounters \
    --page source --print-source sass --csv $B/mere_prefill_check --only gdn --no-bench >$OUT/ncu-tc-src.csv 2>&1
  gzip -9 -f $OUT/ncu-tc-src.csv; pack
  MERE_CUDA_GDN_PREFILL=tc timeout 90 $B/mere_engine_check . >$OUT/ec-tc.log 2>&1; ectc=$?
  echo "ec [tc] rc=$ectc $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec-tc.log | head; pack
fi
wait
faster=$(awk '/^gdn_prefill_c4 Hk=16 Hv=48/{c=$5} /^gdn_prefill_tc Hk=16 Hv=48/{t=$5} END{print (t>0 && t<c)?1:0}' $OUT/gdn.log)
echo "tc faster than c4 at 27B: $faster"
if [ "$tcbad" = 0 ] && [ "${ectc:-1}" = 0 ] && [ "$faster" = 1 ]; then
  left 150 && AB="MERE_CUDA_GDN_PREFILL=tc;MERE_CUDA_GDN_PREFILL=c4" timeout 150 bash tools/cuda/engine_run.sh ab27; pack
  left 140 && AB="MERE_CUDA_GDN_PREFILL=tc;MERE_CUDA_GDN_PREFILL=c4" timeout 135 bash tools/cuda/engine_run.sh ab35; pack
fi
echo "total $((SECONDS-t0))s"; pack
