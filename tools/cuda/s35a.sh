#!/usr/bin/env bash
# Session 35's 1st call, written in session 35 (no device was lent then) for the next one
# (mere.run, mere_cuda_check, mere_engine_check and the trace build's mere.run: `tools/cuda/make_carry.sh
# --trace`; bench/cuda and bench/cpu aside, the bundled models travel). docs/cuda-kernels.md §5.22.
#  1. checks of the session's switches: cuda_check gdn under MERE_CUDA_GDN_STATE=early; engine_check's L2-hint
#     pairs (qwen35-moe-tiny; the 4-layer 35B-A3B geometry, with its older pairs); GDN_STATE late vs early in two
#     processes (greedy 64 token ids and `text logits` on both bundled models, ids at the 35B-A3B geometry);
#  2. on an H200: the 35B-A3B receipt with session 34's defaults (512-token prompt, 128 generated, 5 reps);
#  3. decode A/Bs at the 35B-A3B geometry (`mere.run bench --prompt-tokens 64 --gen-tokens 128 --reps 3`, two
#     alternating rounds): MERE_CUDA_MOE_FUSED on, MERE_CUDA_L2_AHEAD off / out / in / on,
#     MERE_CUDA_MOE_DOWN_L2 start / end, MERE_CUDA_GDN_STATE early;
#  4. the 35B-A3B step in sequence (kernel trace, no graphs) with the defaults, L2_AHEAD=on, MOE_FUSED=on;
#  5. engine_check's 35B-A3B-geometry section (the hints' and MOE_FUSED's pairs with the older ones).
CARRY=build/carry/bin.tar.xz LIMIT_DEFAULT=${LIMIT:-560} . tools/cuda/call_prelude.sh
MERE_CUDA_GDN_STATE=early CC_TAG=-state-early cuda_checks gdn; pack
engine_checks 150 "qwen35-moe-tiny L2 hints"; pack
same_env MERE_CUDA_GDN_STATE late early models/qwen35-moe-tiny moe-tiny
same_env MERE_CUDA_GDN_STATE late early models/qwen35-dense-tiny dense-tiny; pack
D35=/tmp/synth-35b
$B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out $D35 --quiet
same_env MERE_CUDA_GDN_STATE late early $D35 35b ids
receipt 35b-a3b $D35; pack
ab 35b-fused $D35 MERE_CUDA_MOE_FUSED on 2; pack
ab 35b-l2 $D35 MERE_CUDA_L2_AHEAD "out in on" 2; pack
ab 35b-dl2 $D35 MERE_CUDA_MOE_DOWN_L2 "start end" 2; pack
ab 35b-gstate $D35 MERE_CUDA_GDN_STATE early 2; pack
for v in default MERE_CUDA_L2_AHEAD=on MERE_CUDA_MOE_FUSED=on; do
  if [ $v = default ]; then e=() tag=default; else e=("$v") tag=$(echo ${v#MERE_CUDA_} | tr 'A-Z=_' 'a-z--'); fi
  left 40 && env "${e[@]}" MERE_CUDA_GRAPH=0 MERE_CUDA_TRACE_OUT=$OUT/trace-35b-$tag.json timeout 60 $B/trace/mere.run \
    bench --model $D35 --backend cuda --prompt-tokens 64 --gen-tokens 48 --reps 1 >/dev/null 2>$OUT/trace-35b-$tag.err &&
    trace_summary $OUT/trace-35b-$tag.json "35b in sequence, $v"
done; pack
engine_checks 150 "35b-a3b geometry"
rm -rf $D35
echo "total $((SECONDS-t0))s"; pack
