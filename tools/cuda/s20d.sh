#!/usr/bin/env bash
# Session 20, fourth device call: gdn_prefill_tc with a look-ahead. Block b's dot products come from
# E_b = R_{b-1} X_b (computed during block b - 1) plus a 3xTF32 m16n8k4 correction F_{b-1} G_b (G_b:
# the cross Gram entries of consecutive blocks, a new small kernel), so the chain from one block's d to
# the next is one small mma and the scalar recurrence; the update of R and the next E are off it. The
# renormalisation is folded into the update (R = fma(R, s, U)), so the loop body has no branch.
# s20c (H100): w1 132.8 µs at 27B, w4 105.7 at 35B-A3B, a ~1,800-cycle chain a block whatever P.
# Prediction (written before the run), T = 512: w1 45-60 µs, w2 40-55, w4 35-50 at both geometries.
#  * prefill_check gdn (checks of w1, w2, w4 + benches); SASS; engine_check under tc with the 27B's
#    fastest P; ab27 / ab35 with each geometry's fastest P vs c4; then issue 6's benchmarks (27B and
#    35B-A3B, 512-token prompt, 128 generated, 5 reps) with that tc (or, if tc fails or is slower, with
#    the defaults); ncu of the w2 launch if time is left. (Device starts kept failing this session, so
#    one call does all of it.)
LIMIT_DEFAULT=430 . tools/cuda/call_prelude.sh
($B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out /tmp/synth-27b --quiet) &
timeout -k 10 90 $B/mere_prefill_check --only gdn --json $OUT/gdn.json >$OUT/gdn.log 2>&1; rc=$?; echo "gdn rc=$rc $((SECONDS-t0))s"
grep -E "FAIL|checks|^gdn" $OUT/gdn.log | grep -vE "^ok" | head -24; pack
cuobjdump -sass $B/mere_prefill_check | awk '/Function : /{f=($0 ~ /gdn_prefill_tc_kernel/)} f' | gzip -9 >$OUT/sass-tc.txt.gz; pack
best() {  # fastest tc P at Hv = $1 if it beats c4 there, else 0
  awk -v hv="Hv=$1" '$1=="gdn_prefill_c4" && $3==hv {c=$5} $1=="gdn_prefill_tc" && $4==hv {if (b==0 || $6<b) {b=$6; w=$2}}
    END {sub("w","",w); print (b>0 && b<c) ? w : 0}' $OUT/gdn.log
}
w27=$(best 48); w35=$(best 32); echo "fastest tc beating c4: 27B w=$w27, 35B-A3B w=$w35"
if [ $rc = 0 ] && [ "$w27$w35" != 00 ]; then
  wc=$w27; [ "$wc" = 0 ] && wc=$w35
  MERE_CUDA_GDN_PREFILL=tc MERE_CUDA_GDN_TC_WARPS=$wc timeout 90 $B/mere_engine_check . >$OUT/ec-tc.log 2>&1; ectc=$?
  echo "ec [tc w$wc] rc=$ectc $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec-tc.log | head; pack
fi
wait
E27=; E35=; AB27=; AB35=
if [ "${ectc:-1}" = 0 ]; then
  [ "$w27" != 0 ] && E27="MERE_CUDA_GDN_PREFILL=tc MERE_CUDA_GDN_TC_WARPS=$w27" && AB27=ab27
  [ "$w35" != 0 ] && E35="MERE_CUDA_GDN_PREFILL=tc MERE_CUDA_GDN_TC_WARPS=$w35" && AB35=ab35
fi
echo "ab + receipts with [${E27:-defaults}] / [${E35:-defaults}]"
export PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s20d
left 240 && AB="$E27;MERE_CUDA_GDN_PREFILL=c4" env $E27 timeout 230 bash tools/cuda/engine_run.sh $AB27 b27 2>&1; pack
left 180 && AB="$E35;MERE_CUDA_GDN_PREFILL=c4" env $E35 timeout 180 bash tools/cuda/engine_run.sh $AB35 b35 2>&1; pack
if [ $rc = 0 ] && left 60; then
  timeout -k 5 55 ncu --clock-control none -k regex:gdn_prefill_tc_kernel -s 16 -c 1 --section SpeedOfLight --section WarpStateStats \
    --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats --section ComputeWorkloadAnalysis \
    $B/mere_prefill_check --only gdn --no-bench >$OUT/ncu-tc.txt 2>&1
  grep -E "Duration|Issued Warp|No Eligible|Warp Cycles Per Issued|Executed Instructions  |Registers Per|Block Size|Achieved Active" $OUT/ncu-tc.txt; pack
fi
echo "total $((SECONDS-t0))s"; pack
