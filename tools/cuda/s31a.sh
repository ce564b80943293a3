#!/usr/bin/env bash
# Session 31's first call (mere.run + trace/mere.run: `tools/cuda/make_carry.sh --trace --bins mere.run
# --out build/carry/run.tar.xz`; bench/ and tests/data/mtp aside):
#  1. the bundled models' model benchmark with 59dd0cd's cost model (the pipelined serial step, the
#     repair charged);
#  2. session 30's unrun s30h.sh (removed): MoE prose, --cost-ratio 5 (every adaptive request falls back
#     before a round), the variants in both orders: is the fallback's slower decode the speculative
#     path's or the run order's?
#  3. what each kind of kernel costs a decode step inside the graph (PDL included): the trace build's
#     MERE_CUDA_ABLATE leaves kinds out (the output is meaningless); the step without them bounds what
#     fusing them away can gain. 27B and 35B-A3B geometries, 64-token prompt, 128 generated, 3 reps;
#     then MERE_CUDA_GRAPH_AFTER=1 on the MoE model, and 27B verification w1 / w8 under the ablation.
# Ran once (LIMIT=330, H100): bench/cuda/s31/h100-a.
CARRY=build/carry/run.tar.xz LIMIT_DEFAULT=${LIMIT:-540} . tools/cuda/call_prelude.sh
# the measured-cost policy with the pipelined decoder's own step as serial's cost and a round's repair
# (this tree): both bundled models, five workloads, baseline / adaptive interleaved, 5 reps
for m in moe dense; do
  timeout 100 $B/mere.run model benchmark --model models/qwen35-$m-tiny --backend cuda --variants baseline,adaptive \
    --tokens 256 --repetitions 5 --quiet --json >$OUT/mb-$m.json 2>$OUT/mb-$m.err
  mb_summary $OUT/mb-$m.json $m
done; pack
for r in 1; do
  for order in baseline,adaptive adaptive,baseline; do
    timeout 30 $B/mere.run model benchmark --model models/qwen35-moe-tiny --backend cuda --workloads prose --variants $order \
      --cost-ratio 5 --tokens 256 --repetitions 5 --quiet --json >$OUT/c5-$order-r$r.json 2>&1
    python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
for s in d['scenarios']:
  v={x['variant']:x for x in s['variants']}
  b=[round(x['decodeSeconds']*1e3,2) for x in v['baseline']['repetitions']]; a=[round(x['decodeSeconds']*1e3,2) for x in v['adaptive']['repetitions']]
  print('$order r$r baseline ms', sorted(b)[2], b, 'adaptive ms', sorted(a)[2], a)" $OUT/c5-$order-r$r.json
  done
done; pack
D27=/tmp/synth-27b; t1=$SECONDS
$B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet; echo "synth 27b $((SECONDS-t1)) s"
timeout 60 $B/mere.run bench --model $D27 --backend cuda --prompt-tokens 64 --gen-tokens 128 --reps 3 --json \
  >$OUT/abl-27b-normal.json 2>/dev/null && bench_summary $OUT/abl-27b-normal.json "27b normal build"
ablate 27b $D27 "" norm prep norm,prep gdn attn mv norm,prep,gdn,attn ""
pack
# every kind of pass captured at its first use (the default: at its third), both variants
MERE_CUDA_GRAPH_AFTER=1 timeout 100 $B/mere.run model benchmark --model models/qwen35-moe-tiny --backend cuda \
  --variants baseline,adaptive --tokens 256 --repetitions 5 --quiet --json >$OUT/mb-moe-ga1.json 2>$OUT/mb-moe-ga1.err
mb_summary $OUT/mb-moe-ga1.json "moe ga1"; pack
MERERUN_Q35_MTP_DEBUG=1 timeout 60 $B/mere.run model benchmark --model models/qwen35-moe-tiny --backend cuda --workloads prose \
  --variants baseline,adaptive --tokens 256 --repetitions 2 --json >$OUT/dbg-moe-prose.json 2>$OUT/dbg-moe-prose.err
grep -m3 "serial" $OUT/dbg-moe-prose.err | cut -c1-200; pack
if left 120; then
  D35=/tmp/synth-35b
  $B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out $D35 --quiet
  ablate 35b $D35 "" norm prep moe gdn attn mv norm,prep,gdn,attn ""
  rm -rf $D35
fi
for kinds in "" norm,prep gdn,attn; do  # the same bound for issue 7's width-8 / width-1 ratio
  left 60 || break
  MERE_CUDA_ABLATE=$kinds timeout 60 $B/trace/mere.run model verify-bench --model $D27 --backend cuda --widths 1,8 \
    --prompt-tokens 128 --passes 8 --reps 3 --json >$OUT/vb-27b-${kinds:-none}.json 2>/dev/null &&
    vb_summary $OUT/vb-27b-${kinds:-none}.json "27b verify ablate ${kinds:-none}"
done
rm -rf $D27
echo "total $((SECONDS-t0))s"; pack
