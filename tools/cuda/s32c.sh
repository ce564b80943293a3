#!/usr/bin/env bash
# Session 32's 4th call (mere.run, mere_cuda_check, mere_engine_check: `tools/cuda/make_carry.sh`;
# bench/ aside, both bundled models and tests/data/mtp travel):
#  1. checks: engine_check's MoE sections (the new MERE_CUDA_MOE_DOWN_NORM=separate pairs: the next
#     layer's input norm + prepare in the MoE down launch's last block, bitwise; the
#     MERE_CUDA_MOE_DOWN_ROWS=2 pairs: a half-warp a row of the down launch, bitwise); cuda_check gdn +
#     moe_route;
#  2. 35B-A3B decode: the next norm in the down launch (default) vs MERE_CUDA_MOE_DOWN_NORM=separate;
#     a half-warp a down row (MERE_CUDA_MOE_DOWN_ROWS=2) vs a warp (the default);
#  3. the bundled MoE model on CUDA (model benchmark, baseline / adaptive, 5 reps) with this session's kernels;
#  4. on an H200: the receipts' runs (512-token prompt, 5 reps) and the 27B verification w1/4/8/9 (mma);
#     elsewhere the 27B verification w1/8 with MERE_CUDA_QMATVEC=mma (issue 7's ratio).
# Ran once (LIMIT=250, H100): bench/cuda/s32/h100-d. Both switches it measures were removed after it
# (2f83773; the source is in 7b635ae): this tree ignores MERE_CUDA_MOE_DOWN_NORM / _ROWS.
CARRY=build/carry/bin.tar.xz LIMIT_DEFAULT=${LIMIT:-480} . tools/cuda/call_prelude.sh
for ph in moe_route gdn; do
  timeout -k 5 40 $B/mere_cuda_check --only $ph --no-bench >$OUT/cc-$ph.log 2>&1; echo "cuda_check $ph rc=$? $(grep -h 'checks:' $OUT/cc-$ph.log)"
  grep -hE "FAIL" $OUT/cc-$ph.log | head -5
done
for sec in qwen35-moe-tiny "35b-a3b geometry"; do
  left 60 || break
  f=$OUT/ec-$(echo $sec | tr ' .' '__').log
  timeout -k 5 150 $B/mere_engine_check . "$sec" >$f 2>&1
  echo "engine_check '$sec' rc=$? $((SECONDS-t0))s"; grep -E "FAIL|engine_check:|DOWN_(NORM|ROWS).*bitwise" $f | cut -c1-200 | head -8
done; pack
D35=/tmp/synth-35b
$B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out $D35 --quiet
ab 35b $D35 MERE_CUDA_MOE_DOWN_NORM separate 2; pack
ab 35b-rows $D35 MERE_CUDA_MOE_DOWN_ROWS 2 1; pack
if grep -q H200 $OUT/gpu0.txt && left 60; then
  timeout 80 $B/mere.run bench --model $D35 --backend cuda --prompt-tokens 512 --gen-tokens 128 --reps 5 --json \
    >$OUT/engine-35b-a3b.json 2>/dev/null && bench_summary $OUT/engine-35b-a3b.json 35b-a3b
fi
rm -rf $D35; pack
for m in moe; do
  left 70 && timeout 100 $B/mere.run model benchmark --model models/qwen35-$m-tiny --backend cuda --variants baseline,adaptive \
    --tokens 256 --repetitions 5 --quiet --json >$OUT/mb-$m.json 2>$OUT/mb-$m.err && mb_summary $OUT/mb-$m.json $m
done; pack
if left 100; then
  D27=/tmp/synth-27b
  $B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet
  if grep -q H200 $OUT/gpu0.txt; then
    timeout 80 $B/mere.run bench --model $D27 --backend cuda --prompt-tokens 512 --gen-tokens 128 --reps 5 --json \
      >$OUT/engine-27b.json 2>/dev/null && bench_summary $OUT/engine-27b.json 27b
    left 70 && MERE_CUDA_QMATVEC=mma timeout 90 $B/mere.run model verify-bench --model $D27 --backend cuda --widths 1,4,8,9 \
      --prompt-tokens 128 --passes 8 --reps 5 --json >$OUT/vb-27b-mma.json 2>$OUT/vb-27b-mma.err && vb_summary $OUT/vb-27b-mma.json "27b mma"
  else
    MERE_CUDA_QMATVEC=mma timeout 70 $B/mere.run model verify-bench --model $D27 --backend cuda --widths 1,8 --prompt-tokens 128 \
      --passes 8 --reps 3 --json >$OUT/vb-27b-mma.json 2>$OUT/vb-27b-mma.err && vb_summary $OUT/vb-27b-mma.json "27b mma"
  fi
  rm -rf $D27
fi
echo "total $((SECONDS-t0))s"; pack
