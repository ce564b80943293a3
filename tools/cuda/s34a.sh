#!/usr/bin/env bash
# Session 34's 1st call (mere.run, mere_cuda_check, mere_engine_check and the trace build's mere.run:
# `tools/cuda/make_carry.sh --trace`; bench/cuda and bench/cpu aside, the bundled models travel):
#  1. checks: cuda_check src_mv, rms_norm, moe_route (session 33's int_args / fit_variant and norm_row,
#     compiled but not yet GPU-run); engine_check's MERE_CUDA_MOE_LOADS=sets pairs (the MoE kernels'
#     chunks and scales asked for at once: bitwise the default's rows) on the 35B-A3B geometry and
#     qwen35-moe-tiny, and the dense tiny model's 4-bit copy;
#  2. decode A/B on the 35B-A3B: MERE_CUDA_MOE_LOADS unset (rows) / sets / router / gate_up / down,
#     two alternating rounds; the step in sequence (kernel trace, no graphs) with rows and with sets;
#  3. on an H200: the receipts' runs (512-token prompt, 5 reps; the 35B-A3B also with sets) and the 27B
#     oracle-fed verification at widths 1, 4, 8, 9 (MERE_CUDA_QMATVEC=mma, then the default);
#  4. §5.17's ablation of the current step (35B-A3B, then 27B) with what time is left.
# Ran once (LIMIT=540, H100): bench/cuda/s34/h100-a; after it `sets` became the default (ad80568), so with
# this tree's binaries "default" is sets.
CARRY=build/carry/bin.tar.xz LIMIT_DEFAULT=${LIMIT:-540} . tools/cuda/call_prelude.sh
cuda_checks src_mv rms_norm moe_route; pack
engine_checks 150 "35b-a3b geometry" "qwen35-moe-tiny MoE loads" "(4-bit copy)"; pack
D35=/tmp/synth-35b D27=/tmp/synth-27b
$B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out $D35 --quiet
for r in 1 2; do
  for v in default sets router gate_up down; do
    left 40 || break
    if [ $v = default ]; then e=(); else e=("MERE_CUDA_MOE_LOADS=$v"); fi
    env "${e[@]}" timeout 60 $B/mere.run bench --model $D35 --backend cuda --prompt-tokens 64 --gen-tokens 128 --reps 3 \
      --json >$OUT/ab-35b-$v-r$r.json 2>$OUT/ab-35b-$v-r$r.err && bench_summary $OUT/ab-35b-$v-r$r.json "35b MOE_LOADS=$v r$r"
  done
done; pack
for v in rows sets; do
  left 40 && MERE_CUDA_MOE_LOADS=$v MERE_CUDA_GRAPH=0 MERE_CUDA_TRACE_OUT=$OUT/trace-35b-$v.json timeout 60 $B/trace/mere.run \
    bench --model $D35 --backend cuda --prompt-tokens 64 --gen-tokens 48 --reps 1 >/dev/null 2>$OUT/trace-35b-$v.err &&
    trace_summary $OUT/trace-35b-$v.json "35b in sequence, MOE_LOADS=$v"
done; pack
receipt 35b-a3b $D35
grep -q H200 $OUT/gpu0.txt && left 60 && MERE_CUDA_MOE_LOADS=sets timeout 80 $B/mere.run bench --model $D35 --backend cuda \
  --prompt-tokens 512 --gen-tokens 128 --reps 5 --json >$OUT/engine-35b-a3b-sets.json 2>/dev/null &&
  bench_summary $OUT/engine-35b-a3b-sets.json "35b-a3b MOE_LOADS=sets"
pack
if grep -q H200 $OUT/gpu0.txt && left 120; then
  $B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet
  receipt 27b $D27
  for mv in mma default; do
    left 70 || break
    if [ $mv = default ]; then e=(); else e=("MERE_CUDA_QMATVEC=$mv"); fi
    env "${e[@]}" timeout 90 $B/mere.run model verify-bench --model $D27 --backend cuda --widths 1,4,8,9 --prompt-tokens 128 \
      --passes 8 --reps 5 --json >$OUT/vb-27b-$mv.json 2>$OUT/vb-27b-$mv.err && vb_summary $OUT/vb-27b-$mv.json "27b $mv"
  done; pack
fi
ablate 35b $D35 "" moe norm mv; pack
rm -rf $D35
if left 100; then
  [ -d $D27 ] || $B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet
  ablate 27b $D27 "" norm prep gdn,attn mv
fi
rm -rf $D27
echo "total $((SECONDS-t0))s"; pack
