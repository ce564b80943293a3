#!/usr/bin/env bash
# Session 28's diagnosis call: s27c found the 0.8B-geometry section's MTP generations differing
# between engine variants (every single-pass logit bitwise equal). Engines: 93a3a2c ($B), 93a3a2c with
# 6795c3b's gdn_step.cuh (the row step without the load-ahead, $B/ecv) and 6795c3b ($B/old); each
# section run also with MERE_CUDA_FUSE=0 (conv_silu + gdn_prepare: no conv_gdn_prepare v2).
# engine_check now reports each engine's MTP generation against its own plain one.
LIMIT_DEFAULT=300 . tools/cuda/call_prelude.sh
for v in new ecv old; do
  bb=$B; [ $v != new ] && bb=$B/$v
  for f in 1 0; do
    left 40 && { MERE_CUDA_FUSE=$f timeout -k 5 90 $bb/mere_engine_check . "0.8b geometry" >$OUT/ec-$v-fuse$f.log 2>&1
      echo "== $v FUSE=$f rc=$? $((SECONDS-t0))s"; grep -E "greedy|engine_check:" $OUT/ec-$v-fuse$f.log | sed 's/qwen3.5-0.8b //' | cut -c1-230; pack; }
  done
done
echo "total $((SECONDS-t0))s"; pack
