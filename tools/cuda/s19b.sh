#!/usr/bin/env bash
# Session 19, second device call: the lazy-decay GatedDeltaNet prefill (gdn_prefill_lazy, S = c R:
# three FMA passes a token instead of four, both dot products reduced together; prediction 27B ~85 µs
# vs 183, 35B-A3B ~60 vs 158 a layer at T = 512) and a profile of the width-8 verification matvec.
#  * prefill_check --only gdn: lazy and recurrent vs ops::gdn_step (incl. fast decay: the renorm path),
#    bench of both at the 27B / 35B-A3B shapes
#  * engine_check with MERE_CUDA_GDN_PREFILL=lazy; ab27 / ab35: lazy vs recurrent (512-token prompts)
#  * ncu of the group-integer mma matvec (db4) at [17408, 5120], T = 1 and T = 8: speed of light,
#    warp states, memory, scheduler sections; T = 8 with per-instruction stall samples
# LIMIT (520).
LIMIT_DEFAULT=520 . tools/cuda/call_prelude.sh
($B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out /tmp/synth-27b --quiet) &
($B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out /tmp/synth-ab35 --quiet) &
timeout -k 10 120 $B/mere_prefill_check --only gdn --json $OUT/gdn.json >$OUT/gdn.log 2>&1; rc=$?; echo "gdn rc=$rc $((SECONDS-t0))s"
grep -E "FAIL|checks|^gdn|lazy" $OUT/gdn.log | grep -vE "^ok" | head -20; pack
[ $rc -eq 0 ] && { MERE_CUDA_GDN_PREFILL=lazy timeout 100 $B/mere_engine_check . >$OUT/ec-lazy.log 2>&1
  echo "ec [lazy] rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec-lazy.log | head; pack; }
wait
V="MERE_CUDA_GDN_PREFILL=recurrent"; [ $rc -eq 0 ] && V="MERE_CUDA_GDN_PREFILL=lazy;$V"
left 200 && AB="$V" timeout 200 bash tools/cuda/engine_run.sh ab27; pack
left 130 && AB="$V" timeout 130 bash tools/cuda/engine_run.sh ab35; pack
for s in 1 7; do  # launch 1 = T = 1, launch 7 = T = 8 (profile_launches)
  left 60 && MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=db4 timeout 60 ncu --clock-control none -k regex:qmatvec_gmma -s $s -c 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
    --section MemoryWorkloadAnalysis --section LaunchStats $B/mere_cuda_check --ncu >$OUT/ncu-gm-s$s.txt 2>&1
  grep -E "Duration|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Issued Warp|No Eligible|Warp Cycles Per Issued|Achieved Active|Registers Per|Block Limit" $OUT/ncu-gm-s$s.txt
done; pack
left 60 && MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=db4 timeout 60 ncu --clock-control none -k regex:qmatvec_gmma -s 7 -c 1 \
  --section WarpStateStats --section SourceCounters --page source --print-source sass --csv $B/mere_cuda_check --ncu \
  >$OUT/ncu-gm-src8.csv 2>&1; gzip -9 -f $OUT/ncu-gm-src8.csv
echo "total $((SECONDS-t0))s"; pack
