#!/usr/bin/env bash
# Session 29, issue 7 on CUDA with the bundled models (s29b, bench/cuda/s29/h100-b: forced depth 2 at
# 94% acceptance gave only +5-10% over serial; the measured table read verify(2..4) = 0.4-0.9 ms
# against 0.3 for a step): what a verification pass of width 1-4 costs on the GPU for these tiny
# models (oracle-fed, graphs on), and where a width-3 pass's time goes against width 1 (kernel trace,
# graphs off). Carried: mere.run and trace/mere.run (CARRY=build/carry/run.tar.xz).
CARRY=build/carry/run.tar.xz LIMIT_DEFAULT=${LIMIT:-300} . tools/cuda/call_prelude.sh
export BT=$B/trace
for m in dense moe; do
  M=models/qwen35-$m-tiny
  timeout 60 $B/mere.run model verify-bench --model $M --backend cuda --widths 1,2,3,4 --prompt-tokens 98 --passes 16 \
    --reps 5 --json >$OUT/vb-$m.json 2>$OUT/vb-$m.err && vb_summary $OUT/vb-$m.json "$m graphs"
  for w in 1 3; do
    MERE_CUDA_GRAPH=0 MERE_CUDA_TRACE_OUT=$OUT/trace-$m-w$w.json MERE_CUDA_TRACE_ROWS=$w MERE_CUDA_TRACE_STEPS=16 \
      timeout 40 $BT/mere.run model verify-bench --model $M --backend cuda --widths $w --prompt-tokens 98 --passes 16 --reps 2 \
      --json >$OUT/vb-trace-$m-w$w.json 2>$OUT/vb-trace-$m-w$w.err || tail -3 $OUT/vb-trace-$m-w$w.err
    [ -f $OUT/trace-$m-w$w.json ] && trace_summary $OUT/trace-$m-w$w.json "$m width $w (no graphs)"
  done
  pack
done
echo "total $((SECONDS-t0))s"; pack
