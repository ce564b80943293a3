#!/usr/bin/env bash
# Session 30's 4th call (as s30d): why MERE_CUDA_GRAPH_AFTER=4 kept the MoE prose / summary requests
# speculating (s30d: 1.54-1.64x against 0.91-0.94x at 2 and 3): MERERUN_Q35_MTP_DEBUG's cost tables and
# rounds for prose at 2 and 4 (one warm-up, two repetitions), and the dense model's five workloads at 4.
CARRY=build/carry/run.tar.xz LIMIT_DEFAULT=${LIMIT:-200} . tools/cuda/call_prelude.sh
for ga in 2 4; do
  MERE_CUDA_GRAPH_AFTER=$ga MERERUN_Q35_MTP_DEBUG=1 timeout 60 $B/mere.run model benchmark --model models/qwen35-moe-tiny \
    --backend cuda --workloads prose --variants adaptive --tokens 256 --repetitions 2 --json >$OUT/dbg-moe-prose-ga$ga.json \
    2>$OUT/dbg-moe-prose-ga$ga.err
  echo "GRAPH_AFTER=$ga: $(grep -c 'round' $OUT/dbg-moe-prose-ga$ga.err) rounds"; grep -m3 "d=0" $OUT/dbg-moe-prose-ga$ga.err | cut -c1-220
  grep -m12 "mtp-debug\] head" $OUT/dbg-moe-prose-ga$ga.err | cut -c1-220
done; pack
echo "total $((SECONDS-t0))s"; pack
