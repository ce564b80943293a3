#!/usr/bin/env bash
# Session 28: the split argmax fix (b2928b0) on the GPU. Carried: b2928b0's mere.run, mere_cuda_check,
# mere_engine_check; in the tree the bundled MoE model only (64 MiB).
#  1. cuda_check's argmax phase (one 9-row workspace shared by launches of 1, 9, 1, 4 rows);
#  2. engine_check's 0.8B-geometry section (each engine's MTP generation vs its own plain one);
#  3. engine_check's qwen35-moe-tiny sections (MTP fixtures, parity with MTP vs plain on 8 prompts,
#     the env pairs) and the 35B-A3B-geometry section.
LIMIT_DEFAULT=400 . tools/cuda/call_prelude.sh
timeout -k 5 60 $B/mere_cuda_check --only argmax --no-bench >$OUT/cc-argmax.log 2>&1
echo "cuda_check argmax rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks:" $OUT/cc-argmax.log | head; pack
for sec in "0.8b geometry" "qwen35-moe-tiny" "35b-a3b geometry"; do
  f=$OUT/ec-$(echo $sec | tr ' .' '__').log
  left 60 && { timeout -k 5 300 $B/mere_engine_check . "$sec" >$f 2>&1
    echo "== engine_check '$sec' rc=$? $((SECONDS-t0))s"; grep -E "FAIL|greedy|diverges|differs|engine_check:" $f | cut -c1-200 | head -30; pack; }
done
echo "total $((SECONDS-t0))s"; pack
