#!/usr/bin/env bash
# Session 19, last device call: the defaults with gdn_prefill_c4 (MERE_CUDA_GDN_PREFILL=c4, the default
# from this session on; set here because these binaries predate the switch) as issue 6 asks: 27B and
# 35B-A3B bench, 512-token prompt, 128 generated, 5 reps. LIMIT (230).
LIMIT_DEFAULT=230 . tools/cuda/call_prelude.sh
export PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s19h MERE_CUDA_GDN_PREFILL=c4
timeout 130 bash tools/cuda/engine_run.sh b27 2>&1; pack
left 100 && timeout 100 bash tools/cuda/engine_run.sh b35 2>&1; pack
echo "total $((SECONDS-t0))s"; pack
