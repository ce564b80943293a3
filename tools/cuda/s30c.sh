#!/usr/bin/env bash
# Session 30's 2nd call (mere.run, mere_engine_check: `tools/cuda/make_carry.sh --bins "mere.run
# mere_engine_check" --out build/carry/run.tar.xz`; bench/ aside, both bundled models and
# tests/data/mtp travel): the head's priming on the prompt's GEMMs made the default (s30a: dense math
# 0.96x -> 1.50x serial) and the per-device shared-memory opt-in, checked and measured:
#  1. engine_check's sections of both bundled models (fixtures, CUDA == CPU, CUDA+MTP == CUDA, the new
#     head-priming check: GEMMs vs 9-row head passes) and of the 0.8B and 35B-A3B geometries;
#  2. model benchmark, both bundled models, five workloads, baseline / adaptive, 256 tokens, 5 reps;
#  3. gdn_decode's two rows a warp (MERE_CUDA_GDN_ROWS=2) A/B on 27B verification w1/8;
#  4. on an H200 only: 27B oracle-fed verification w1/4/8/9, decode receipts 27B and 35B-A3B.
CARRY=build/carry/run.tar.xz LIMIT_DEFAULT=${LIMIT:-420} . tools/cuda/call_prelude.sh
for sec in qwen35-dense-tiny qwen35-moe-tiny "0.8b geometry" "35b-a3b geometry"; do
  f=$OUT/ec-$(echo $sec | tr ' .' '__').log
  timeout -k 5 150 $B/mere_engine_check . "$sec" >$f 2>&1
  echo "engine_check '$sec' rc=$? $((SECONDS-t0))s"; grep -E "FAIL|engine_check:|priming|GDN_ROWS.*bitwise" $f | cut -c1-200 | head -8
done; pack
# the shared-memory opt-in now made per device at each launch (smem_opt_in.h): both 4-bit matvec kernels
# at the 0.8B geometry, verification widths 1 and 8 and forced-depth parity
D08=/tmp/synth-08b
$B/mere.run model synth --geometry qwen3.5-0.8b --bits 4 --group-size 64 --out $D08 --quiet
for mv in int mma; do
  MERE_CUDA_QMATVEC=$mv timeout 60 $B/mere.run model verify-bench --model $D08 --backend cuda --widths 1,8 --prompt-tokens 64 \
    --passes 4 --reps 2 --parity-depths 1,4 --json >$OUT/vb-08b-$mv.json 2>$OUT/vb-08b-$mv.err
  echo "0.8b $mv verify-bench rc=$?"; vb_summary $OUT/vb-08b-$mv.json "0.8b $mv"; parity_summary $OUT/vb-08b-$mv.json "0.8b $mv"
done; rm -rf $D08; pack
for m in dense moe; do
  left 70 && timeout 120 $B/mere.run model benchmark --model models/qwen35-$m-tiny --backend cuda --variants baseline,adaptive \
    --tokens 256 --repetitions 5 --quiet --json >$OUT/mb-$m.json 2>$OUT/mb-$m.err && mb_summary $OUT/mb-$m.json $m
  pack
done
# gdn_decode with two rows of a head a warp (MERE_CUDA_GDN_ROWS=2, opt-in; engine_check pairs it bitwise
# on the 0.8B and 35B-A3B geometries): 27B verification mma w1/8, two alternating rounds
# (removed after this run, ffb839d: no gain; the variable is no longer read)
if left 150; then
  D27=/tmp/synth-27b
  $B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet
  for r in 1 2; do
    for gr in 1 2; do
      left 40 && MERE_CUDA_GDN_ROWS=$gr timeout 50 $B/mere.run model verify-bench --model $D27 --backend cuda --widths 1,8 \
        --prompt-tokens 128 --passes 8 --reps 3 --json >$OUT/vb-27b-rows$gr-r$r.json 2>$OUT/vb-27b-rows$gr-r$r.err &&
        vb_summary $OUT/vb-27b-rows$gr-r$r.json "27b gdn rows $gr round $r"
    done
  done
  grep -q H200 $OUT/gpu0.txt || rm -rf $D27
  pack
fi
if grep -q H200 $OUT/gpu0.txt && left 150; then
  D27=/tmp/synth-27b
  [ -d $D27 ] || $B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet
  timeout 90 $B/mere.run model verify-bench --model $D27 --backend cuda --widths 1,4,8,9 --prompt-tokens 128 --passes 8 \
    --reps 5 --json >$OUT/vb-27b.json 2>$OUT/vb-27b.err && vb_summary $OUT/vb-27b.json "27b"
  left 60 && timeout 80 $B/mere.run bench --model $D27 --backend cuda --prompt-tokens 512 --gen-tokens 128 --reps 5 --json \
    >$OUT/engine-27b.json 2>/dev/null && bench_summary $OUT/engine-27b.json 27b
  rm -rf $D27; pack
  if left 90; then
    D35=/tmp/synth-35b
    $B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out $D35 --quiet
    timeout 80 $B/mere.run bench --model $D35 --backend cuda --prompt-tokens 512 --gen-tokens 128 --reps 5 --json \
      >$OUT/engine-35b-a3b.json 2>/dev/null && bench_summary $OUT/engine-35b-a3b.json 35b-a3b
    rm -rf $D35
  fi
fi
echo "total $((SECONDS-t0))s"; pack
