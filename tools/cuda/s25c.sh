#!/usr/bin/env bash
# Session 25's third device call, on binaries of the working tree (bin.tar.xz: mere.run; trace.tar.xz:
# the trace build's mere.run, cmake -DMERE_CUDA_TRACE=ON; the tree travels without models/ and tests/):
#  1. issue 7: the in-sequence kernel trace of the 27B verification passes of width 1 and 8 under the
#     group-integer matvec (MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=db4), now with MERE_CUDA_TRACE_ROWS so
#     the width-8 window holds width-8 passes (s24d's held the oracle's width-1 steps), beside
#     verify-bench's graph rates;
#  2. the 35B-A3B decode trace with MERE_CUDA_MOE_BLOCK=on (trace35): the one-launch MoE block's time
#     in sequence against s24c's four launches (31 µs a layer);
#  3. the 27B receipt (512-token prompt, 128 generated, 5 reps) with this tree's defaults. LIMIT 330.
LIMIT_DEFAULT=330 . tools/cuda/call_prelude.sh
export BT=build/trace-carry; mkdir -p $BT; tar xJf build/carry/trace.tar.xz -C $BT
D27=/tmp/synth-27b
$B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet
echo "synth $((SECONDS-t0))s"
for w in 1 8; do
  left 40 && MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=db4 MERE_CUDA_GRAPH=0 MERE_CUDA_TRACE_OUT=$OUT/trace-v27-w$w.json \
    MERE_CUDA_TRACE_ROWS=$w MERE_CUDA_TRACE_STEPS=8 timeout 60 $BT/mere.run model verify-bench --model $D27 --backend cuda \
    --widths $w --prompt-tokens 128 --passes 8 --reps 3 --json >$OUT/vb-trace-w$w.json 2>$OUT/vb-trace-w$w.err ||
    tail -3 $OUT/vb-trace-w$w.err
  trace_summary $OUT/trace-v27-w$w.json "width $w"
  pack
done
left 40 && MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=db4 timeout 60 $B/mere.run model verify-bench --model $D27 --backend cuda \
  --widths 1,8 --prompt-tokens 128 --passes 8 --reps 3 --json >$OUT/vb-graph.json 2>/dev/null && python3 -c "
import json,sys;d=json.load(open(sys.argv[1]))
w={x['width']:x for x in d['widths']}
print('graph: w1 %.1f tok/s, w8 %.1f tok/s (x%.2f)'%(w[1]['tokens_per_s']['median'],w[8]['tokens_per_s']['median'],w[8]['speedup_vs_width1']))" $OUT/vb-graph.json
pack
# 3. the 27B receipt with this tree's defaults (ATTN_COMBINE=v2 now among them), 5 reps
left 60 && timeout 80 $B/mere.run bench --model $D27 --backend cuda --prompt-tokens 512 --gen-tokens 128 --reps 5 --json \
  >$OUT/engine-27b-s25c.json 2>$OUT/bench-27b.log && python3 -c "
import json,sys;r=json.load(open(sys.argv[1]))['runs'][0];d=r['decode_tok_s'];p=r['prefill_tok_s']
print('receipt 27B: decode %.1f [%.1f-%.1f] prefill %.0f [%.0f-%.0f]'%(d['median'],d['min'],d['max'],p['median'],p['min'],p['max']))" $OUT/engine-27b-s25c.json
rm -rf $D27; pack
left 120 && MERE_CUDA_MOE_BLOCK=on timeout 150 bash tools/cuda/engine_run.sh trace35 2>&1
echo "total $((SECONDS-t0))s"; pack
