#!/usr/bin/env bash
# Session 28: ncu inside the 27B width-8 verification passes (NVTX "mere.forward T=8/"), group-integer
# matvec with the per-width shapes (MERE_CUDA_QMATVEC=mma): conv_gdn_prepare (sections, then the
# per-instruction stall samples), gdn_decode (sections), and the gate + up launch of the matvec
# (2 x 17408 rows: 272 blocks, 1.03 waves; sections). Carried: the tree's mere.run. LIMIT 220.
LIMIT_DEFAULT=${LIMIT:-220} . tools/cuda/call_prelude.sh
export D27=/tmp/synth-27b
$B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet
SEC="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats"
prof() {  # prof TAG KERNEL_RE SKIP EXTRA...
  local tag=$1 k=$2 s=$3; shift 3
  left 30 && MERE_CUDA_QMATVEC=mma MERE_CUDA_MV_TUNE=0 MERE_CUDA_GRAPH=0 timeout 90 ncu --clock-control none --nvtx \
    --nvtx-include "mere.forward T=8/" -k regex:$k -s $s -c 1 "$@" $B/mere.run model verify-bench --model $D27 --backend cuda \
    --widths 8 --prompt-tokens 128 --passes 2 --reps 1 --quiet >$OUT/ncu-$tag 2>&1
  echo "== $tag rc=$? $((SECONDS-t0))s"
}
prof conv.txt conv_gdn_prepare 4 $SEC
grep -E "Duration|DRAM Throughput|Executed Ipc|Issued Warp|No Eligible|Warp Cycles Per Issued|Achieved Active|Registers Per|Grid Size|Block Size|Theoretical Occ" $OUT/ncu-conv.txt | head -14; pack
prof gdn.txt gdn_decode 4 $SEC
grep -E "Duration|DRAM Throughput|Executed Ipc|Issued Warp|No Eligible|Warp Cycles Per Issued|Achieved Active|Registers Per|Grid Size|Block Size|Theoretical Occ" $OUT/ncu-gdn.txt | head -14; pack
prof gateup.txt qmatvec_gmma 2 $SEC
grep -E "Duration|DRAM Throughput|Executed Ipc|Issued Warp|No Eligible|Warp Cycles Per Issued|Achieved Active|Registers Per|Grid Size|Waves" $OUT/ncu-gateup.txt | head -14; pack
prof conv-src.csv conv_gdn_prepare 4 --section WarpStateStats --section SourceCounters --page source --print-source sass --csv
gzip -f $OUT/ncu-conv-src.csv; rm -rf $D27; echo "total $((SECONDS-t0))s"; pack
