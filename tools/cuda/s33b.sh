#!/usr/bin/env bash
# Session 33's 2nd call (mere.run, mere_cuda_check, mere_engine_check and the trace build's mere.run:
# `tools/cuda/make_carry.sh --trace`; bench/cuda and bench/cpu aside):
#  1. §5.17's ablation on this session's step (the inputs computed inside the projections): the trace
#     build's `mere.run bench` with MERE_CUDA_ABLATE leaving each kind of kernel out, 35B-A3B then 27B;
#  2. on an H200: the receipts' runs (512-token prompt, 5 reps).
# Not run (session 33 had no device time left for it).
CARRY=build/carry/bin.tar.xz LIMIT_DEFAULT=${LIMIT:-480} . tools/cuda/call_prelude.sh
D35=/tmp/synth-35b
$B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out $D35 --quiet
timeout 60 $B/mere.run bench --model $D35 --backend cuda --prompt-tokens 64 --gen-tokens 128 --reps 3 --json \
  >$OUT/abl-35b-normal.json 2>/dev/null && bench_summary $OUT/abl-35b-normal.json "35b normal build"
ablate 35b $D35 "" norm prep gdn attn moe mv norm,prep,gdn,attn; pack
receipt 35b-a3b $D35
rm -rf $D35; pack
D27=/tmp/synth-27b
left 100 && $B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet
receipt 27b $D27
ablate 27b $D27 "" norm prep gdn attn; pack
rm -rf $D27
echo "total $((SECONDS-t0))s"; pack
