#!/usr/bin/env bash
# Session 28, issue 7: MERE_CUDA_GM=width with the table from s28i's sweep (bench/cuda/s28/h100-m).
# Carried: the tree's mere.run and mere_engine_check; the bundled dense model in the tree.
#  1. engine_check's qwen35-dense-tiny section under MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=width (batch-
#     width invariance T = 2..9 bitwise against T = 1 with a different shape at each width, CUDA+MTP
#     == CUDA, CUDA == CPU);
#  2. 27B oracle-fed verification, widths 1, 4, 8, 9, 5 reps: width, db4, ring, in two rounds.
LIMIT_DEFAULT=${LIMIT:-300} . tools/cuda/call_prelude.sh
export D27=/tmp/synth-27b
MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=width timeout -k 5 120 $B/mere_engine_check . qwen35-dense-tiny >$OUT/ec-dense-mma-width.log 2>&1
echo "engine_check dense mma width rc=$?"; grep -E "FAIL|invariance|CUDA\+MTP|engine_check:" $OUT/ec-dense-mma-width.log | cut -c1-160; pack
$B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet
for r in 1 2; do for v in width db4 ring; do
  left 30 && MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=$v timeout 90 $B/mere.run model verify-bench --model $D27 --backend cuda \
    --widths 1,4,8,9 --prompt-tokens 128 --passes 8 --reps 5 --json >$OUT/vb-$v-r$r.json 2>$OUT/vb-$v-r$r.err &&
    vb_summary $OUT/vb-$v-r$r.json "$v r$r"
  pack
done; done
rm -rf $D27; echo "total $((SECONDS-t0))s"; pack
