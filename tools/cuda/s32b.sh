#!/usr/bin/env bash
# Session 32's 3rd call (mere.run, mere_cuda_check, mere_engine_check: `tools/cuda/make_carry.sh`;
# bench/ aside, both bundled models and tests/data/mtp travel):
#  1. checks: cuda_check's new moe_route phase (the sorted top-k vs the rounds, bitwise, ids vs the
#     host) and gdn phase; engine_check's MoE sections (the routing gate/up launch now takes the sorted
#     top-k, the separate routing launch the rounds: the MERE_CUDA_MOE_ROUTE=separate pairs compare them);
#  2. 35B-A3B decode: the sorted top-k (default) vs MERE_CUDA_MOE_TOPK=rounds, alternating;
#  3. on an H200: the receipts' decode / prefill runs (512-token prompt, 5 reps) at both geometries and
#     the 27B oracle-fed verification w1/4/8/9; elsewhere the 27B verification w1/8 (issue 7's ratio).
# Ran once (LIMIT=480, asked for nvidia-h200, got an H100): bench/cuda/s32/h100-c.
CARRY=build/carry/bin.tar.xz LIMIT_DEFAULT=${LIMIT:-480} . tools/cuda/call_prelude.sh
for ph in moe_route gdn; do
  timeout -k 5 40 $B/mere_cuda_check --only $ph --no-bench >$OUT/cc-$ph.log 2>&1; echo "cuda_check $ph rc=$?"
  grep -hE "checks:|FAIL" $OUT/cc-$ph.log | head -8
done
for sec in qwen35-moe-tiny "35b-a3b geometry"; do
  left 60 || break
  f=$OUT/ec-$(echo $sec | tr ' .' '__').log
  timeout -k 5 150 $B/mere_engine_check . "$sec" >$f 2>&1
  echo "engine_check '$sec' rc=$? $((SECONDS-t0))s"; grep -E "FAIL|engine_check:|MOE_ROUTE" $f | cut -c1-200 | head -8
done; pack
D35=/tmp/synth-35b
$B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out $D35 --quiet
ab 35b $D35 MERE_CUDA_MOE_TOPK rounds 2; pack
if grep -q H200 $OUT/gpu0.txt && left 60; then
  timeout 80 $B/mere.run bench --model $D35 --backend cuda --prompt-tokens 512 --gen-tokens 128 --reps 5 --json \
    >$OUT/engine-35b-a3b.json 2>/dev/null && bench_summary $OUT/engine-35b-a3b.json 35b-a3b
fi
rm -rf $D35; pack
if left 100; then
  D27=/tmp/synth-27b
  $B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet
  if grep -q H200 $OUT/gpu0.txt; then
    timeout 80 $B/mere.run bench --model $D27 --backend cuda --prompt-tokens 512 --gen-tokens 128 --reps 5 --json \
      >$OUT/engine-27b.json 2>/dev/null && bench_summary $OUT/engine-27b.json 27b
    left 70 && timeout 90 $B/mere.run model verify-bench --model $D27 --backend cuda --widths 1,4,8,9 --prompt-tokens 128 \
      --passes 8 --reps 5 --json >$OUT/vb-27b.json 2>$OUT/vb-27b.err && vb_summary $OUT/vb-27b.json "27b"
  else
    timeout 70 $B/mere.run model verify-bench --model $D27 --backend cuda --widths 1,8 --prompt-tokens 128 --passes 8 \
      --reps 3 --json >$OUT/vb-27b.json 2>$OUT/vb-27b.err && vb_summary $OUT/vb-27b.json "27b"
  fi
  rm -rf $D27
fi
echo "total $((SECONDS-t0))s"; pack
