#!/usr/bin/env bash
# Prepared in session 12 for the next device call (binaries: scripts/build-cuda.sh + pack into
# build/carry/bin.tar.xz as docs/cuda-kernels.md "How to run" says). In priority order, with a time
# guard (LIMIT seconds, default 540):
#  1. engine_check with the MoE weight stream (the argmax criterion now allows named near-ties only)
#  2. prefill_check (the fused-SwiGLU checks as rewritten in session 12)
#  3. ab35: default (cuBLASLt + grouped MoE) vs + stream MoE (register / ring loads) -> decides
#     MERE_CUDA_MOE_PREFILL's default and MERE_CUDA_MOE_STREAM's
#  4. acceptance benches (5 reps) 27B / 35B-A3B, each with ncu of one decode step with warm caches
#     (sum of kernel times vs the graph step: the gaps), + the 27B long-context ratio
#  5. ncu of one 35B-A3B prompt pass (per-kernel times: moe_stream, gdn_prefill(_chunked), the rest)
R=$OUT; export OUT=/tmp/o B=build/engine-carry; mkdir -p $B $OUT; tar xJf build/carry/bin.tar.xz -C $B
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv | tee $OUT/gpu0.txt
t0=$SECONDS; LIMIT=${LIMIT:-540}
left() { [ $((SECONDS - t0 + $1)) -lt $LIMIT ]; }
pack() { tar czf $R/x.tgz -C $OUT .; }
MERE_CUDA_MOE_PREFILL=stream $B/mere_engine_check . >$OUT/ec-moe-stream.log 2>&1
echo "ec moe stream rc=$? $((SECONDS-t0))s"; grep -E "FAIL|tensor-core prefill|checks" $OUT/ec-moe-stream.log
pack
bash tools/cuda/engine_run.sh pcheck; grep -E "FAIL|moe_stream|MoE experts" $OUT/prefill_check.log | tail -16
pack
AB="MERE_CUDA_MOE_PREFILL=grouped;MERE_CUDA_MOE_PREFILL=stream;MERE_CUDA_MOE_PREFILL=stream MERE_CUDA_MOE_STREAM=ring" bash tools/cuda/engine_run.sh ab35; pack
left 240 && PROMPT=512 GEN=128 NCU=1 NCU_CACHE=none NOGRAPH= TAG=s13 bash tools/cuda/engine_run.sh b27 b35; pack
left 90 && bash tools/cuda/engine_run.sh b27long; pack
if left 170 && command -v ncu >/dev/null; then
  d=/tmp/synth-ncu35
  $B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out $d --quiet
  MERE_CUDA_MOE_PREFILL=stream MERE_CUDA_GRAPH=0 timeout 150 ncu --clock-control none --csv --metrics gpu__time_duration.sum \
    --launch-count 2500 $B/mere.run bench --model $d --backend cuda --prompt-tokens 512 --gen-tokens 1 --reps 1 >$OUT/ncu-pf35.csv 2>/dev/null
  python3 tools/cuda/ncu_summary.py $OUT/ncu-pf35.csv --first | tee $OUT/ncu-pf35-summary.txt | head -30
  rm -rf $d; pack
fi
echo "total $((SECONDS-t0))s"; pack
