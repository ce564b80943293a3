#!/usr/bin/env bash
# Ran in session 25 on an H100: bench/cuda/s25/h100-b. Its traces hold width-1 passes (the oracle steps), see MERE_CUDA_TRACE_ROWS / s25b.sh.
# NOT RUN in session 24 (the device time ran out while machines were refused); the next session's
# first call, on binaries rebuilt from HEAD (bin.tar.xz: mere.run; trace.tar.xz: the trace build's
# mere.run, cmake -DMERE_CUDA_TRACE=ON; the tree can travel without models/ and tests/).
# Session 24's fourth device call: the kernel trace (trace build, kernel_trace.h) of oracle-fed
# verification passes at the 27B geometry under issue 7's matvec (MERE_CUDA_QMATVEC=mma
# MERE_CUDA_GM=db4), width 1 and width 8, 8 passes each without graphs, beside the normal binary's
# verify-bench (graphs) for the rates. LIMIT 200.
LIMIT_DEFAULT=200 . tools/cuda/call_prelude.sh
export BT=build/trace-carry; mkdir -p $BT; tar xJf build/carry/trace.tar.xz -C $BT
D27=/tmp/synth-27b
$B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet
echo "synth $((SECONDS-t0))s"
export MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=db4
for w in 1 8; do
  left 40 && MERE_CUDA_GRAPH=0 MERE_CUDA_TRACE_OUT=$OUT/trace-v27-w$w.json MERE_CUDA_TRACE_STEPS=8 timeout 60 \
    $BT/mere.run model verify-bench --model $D27 --backend cuda --widths $w --prompt-tokens 128 --passes 8 --reps 3 \
    --json >$OUT/vb-trace-w$w.json 2>$OUT/vb-trace-w$w.err || tail -3 $OUT/vb-trace-w$w.err
  python3 - $OUT/trace-v27-w$w.json $w <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
print("width %s: %d passes traced, %.1f us a pass in sequence" % (sys.argv[2], t["steps"], t["us_per_step"]))
for k in t["kernels"][:14]:
    print("  %-44s %5.1f a pass %8.1f us a pass %7.2f us each" % (k["name"][:44], k["launches_per_step"], k["us_per_step"], k["us_each"]))
PY
  pack
done
left 40 && timeout 60 $B/mere.run model verify-bench --model $D27 --backend cuda --widths 1,8 --prompt-tokens 128 --passes 8 \
  --reps 3 --json >$OUT/vb-graph.json 2>/dev/null && python3 -c "
import json,sys;d=json.load(open(sys.argv[1]))
print(' '.join('w%d %.1f tok/s (x%.2f)'%(w['width'],w['tokens_per_s']['median'],w['speedup_vs_width1']) for w in d['widths']))" $OUT/vb-graph.json
echo "total $((SECONDS-t0))s"; pack
