#!/usr/bin/env bash
# Session 28, after conv_gdn_prepare went back to v1 (v2 measured slower at T = 1 and no faster at T = 8,
# s28d/s28e). Carried: the tree's mere.run, mere_cuda_check, mere_engine_check and 6795c3b's mere.run
# ($B/old). In order:
#  1. cuda_check's gdn phase and engine_check's 0.8B-geometry section (the row step, MTP vs plain);
#  2. receipts with the tree's defaults (35B-A3B, 27B geometry, 512-token prompt, 128 generated, 5 reps),
#     each followed by 6795c3b's (3 reps) on the same machine;
#  3. issue 7: 27B oracle-fed verification, widths 1, 4, 8, 9, 5 reps: int (the default), mma, mma db4,
#     and both mma forms with MERE_CUDA_GM_WARPS=32 (q4gm_splits may then fill up to two waves).
LIMIT_DEFAULT=${LIMIT:-540} . tools/cuda/call_prelude.sh
export D27=/tmp/synth-27b
timeout -k 5 60 $B/mere_cuda_check --only gdn --no-bench >$OUT/cc-gdn.log 2>&1; echo "cuda_check gdn rc=$?"; grep -h "checks:" $OUT/cc-gdn.log
timeout -k 5 100 $B/mere_engine_check . "0.8b geometry" >$OUT/ec-08b.log 2>&1
echo "engine_check 0.8b rc=$? $((SECONDS-t0))s"; grep -E "FAIL|engine_check:" $OUT/ec-08b.log | head -8; pack
for g in 35b-a3b 27b; do
  d=/tmp/synth-$g
  left 90 || break
  $B/mere.run model synth --geometry qwen3.5-$g --bits 4 --group-size 64 --out $d --quiet
  for v in new old; do
    bb=$B; reps=5; [ $v = old ] && { bb=$B/old; reps=3; }
    timeout 100 $bb/mere.run bench --model $d --backend cuda --prompt-tokens 512 --gen-tokens 128 --reps $reps --json \
      >$OUT/engine-$g-$v.json 2>$OUT/bench-$g-$v.log &&
      bench_summary $OUT/engine-$g-$v.json "$g $v"
  done
  [ $g = 27b ] || rm -rf $d; pack
done
for v in int mma mma-db4 mma-w32 mma-db4-w32; do
  case $v in int) e="MERE_CUDA_QMATVEC=int";; mma) e="MERE_CUDA_QMATVEC=mma";; mma-db4) e="MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=db4";;
    mma-w32) e="MERE_CUDA_QMATVEC=mma MERE_CUDA_GM_WARPS=32";; *) e="MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=db4 MERE_CUDA_GM_WARPS=32";; esac
  left 40 && env $e timeout 90 $B/mere.run model verify-bench --model $D27 --backend cuda --widths 1,4,8,9 --prompt-tokens 128 \
    --passes 8 --reps 5 --json >$OUT/vb-$v.json 2>$OUT/vb-$v.err &&
    vb_summary $OUT/vb-$v.json $v
  pack
done
rm -rf $D27; echo "total $((SECONDS-t0))s"; pack
