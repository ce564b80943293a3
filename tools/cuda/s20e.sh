#!/usr/bin/env bash
# Written in session 20 for its last device call, which never ran (too little device time was left to
# start a machine after failed starts); the next session's first call should run it: the defaults
# after gdn_prefill_tc became the GDN prefill form (MERE_CUDA_GDN_PREFILL unset; P = 1 warp a 16 rows
# at the 27B geometry, 4 at 35B-A3B by the launch's rule; s20c's kernel, s20d's look-ahead reverted).
# prefill_check gdn (checks + kernel benches), engine_check (its 0.8B-geometry check runs the rule's
# P = 4, not yet run on s20c's kernel in the engine), issue 6's benchmarks (27B and 35B-A3B, 512-token
# prompt, 128 generated, 5 reps), then an A/B of the default against c4 at both geometries. LIMIT (330).
LIMIT_DEFAULT=330 . tools/cuda/call_prelude.sh
timeout -k 10 60 $B/mere_prefill_check --only gdn --json $OUT/gdn.json >$OUT/gdn.log 2>&1; echo "gdn rc=$? $((SECONDS-t0))s"
grep -E "FAIL|checks|^gdn" $OUT/gdn.log | grep -vE "^ok" | head -24; pack
timeout 90 $B/mere_engine_check . >$OUT/ec.log 2>&1; echo "ec [defaults] rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec.log | head; pack
export PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s20e AB="MERE_CUDA_GDN_PREFILL=tc;MERE_CUDA_GDN_PREFILL=c4"
left 150 && timeout 150 bash tools/cuda/engine_run.sh b27 ab27 2>&1; pack
left 120 && timeout 120 bash tools/cuda/engine_run.sh b35 ab35 2>&1; pack
echo "total $((SECONDS-t0))s"; pack
