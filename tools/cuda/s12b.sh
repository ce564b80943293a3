#!/usr/bin/env bash
# session 12, acceptance benches (H200 targets of issue 6) with the prefill paths chosen by s12a:
# 27B and 35B-A3B decode + 512-token prefill (5 reps, ncu of one decode step), 27B long context.
# ENVS: the env settings to run under (e.g. "MERE_CUDA_PREFILL=blas MERE_CUDA_MOE_PREFILL=stream").
R=$OUT; export OUT=/tmp/o B=build/engine-carry; mkdir -p $B $OUT; tar xJf build/carry/bin.tar.xz -C $B
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv | tee $OUT/gpu0.txt
t0=$SECONDS
export ${ENVS:-}
env | grep MERE_ | tee $OUT/env.txt
PROMPT=512 GEN=128 TAG=s12 bash tools/cuda/engine_run.sh b27 b35 b27long
echo "total $((SECONDS-t0))s"
tar czf $R/x.tgz -C $OUT .
