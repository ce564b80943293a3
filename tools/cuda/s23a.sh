#!/usr/bin/env bash
# Session 23's first device call (ran on binaries of 37c586e, raw bench/cuda/s23/h100-a):
#  1. the persistent MoE weight stream (moe_stream v2e, MERE_CUDA_MOE_STREAM=chain|chain3, written in
#     session 22, never run): `mere_prefill_check --only moe` (each bitwise the register kernel, then
#     every variant benched at the 35B-A3B shapes);
#  2. engine_check on the defaults, which now include the prefill glue (MERE_CUDA_PREFILL_GLUE=fused:
#     the norms / gated norm / sigmoid gate write the GEMMs' bf16 X, one MoE combine launch) and its new
#     bitwise pairs against =separate;
#  3. ab35: glue separate (= session 22's defaults) vs the defaults vs chain vs chain3; ab27: glue
#     separate vs fused; engine_check under chain if it passed its kernel checks.
# Session 22's planned decode profile moves to s23b.sh. LIMIT 500.
LIMIT_DEFAULT=500 . tools/cuda/call_prelude.sh
timeout -k 10 90 $B/mere_prefill_check --only moe --json $OUT/moe.json >$OUT/moe.log 2>&1; moe=$?; echo "moe rc=$moe $((SECONDS-t0))s"
grep -E "FAIL|checks|moe_stream.*E=256" $OUT/moe.log | head -30; pack
timeout -k 10 75 $B/mere_engine_check . >$OUT/ec.log 2>&1; ec=$?; echo "ec [defaults] rc=$ec $((SECONDS-t0))s"
grep -E "FAIL|checks|glue" $OUT/ec.log | head; pack
[ $ec -ne 0 ] && { echo "engine_check failed: no engine runs"; exit 0; }
export PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s23a
AB="MERE_CUDA_PREFILL_GLUE=separate;MERE_CUDA_PREFILL_GLUE=fused"
[ $moe -eq 0 ] && AB="$AB;MERE_CUDA_MOE_STREAM=chain;MERE_CUDA_MOE_STREAM=chain3"
AB=$AB left 150 && AB=$AB timeout 170 bash tools/cuda/engine_run.sh ab35 2>&1; pack
AB="MERE_CUDA_PREFILL_GLUE=separate;MERE_CUDA_PREFILL_GLUE=fused" left 110 && \
  AB="MERE_CUDA_PREFILL_GLUE=separate;MERE_CUDA_PREFILL_GLUE=fused" timeout 120 bash tools/cuda/engine_run.sh ab27 2>&1; pack
if [ $moe -eq 0 ] && left 75; then
  MERE_CUDA_MOE_STREAM=chain timeout 70 $B/mere_engine_check . >$OUT/ec-chain.log 2>&1; echo "ec [chain] rc=$? $((SECONDS-t0))s"
  grep -E "FAIL|checks" $OUT/ec-chain.log | head; pack
fi
echo "total $((SECONDS-t0))s"; pack
