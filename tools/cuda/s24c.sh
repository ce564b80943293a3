#!/usr/bin/env bash
# Session 24's third device call: (1) the in-sequence kernel trace (trace build of mere.run, carried
# as build/carry/trace.tar.xz; kernel_trace.h) of 32 decode steps at the 27B and 35B-A3B geometries,
# beside the normal binary's no-graph and graph rates; (2) the receipts with MERE_CUDA_MV_TUNE=2 as
# the default (512-token prompt, 128 generated, 5 reps). LIMIT 330.
LIMIT_DEFAULT=330 . tools/cuda/call_prelude.sh
export BT=build/trace-carry; mkdir -p $BT; tar xJf build/carry/trace.tar.xz -C $BT
export KEEP35=1
left 90 && { timeout 100 bash tools/cuda/engine_run.sh trace35 2>&1; pack; }
left 90 && { timeout 100 bash tools/cuda/engine_run.sh trace27 2>&1; pack; }
export PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s24c
left 60 && { timeout 70 bash tools/cuda/engine_run.sh b35 2>&1 | tail -3; pack; }
left 60 && { timeout 70 bash tools/cuda/engine_run.sh b27 2>&1 | tail -3; pack; }
echo "total $((SECONDS-t0))s"; pack
