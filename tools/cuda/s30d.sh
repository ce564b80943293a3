#!/usr/bin/env bash
# Session 30's 3rd call (mere.run: `tools/cuda/make_carry.sh --bins mere.run --out build/carry/run.tar.xz`;
# bench/ aside): the bundled MoE model's prose and summary workloads fall back after ~6 rounds at 35%
# acceptance (s30c: 0.928x; the CPU's forced-depth rounds show the same opening: rounds 3-6 accept
# nothing, later ~90%) and pay 1.5-2.6 ms of graph captures for kinds of pass used a few times before
# the fallback. A/B of the capture threshold (MERE_CUDA_GRAPH_AFTER 2, the default, 3, 4) on prose,
# summary, code and chat, two rounds each; model benchmark baseline / adaptive, 5 reps.
CARRY=build/carry/run.tar.xz LIMIT_DEFAULT=${LIMIT:-300} . tools/cuda/call_prelude.sh
for r in 1 2; do
  for ga in 2 3 4; do
    left 45 && MERE_CUDA_GRAPH_AFTER=$ga timeout 60 $B/mere.run model benchmark --model models/qwen35-moe-tiny --backend cuda \
      --workloads prose,summary,code,chat --variants baseline,adaptive --tokens 256 --repetitions 5 --quiet --json \
      >$OUT/mb-moe-ga$ga-r$r.json 2>$OUT/mb-moe-ga$ga-r$r.err && mb_summary $OUT/mb-moe-ga$ga-r$r.json "moe GRAPH_AFTER=$ga r$r"
    pack
  done
done
echo "total $((SECONDS-t0))s"; pack
