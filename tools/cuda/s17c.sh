#!/usr/bin/env bash
# Session 17, follow-up device call: ncu of one v6c (MERE_CUDA_WGEMM=wide) launch — the 27B gate/up at
# T = 512, the first large launch of prefill_check's wgemm checks (20 small wide launches before it) —
# speed of light, warp states, occupancy, memory. Binaries: build/carry/bin.tar.xz.
. tools/cuda/call_prelude.sh
timeout 240 ncu --clock-control none --kernel-name-base mangled -k regex:ILi256E -s ${SKIP:-20} -c 1 \
  --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
  --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
  $B/mere_prefill_check --only wgemm --no-bench >$OUT/ncu-wide.txt 2>&1; echo "ncu rc=$?"
grep -E "Duration|Throughput|Issued Warp|No Eligible|Warp Cycles Per Issued|Achieved Active|Registers Per|Stall|Grid Size|Pipe" $OUT/ncu-wide.txt | head -40
pack
