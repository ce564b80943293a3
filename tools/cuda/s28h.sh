#!/usr/bin/env bash
# Session 28, issue 7: the group-integer matvec at 3 blocks an SM. s27b's ncu of the [17408, 5120] T = 8
# launch: 136 blocks (0.52 waves), 8.2 warps an SM, 0.45 eligible a scheduler, 124 registers (2 blocks
# an SM); gate + up (2 x 17408 rows, 272 blocks) spill into a second wave of 8 blocks. Carried: the
# tree's mere.run and mere_cuda_check built with __launch_bounds__(256, 3) (80 registers, ring P6 G1:
# 16 B of spill stores at T = 8), and the same tree with (256, 2) in $B/base. Variants, 27B
# oracle-fed verification, widths 1, 4, 8, 9, 3 reps: base mma; lb3 mma (GM_WARPS 16: the same splits);
# lb3 mma GM_WARPS=24 (S = 2 for 17408-row launches, gate + up in one wave); base mma GM_WARPS=24;
# then cuda_check's qmatvec checks (the host contract) on the lb3 build.
LIMIT_DEFAULT=${LIMIT:-400} . tools/cuda/call_prelude.sh
export D27=/tmp/synth-27b
$B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet
for v in base lb3 lb3-w24 base-w24 lb3-w20; do
  bb=$B; e="MERE_CUDA_QMATVEC=mma"
  case $v in base) bb=$B/base;; base-w24) bb=$B/base; e="$e MERE_CUDA_GM_WARPS=24";; lb3-w24) e="$e MERE_CUDA_GM_WARPS=24";; lb3-w20) e="$e MERE_CUDA_GM_WARPS=20";; esac
  left 40 && env $e timeout 90 $bb/mere.run model verify-bench --model $D27 --backend cuda --widths 1,4,8,9 --prompt-tokens 128 \
    --passes 8 --reps 3 --json >$OUT/vb-$v.json 2>$OUT/vb-$v.err &&
    vb_summary $OUT/vb-$v.json $v
  pack
done
left 40 && { timeout -k 5 120 $B/mere_cuda_check --only qmatvec --no-bench >$OUT/cc-qmatvec.log 2>&1
  echo "cuda_check qmatvec (lb3) rc=$?"; grep -E "FAIL|checks:" $OUT/cc-qmatvec.log | head -5; }
rm -rf $D27; echo "total $((SECONDS-t0))s"; pack
