#!/usr/bin/env bash
# Session 28's H200 call (binaries of the tree after the split-argmax fix, b2928b0+: build/carry/bin.tar.xz
# from `tools/cuda/make_carry.sh --trace`; the bundled models stay out of the call, 64 MiB):
#  1. the receipts with the tree's defaults: 35B-A3B and 27B geometry, 512-token prompt, 128 generated,
#     5 reps (issue 6; session 24's are the last H200 ones);
#  2. issue 7 at the 27B geometry: oracle-fed verification, widths 1, 4, 8, 9, 5 reps, under the default
#     4-bit matvec (int), the group-integer one (mma, default config) and mma db4;
#  3. the verification traces of width 1 and 8 under mma (where the width-8 pass's time goes), then
#     trace27 (the decode step's kernels) and the quick checks (argmax, barrier cost).
LIMIT_DEFAULT=${LIMIT:-540} . tools/cuda/call_prelude.sh
export BT=$B/trace D27=/tmp/synth-27b
for g in 35b-a3b 27b; do
  d=/tmp/synth-$g
  left 90 || break
  $B/mere.run model synth --geometry qwen3.5-$g --bits 4 --group-size 64 --out $d --quiet
  timeout 100 $B/mere.run bench --model $d --backend cuda --prompt-tokens 512 --gen-tokens 128 --reps 5 --json \
    >$OUT/engine-$g-s28d.json 2>$OUT/bench-$g.log &&
    bench_summary $OUT/engine-$g-s28d.json "receipt $g"
  [ $g = 27b ] || rm -rf $d; pack
done
for v in int mma mma-db4; do
  case $v in int) e="MERE_CUDA_QMATVEC=int";; mma) e="MERE_CUDA_QMATVEC=mma";; *) e="MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=db4";; esac
  left 50 && env $e timeout 90 $B/mere.run model verify-bench --model $D27 --backend cuda --widths 1,4,8,9 --prompt-tokens 128 \
    --passes 8 --reps 5 --json >$OUT/vb-$v.json 2>$OUT/vb-$v.err &&
    vb_summary $OUT/vb-$v.json $v
  pack
done
for w in 8 1; do
  left 40 && MERE_CUDA_QMATVEC=mma MERE_CUDA_GRAPH=0 MERE_CUDA_TRACE_OUT=$OUT/trace-v27-w$w.json \
    MERE_CUDA_TRACE_ROWS=$w MERE_CUDA_TRACE_STEPS=8 timeout 50 $BT/mere.run model verify-bench --model $D27 --backend cuda \
    --widths $w --prompt-tokens 128 --passes 8 --reps 3 --json >$OUT/vb-trace-w$w.json 2>$OUT/vb-trace-w$w.err ||
    tail -3 $OUT/vb-trace-w$w.err
  [ -f $OUT/trace-v27-w$w.json ] && trace_summary $OUT/trace-v27-w$w.json "width $w (mma)"
  pack
done
left 70 && timeout 90 bash tools/cuda/engine_run.sh trace27 2>&1 | tail -20
timeout -k 5 30 $B/mere_cuda_check --only argmax --no-bench >$OUT/cc-argmax.log 2>&1
echo "cuda_check argmax rc=$?"; grep -E "checks:|FAIL" $OUT/cc-argmax.log | head -5
left 30 && { timeout -k 5 40 $B/mere_cuda_check --only barrier --json $OUT/cc-barrier.json >$OUT/cc-barrier.log 2>&1
  echo "cuda_check barrier rc=$?"; grep -E "barrier|FAIL" $OUT/cc-barrier.log | head -10; }
rm -rf $D27; echo "total $((SECONDS-t0))s"; pack
