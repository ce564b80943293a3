#!/usr/bin/env bash
# Session 35's 2nd call, written in session 35 (no device was lent then) for the next one (the same carry
# as s35a.sh). docs/cuda-kernels.md §5.22.
#  1. on an H200: the 27B receipt with session 34's defaults and the oracle-fed verification at widths
#     1, 4, 8, 9 (MERE_CUDA_QMATVEC=mma: issue 7's w8/w1 criterion);
#  2. 27B decode A/Bs (two alternating rounds): MERE_CUDA_L2_AHEAD off / out, MERE_CUDA_GDN_STATE early;
#     GDN_STATE late vs early greedy ids (32 tokens);
#  3. engine_check's 0.8B-geometry section (L2_AHEAD=out with the older pairs);
#  4. the 27B step in sequence (kernel trace), and §5.17's ablation of the 27B step with the defaults.
CARRY=build/carry/bin.tar.xz LIMIT_DEFAULT=${LIMIT:-560} . tools/cuda/call_prelude.sh
D27=/tmp/synth-27b
$B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet
receipt 27b $D27; pack
grep -q H200 $OUT/gpu0.txt && left 70 && MERE_CUDA_QMATVEC=mma timeout 90 $B/mere.run model verify-bench --model $D27 \
  --backend cuda --widths 1,4,8,9 --prompt-tokens 128 --passes 8 --reps 5 --json >$OUT/vb-27b-mma.json 2>$OUT/vb-27b-mma.err &&
  vb_summary $OUT/vb-27b-mma.json "27b mma"; pack
ab 27b-l2 $D27 MERE_CUDA_L2_AHEAD out 2; pack
ab 27b-gstate $D27 MERE_CUDA_GDN_STATE early 2; pack
same_env MERE_CUDA_GDN_STATE late early $D27 27b ids 32
engine_checks 150 "0.8b geometry"; pack
left 40 && MERE_CUDA_GRAPH=0 MERE_CUDA_TRACE_OUT=$OUT/trace-27b.json timeout 60 $B/trace/mere.run \
  bench --model $D27 --backend cuda --prompt-tokens 64 --gen-tokens 48 --reps 1 >/dev/null 2>$OUT/trace-27b.err &&
  trace_summary $OUT/trace-27b.json "27b in sequence"; pack
ablate 27b $D27 "" norm prep gdn,attn mv
rm -rf $D27
echo "total $((SECONDS-t0))s"; pack
