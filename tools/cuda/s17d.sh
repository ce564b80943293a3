#!/usr/bin/env bash
# Session 17: stall reasons of one v6c (MERE_CUDA_WGEMM=wide) launch, the 27B gate/up at T = 512 (the 21st
# wide launch of prefill_check's wgemm checks): pc-sampled stall reasons over the launch and per
# instruction (SASS with its samples). Binaries: build/carry/bin.tar.xz.
. tools/cuda/call_prelude.sh
A="--clock-control none --kernel-name-base mangled -k regex:ILi256E -s ${SKIP:-20} -c 1"
timeout 200 ncu $A --metrics regex:smsp__pcsamp_warps_issue_stalled_.* \
  $B/mere_prefill_check --only wgemm --no-bench >$OUT/ncu-wide-stalls.txt 2>&1; echo "ncu rc=$?"
SKIP=${SKIP:-20} timeout 200 ncu $A --section SourceCounters --page source --print-source sass --csv \
  $B/mere_prefill_check --only wgemm --no-bench >$OUT/ncu-wide-src.csv 2>&1; echo "ncu src rc=$?"
grep -E "stalled" $OUT/ncu-wide-stalls.txt | sort -k3 -n -r | head -30
pack
