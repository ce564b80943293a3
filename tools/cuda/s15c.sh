#!/usr/bin/env bash
# Session 15's last device call (~5 minutes of budget left after failed starts): the checks of the
# step + gated norm launch (MERE_CUDA_STEP_NORM=fused, default off until this passes) and of the
# new defaults, then one A/B round at each geometry. LIMIT seconds (230).
R=$OUT; export OUT=/tmp/o B=build/engine-carry; mkdir -p $B $OUT; tar xJf build/carry/bin.tar.xz -C $B
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv | tee $OUT/gpu0.txt
t0=$SECONDS; LIMIT=${LIMIT:-230}
left() { [ $((SECONDS - t0 + $1)) -lt $LIMIT ]; }
pack() { tar czf $R/x.tgz -C $OUT .; }
($B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out /tmp/synth-ab35 --quiet) &
timeout 60 $B/mere_cuda_check --no-bench >$OUT/cuda_check.log 2>&1; echo "cuda_check rc=$? $((SECONDS-t0))s"
grep -E "FAIL|gdn_step_norm|checks" $OUT/cuda_check.log | tail -12; pack
timeout 100 $B/mere_engine_check . >$OUT/engine_check.log 2>&1; echo "ec rc=$? $((SECONDS-t0))s"
grep -E "FAIL|checks|STEP_NORM|ROUTE|0.8b" $OUT/engine_check.log; pack
wait
OLD="MERE_CUDA_MOE_ROUTE=separate MERE_CUDA_Q8_SHAPE=4,2"
left 60 && AB="$OLD;MERE_CUDA_PDL=1;MERE_CUDA_STEP_NORM=fused;MERE_CUDA_MV_TUNE=1" timeout 110 bash tools/cuda/engine_run.sh ab35; pack
left 40 && AB="MERE_CUDA_PDL=1;MERE_CUDA_STEP_NORM=fused;MERE_CUDA_MV_TUNE=1" timeout 100 bash tools/cuda/engine_run.sh ab27; pack
echo "total $((SECONDS-t0))s"; pack
