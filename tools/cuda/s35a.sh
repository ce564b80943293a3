#!/usr/bin/env bash
# Session 35's 1st call (mere.run, mere_cuda_check, mere_engine_check and the trace build's mere.run:
# `tools/cuda/make_carry.sh --trace`; bench/cuda and bench/cpu aside, the bundled models travel):
#  1. on an H200: the receipts' runs with session 34's defaults (512-token prompt, 128 generated, 5 reps;
#     35B-A3B and 27B) and the 27B oracle-fed verification at widths 1, 4, 8, 9 (MERE_CUDA_QMATVEC=mma);
#  2. MERE_CUDA_MOE_DOWN_L2 (the gate/up blocks ask the L2 for their experts' down rows; a hint, no value
#     changes): greedy 64 tokens (ids) off / start / end on the 35B-A3B geometry, then the decode A/B,
#     two alternating rounds;
#  3. the step in sequence (kernel trace, no graphs, 48 generated) at both geometries with the defaults;
#  4. §5.17's ablation of the current step (35B-A3B: none, moe, norm, mv; 27B: none, norm, prep,
#     gdn + attn, mv) with what time is left; on an H200, the 27B verification with the default kernels.
CARRY=build/carry/bin.tar.xz LIMIT_DEFAULT=${LIMIT:-540} . tools/cuda/call_prelude.sh
D35=/tmp/synth-35b D27=/tmp/synth-27b
$B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out $D35 --quiet
receipt 35b-a3b $D35; pack
$B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet
receipt 27b $D27; pack
vb() {
  if [ $1 = default ]; then e=(); else e=("MERE_CUDA_QMATVEC=$1"); fi
  env "${e[@]}" timeout 90 $B/mere.run model verify-bench --model $D27 --backend cuda --widths 1,4,8,9 --prompt-tokens 128 \
    --passes 8 --reps 5 --json >$OUT/vb-27b-$1.json 2>$OUT/vb-27b-$1.err && vb_summary $OUT/vb-27b-$1.json "27b $1"
}
grep -q H200 $OUT/gpu0.txt && left 70 && vb mma; pack
for v in off start end; do
  MERE_CUDA_MOE_DOWN_L2=$v timeout 60 $B/mere.run text generate --model $D35 --backend cuda --prompt "The history of the city" \
    --max-tokens 64 --temperature 0 --ignore-eos --no-mtp --json 2>/dev/null |
    python3 -c "import json,sys; print(json.load(sys.stdin)['token_ids'])" >$OUT/gen-35b-$v.txt
done
for v in start end; do
  echo "35b DOWN_L2=$v greedy ids: $([ -s $OUT/gen-35b-off.txt ] && cmp -s $OUT/gen-35b-off.txt $OUT/gen-35b-$v.txt && echo equal || echo DIFFER or empty)"
done
for r in 1 2; do
  for v in off start end; do
    left 40 || break
    MERE_CUDA_MOE_DOWN_L2=$v timeout 60 $B/mere.run bench --model $D35 --backend cuda --prompt-tokens 64 --gen-tokens 128 --reps 3 \
      --json >$OUT/ab-35b-$v-r$r.json 2>$OUT/ab-35b-$v-r$r.err && bench_summary $OUT/ab-35b-$v-r$r.json "35b MOE_DOWN_L2=$v r$r"
  done
done; pack
for m in 35b 27b; do
  d=$D35; [ $m = 27b ] && d=$D27
  left 40 && MERE_CUDA_GRAPH=0 MERE_CUDA_TRACE_OUT=$OUT/trace-$m.json timeout 60 $B/trace/mere.run \
    bench --model $d --backend cuda --prompt-tokens 64 --gen-tokens 48 --reps 1 >/dev/null 2>$OUT/trace-$m.err &&
    trace_summary $OUT/trace-$m.json "$m in sequence"
done; pack
ablate 35b $D35 "" moe norm mv; pack
ablate 27b $D27 "" norm prep gdn,attn mv; pack
grep -q H200 $OUT/gpu0.txt && left 70 && vb default
rm -rf $D35 $D27
echo "total $((SECONDS-t0))s"; pack
