#!/usr/bin/env bash
# Session 14, first device call (binaries: scripts/build-cuda.sh mere.run mere_engine_check
# mere_cuda_check, packed into build/carry/bin.tar.xz). Time guard LIMIT seconds (default 540):
#  1. mere_cuda_check --no-bench (kernel checks: the register matvec with its new pre-wait L2
#     prefetch must stay bitwise the other integer kernels)
#  2. engine_check with the defaults, and with MERE_CUDA_PDL_EARLY=1 (producers trigger early) and
#     MERE_CUDA_MV_SMALL=2,1 (2-row batches on the 5,120-row launches)
#  3. ab27 / ab35: MERE_CUDA_MV_PREFETCH 0 / 16 / 32 MB, early trigger on / off, small shapes
R=$OUT; export OUT=/tmp/o B=build/engine-carry; mkdir -p $B $OUT; tar xJf build/carry/bin.tar.xz -C $B
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv | tee $OUT/gpu0.txt
t0=$SECONDS; LIMIT=${LIMIT:-540}
left() { [ $((SECONDS - t0 + $1)) -lt $LIMIT ]; }
pack() { tar czf $R/x.tgz -C $OUT .; }
$B/mere_cuda_check --no-bench >$OUT/cuda_check.log 2>&1; echo "cuda_check rc=$? $((SECONDS-t0))s"
grep -E "FAIL|checks" $OUT/cuda_check.log | tail -5; pack
$B/mere_engine_check . >$OUT/engine_check.log 2>&1; echo "ec rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/engine_check.log; pack
MERE_CUDA_PDL_EARLY=1 MERE_CUDA_MV_SMALL=2,1 $B/mere_engine_check . >$OUT/ec-early.log 2>&1; echo "ec early rc=$? $((SECONDS-t0))s"
grep -E "FAIL|checks" $OUT/ec-early.log; pack
P=MERE_CUDA_MV_PREFETCH E=MERE_CUDA_PDL_EARLY
V="$P=0;$P=16;$P=16 $E=1;$P=32 $E=1"
left 240 && AB="$V;$P=16 $E=1 MERE_CUDA_MV_SMALL=2,1;$P=16 $E=1 MERE_CUDA_MV_SMALL=2,2" bash tools/cuda/engine_run.sh ab27; pack
left 100 && AB="$V" bash tools/cuda/engine_run.sh ab35; pack
echo "total $((SECONDS-t0))s"; pack
