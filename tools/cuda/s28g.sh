#!/usr/bin/env bash
# Session 28: conv_gdn_prepare v3 (the gates block spreads its T * Hv pairs over its threads; each
# channel loads token t + 1's raw input ahead) and the row step's T = 1 path without the load-ahead.
# Carried: the tree's mere.run, mere_cuda_check, mere_engine_check, trace/mere.run; 6795c3b's mere.run
# ($B/old). In order:
#  1. cuda_check's gdn phase; engine_check's 0.8B and 35B-A3B geometry sections (fused conv_gdn_prepare
#     vs conv_silu + gdn_prepare bitwise at T = 1 and 9, MTP vs plain);
#  2. the width-8 and width-1 verification traces under mma (conv_gdn_prepare's time a layer);
#  3. receipts (tree, 5 reps) each followed by 6795c3b's (3 reps), 35B-A3B and 27B geometry;
#  4. issue 7: 27B oracle-fed verification, widths 1, 4, 8, 9, 5 reps: mma, int, mma db4.
LIMIT_DEFAULT=${LIMIT:-540} . tools/cuda/call_prelude.sh
export BT=$B/trace D27=/tmp/synth-27b
timeout -k 5 60 $B/mere_cuda_check --only gdn --no-bench >$OUT/cc-gdn.log 2>&1; echo "cuda_check gdn rc=$?"; grep -h "checks:" $OUT/cc-gdn.log
for sec in "0.8b geometry" "35b-a3b geometry"; do
  f=$OUT/ec-$(echo $sec | tr ' .' '__').log
  timeout -k 5 150 $B/mere_engine_check . "$sec" >$f 2>&1
  echo "engine_check '$sec' rc=$? $((SECONDS-t0))s"; grep -E "FAIL|engine_check:" $f | cut -c1-200 | head -8; pack
done
$B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet
for w in 8 1; do
  left 40 && MERE_CUDA_QMATVEC=mma MERE_CUDA_GRAPH=0 MERE_CUDA_TRACE_OUT=$OUT/trace-v27-w$w.json \
    MERE_CUDA_TRACE_ROWS=$w MERE_CUDA_TRACE_STEPS=8 timeout 50 $BT/mere.run model verify-bench --model $D27 --backend cuda \
    --widths $w --prompt-tokens 128 --passes 8 --reps 3 --json >$OUT/vb-trace-w$w.json 2>$OUT/vb-trace-w$w.err ||
    tail -3 $OUT/vb-trace-w$w.err
  [ -f $OUT/trace-v27-w$w.json ] && trace_summary $OUT/trace-v27-w$w.json "width $w (mma)" | head -8
  pack
done
for g in 35b-a3b 27b; do
  d=/tmp/synth-$g
  left 90 || break
  [ -d $d ] || $B/mere.run model synth --geometry qwen3.5-$g --bits 4 --group-size 64 --out $d --quiet
  for v in new old; do
    bb=$B; reps=5; [ $v = old ] && { bb=$B/old; reps=3; }
    timeout 100 $bb/mere.run bench --model $d --backend cuda --prompt-tokens 512 --gen-tokens 128 --reps $reps --json \
      >$OUT/engine-$g-$v.json 2>$OUT/bench-$g-$v.log &&
      bench_summary $OUT/engine-$g-$v.json "$g $v"
  done
  [ $g = 27b ] || rm -rf $d; pack
done
for v in mma int mma-db4; do
  case $v in int) e="MERE_CUDA_QMATVEC=int";; mma) e="MERE_CUDA_QMATVEC=mma";; *) e="MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=db4";; esac
  left 40 && env $e timeout 90 $B/mere.run model verify-bench --model $D27 --backend cuda --widths 1,4,8,9 --prompt-tokens 128 \
    --passes 8 --reps 5 --json >$OUT/vb-$v.json 2>$OUT/vb-$v.err &&
    vb_summary $OUT/vb-$v.json $v
  pack
done
rm -rf $D27; echo "total $((SECONDS-t0))s"; pack
