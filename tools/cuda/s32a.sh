#!/usr/bin/env bash
# Session 32's 2nd call (mere.run, mere_cuda_check, mere_engine_check: `tools/cuda/make_carry.sh`;
# bench/ aside, both bundled models and tests/data/mtp travel):
#  1. checks: cuda_check's gdn phase (with the new producer-parts check: swiglu_prep / rms_norm_prep
#     write only the integer part, bitwise qmatvec_prepare's); engine_check's MoE sections (the new
#     MERE_CUDA_MOE_NORM=separate pairs: norm + router in one launch, bitwise) and the 0.8B geometry;
#  2. 35B-A3B decode: norm + router in one launch (default) vs MERE_CUDA_MOE_NORM=separate, alternating;
#  3. 27B decode: the producers writing the integer part only with 4 lanes a group and small blocks
#     (default) vs MERE_CUDA_PREP_PARTS=all (every part, 8 lanes) vs MERE_CUDA_PREP_THREADS=256.
# Ran once (LIMIT=500, H100): bench/cuda/s32/h100-b, with 64-thread producer blocks as that tree's default;
# they measured the same as 256 and were removed with their switch (this tree ignores MERE_CUDA_PREP_THREADS).
CARRY=build/carry/bin.tar.xz LIMIT_DEFAULT=${LIMIT:-480} . tools/cuda/call_prelude.sh
timeout -k 5 40 $B/mere_cuda_check --only gdn --no-bench >$OUT/cc-gdn.log 2>&1; echo "cuda_check gdn rc=$?"
grep -hE "checks:|FAIL|producer" $OUT/cc-gdn.log | head -12
for sec in qwen35-moe-tiny "35b-a3b geometry" "0.8b geometry"; do
  left 60 || break
  f=$OUT/ec-$(echo $sec | tr ' .' '__').log
  timeout -k 5 150 $B/mere_engine_check . "$sec" >$f 2>&1
  echo "engine_check '$sec' rc=$? $((SECONDS-t0))s"; grep -E "FAIL|engine_check:|MOE_NORM" $f | cut -c1-200 | head -8
done; pack
D35=/tmp/synth-35b; t1=$SECONDS
$B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out $D35 --quiet; echo "synth 35b $((SECONDS-t1)) s"
ab 35b $D35 MERE_CUDA_MOE_NORM separate 2; rm -rf $D35; pack
if left 150; then
  D27=/tmp/synth-27b; t1=$SECONDS
  $B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet; echo "synth 27b $((SECONDS-t1)) s"
  ab 27b $D27 MERE_CUDA_PREP_PARTS all 2
  ab 27b-t $D27 MERE_CUDA_PREP_THREADS 256 1
  rm -rf $D27
fi
echo "total $((SECONDS-t0))s"; pack
