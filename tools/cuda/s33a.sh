#!/usr/bin/env bash
# Session 33's 1st call (mere.run, mere_cuda_check, mere_engine_check: `tools/cuda/make_carry.sh`;
# bench/cuda and bench/cpu aside, both bundled models and tests/data/mtp travel):
#  1. checks: cuda_check's new norm_mv phase (qmatvec_norm_multi against rms_norm_prep + qmatvec_multi,
#     every register shape, bitwise), rms_norm + gdn (k_norm.cuh's folded 1 / rms, q4_emit's
#     half_chunk_stats: the producer-parts check), moe_route; engine_check's MERE_CUDA_NORM_MV=separate
#     pairs on the 35B-A3B and 0.8B geometries and the dense tiny model's 4-bit copy (also 8b7f197's
#     prefetch_row in the router launch: the MOE_NORM pairs);
#  2. decode A/B: the inputs computed inside the projections (default) vs MERE_CUDA_NORM_MV=separate
#     (the RMSNorms' own launches) vs MERE_CUDA_PREP_MV=separate (the gated norm's and the attention
#     gate's), 35B-A3B and 27B, two alternating rounds;
#  3. on an H200: the receipts' runs (512-token prompt, 5 reps) and the 27B verification w1/4/8/9 (mma).
# Ran once (LIMIT=430, H100): bench/cuda/s33/h100-a; after it both switches became opt-in (6b6ab5b), so
# with this tree's binaries the default is the separate form and "=separate" changes nothing.
CARRY=build/carry/bin.tar.xz LIMIT_DEFAULT=${LIMIT:-540} . tools/cuda/call_prelude.sh
# `ab3 NAME DIR`: the default, MERE_CUDA_NORM_MV=separate, MERE_CUDA_PREP_MV=separate, alternating, 2 rounds
ab3() {
  for r in 1 2; do
    for v in default NORM_MV PREP_MV; do
      left 40 || return
      if [ $v = default ]; then e=(); else e=("MERE_CUDA_$v=separate"); fi
      env "${e[@]}" timeout 60 $B/mere.run bench --model $2 --backend cuda --prompt-tokens 64 --gen-tokens 128 --reps 3 \
        --json >$OUT/ab-$1-$v-r$r.json 2>$OUT/ab-$1-$v-r$r.err && bench_summary $OUT/ab-$1-$v-r$r.json "$1 $v r$r"
    done
  done
}
cuda_checks src_mv rms_norm gdn moe_route; pack
EC_SHOW="NORM_MV.*bitwise" engine_checks 90 "35b-a3b geometry" "0.8b geometry" "(4-bit copy)"; pack
D35=/tmp/synth-35b
$B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out $D35 --quiet
ab3 35b $D35; pack
receipt 35b-a3b $D35
rm -rf $D35; pack
D27=/tmp/synth-27b
left 100 && $B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet
ab3 27b $D27; pack
if grep -q H200 $OUT/gpu0.txt && left 60; then
  timeout 80 $B/mere.run bench --model $D27 --backend cuda --prompt-tokens 512 --gen-tokens 128 --reps 5 --json \
    >$OUT/engine-27b.json 2>/dev/null && bench_summary $OUT/engine-27b.json 27b
  left 70 && MERE_CUDA_QMATVEC=mma timeout 90 $B/mere.run model verify-bench --model $D27 --backend cuda --widths 1,4,8,9 \
    --prompt-tokens 128 --passes 8 --reps 5 --json >$OUT/vb-27b-mma.json 2>$OUT/vb-27b-mma.err && vb_summary $OUT/vb-27b-mma.json "27b mma"
fi
rm -rf $D27
echo "total $((SECONDS-t0))s"; pack
