#!/usr/bin/env bash
# Session 23, third call: s23a measured the prefill glue +1.6% at 35B-A3B but -0.7% at 27B. On binaries
# with the norm's bf16 X now stored as one 8-byte store a lane (lane pairs exchange halves) instead of
# four 2-byte stores, and a third form MERE_CUDA_PREFILL_GLUE=combine (only the one-launch MoE combine):
# engine_check on the defaults, ab35 / ab27 of separate vs fused vs combine, then ncu per-kernel times
# of one 27B prompt pass under fused and separate (where the 27B time goes). LIMIT 420.
LIMIT_DEFAULT=420 . tools/cuda/call_prelude.sh
timeout -k 10 75 $B/mere_engine_check . >$OUT/ec.log 2>&1; ec=$?; echo "ec [defaults] rc=$ec $((SECONDS-t0))s"
grep -E "FAIL|checks|glue" $OUT/ec.log | head; pack
[ $ec -ne 0 ] && { echo "engine_check failed: no engine runs"; exit 0; }
export PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s23c AB="MERE_CUDA_PREFILL_GLUE=separate;MERE_CUDA_PREFILL_GLUE=fused;MERE_CUDA_PREFILL_GLUE=combine"
left 100 && timeout 110 bash tools/cuda/engine_run.sh ab35 2>&1; pack
left 90 && timeout 100 bash tools/cuda/engine_run.sh ab27 2>&1; pack
for g in fused separate; do
  left 50 && { MERE_CUDA_PREFILL_GLUE=$g timeout 60 bash tools/cuda/engine_run.sh ncupf27 >/dev/null 2>&1
    mv $OUT/ncu-pf27.csv $OUT/ncu-pf27-$g.csv; mv $OUT/ncu-pf27-summary.txt $OUT/ncu-pf27-$g-summary.txt
    head -14 $OUT/ncu-pf27-$g-summary.txt; gzip -f $OUT/ncu-pf27-$g.csv; pack; }
done
echo "total $((SECONDS-t0))s"; pack
