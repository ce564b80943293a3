#!/usr/bin/env bash
# Session 22, third device call: prefill attention on the tensor cores (attention_prefill_tc, now the
# engine's default; MERE_CUDA_ATTN_PREFILL=simt restores the SIMT kernel): `mere_prefill_check --only
# attn` (both kernels against ops::attention, the tc kernel twice bitwise, then both at the 27B and
# 35B-A3B heads), engine_check on the defaults, ab27 / ab35 (tc vs simt), the 5-rep receipts b27 / b35,
# and ncu of a 35B-A3B prompt (where its time goes now). LIMIT 400.
LIMIT_DEFAULT=400 . tools/cuda/call_prelude.sh
timeout -k 10 120 $B/mere_prefill_check --only attn --json $OUT/attn.json >$OUT/attn.log 2>&1; rc=$?; echo "attn rc=$rc $((SECONDS-t0))s"
grep -E "FAIL|checks|attention_prefill.*nh=" $OUT/attn.log | grep -v "^ok" | head -30; grep -E "^ok.*tc.*512" $OUT/attn.log | head -4; pack
[ $rc -ne 0 ] && { grep -E "FAIL" $OUT/attn.log | head; echo "checks failed: no engine runs"; exit 0; }
timeout 70 $B/mere_engine_check . >$OUT/ec.log 2>&1; echo "ec [defaults: attention tc] rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec.log | head; pack
export PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s22c AB="MERE_CUDA_ATTN_PREFILL=tc;MERE_CUDA_ATTN_PREFILL=simt"
left 120 && timeout 130 bash tools/cuda/engine_run.sh ab27 b27 2>&1; pack
left 90 && timeout 100 bash tools/cuda/engine_run.sh ab35 2>&1; pack
left 50 && timeout 60 bash tools/cuda/engine_run.sh b35 2>&1; pack
left 60 && { timeout $((LIMIT - (SECONDS - t0) - 5)) bash tools/cuda/engine_run.sh ncupf35 2>&1 | head -25; pack; }
echo "total $((SECONDS-t0))s"; pack
