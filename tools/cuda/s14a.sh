#!/usr/bin/env bash
# Session 14, the one device call (~9 device minutes were left; binaries: scripts/build-cuda.sh
# mere.run mere_engine_check mere_cuda_check, packed into build/carry/bin.tar.xz). LIMIT seconds:
#  1. engine_check with every v10 switch on (MERE_CUDA_MV_PREFETCH=16, MERE_CUDA_PDL_EARLY=1,
#     MERE_CUDA_MV_SMALL=2,1): none may change a bit
#  2. ab27: prefetch 0 / 16 MB, early trigger, 2-row small launches; ab35: the first three
R=$OUT; export OUT=/tmp/o B=build/engine-carry; mkdir -p $B $OUT; tar xJf build/carry/bin.tar.xz -C $B
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv | tee $OUT/gpu0.txt
t0=$SECONDS; LIMIT=${LIMIT:-300}
left() { [ $((SECONDS - t0 + $1)) -lt $LIMIT ]; }
pack() { tar czf $R/x.tgz -C $OUT .; }
P=MERE_CUDA_MV_PREFETCH E=MERE_CUDA_PDL_EARLY
($B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out /tmp/synth-27b --quiet) &
env $P=16 $E=1 MERE_CUDA_MV_SMALL=2,1 $B/mere_engine_check . >$OUT/engine_check.log 2>&1; echo "ec rc=$? $((SECONDS-t0))s"
grep -E "FAIL|checks" $OUT/engine_check.log; pack; wait
V="$P=0;$P=16;$P=16 $E=1;$P=16 $E=1 MERE_CUDA_MV_SMALL=2,1"
left 150 && AB="$V" bash tools/cuda/engine_run.sh ab27; pack
left 60 && AB="$P=0;$P=16;$P=16 $E=1" bash tools/cuda/engine_run.sh ab35; pack
echo "total $((SECONDS-t0))s"; pack
