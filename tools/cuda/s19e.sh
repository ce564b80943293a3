#!/usr/bin/env bash
# Session 19, fifth device call: the session's defaults measured as issue 6 / 7 ask (nothing in the
# default paths changed this session; gdn_prefill_lazy stays opt-in): 27B and 35B-A3B bench, 512-token
# prompt, 128 generated, 5 reps; 27B decode at 8,192 tokens of context; verify-bench at the 27B
# geometry with the group-integer mma (db4) and forced-depth parity 1, 4, 7. LIMIT (540).
LIMIT_DEFAULT=540 . tools/cuda/call_prelude.sh
export PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s19e
timeout 150 bash tools/cuda/engine_run.sh b35 2>&1 | grep -vE "^\[engine_run\] synth"; pack
left 330 && timeout 330 env MVS="mma" PARITY_DEPTHS=1,4,7 MERE_CUDA_GM=db4 bash tools/cuda/engine_run.sh b27 b27long vb27 2>&1 | grep -vE "^\[engine_run\] synth"; pack
echo "total $((SECONDS-t0))s"; pack
