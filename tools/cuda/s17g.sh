#!/usr/bin/env bash
# Session 17, last device call: the prompt's SwiGLU inside the down projection's X preparation
# (qgemm_prepare_x_swiglu, MERE_CUDA_PREFILL_SWIGLU=fused; the default stays separate until this runs) —
# its bitwise check (prefill_check), engine_check with it, and the 27B prefill A/B. (Written in session
# 17; that session's device time ran out before it ran.) Prediction (written
# before the run): the swiglu launches (3.0 ms of the 27B prompt's ~80 ms in s17 h100-g) and the down
# inputs' prepare (~1.6 ms) become ~1.9 ms: 27B prefill +3% (6,370 -> ~6,600 tok/s on the H100).
# Binaries: build/carry/bin.tar.xz. LIMIT seconds (300).
R=$OUT; export OUT=/tmp/o B=build/engine-carry; mkdir -p $B $OUT; tar xJf build/carry/bin.tar.xz -C $B
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv | tee $OUT/gpu0.txt
t0=$SECONDS; LIMIT=${LIMIT:-300}
left() { [ $((SECONDS - t0 + $1)) -lt $LIMIT ]; }
pack() { tar czf $R/x.tgz -C $OUT .; }
($B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out /tmp/synth-27b --quiet) &
timeout 60 $B/mere_prefill_check --only wgemm --no-bench --quick >$OUT/prefill_check.log 2>&1; echo "prefill_check rc=$? $((SECONDS-t0))s"
grep -E "FAIL|swiglu|checks" $OUT/prefill_check.log | head -12; pack
MERE_CUDA_PREFILL_SWIGLU=fused timeout 80 $B/mere_engine_check . >$OUT/engine_check.log 2>&1; echo "ec swiglu fused rc=$? $((SECONDS-t0))s"
grep -E "FAIL|checks" $OUT/engine_check.log; pack
wait
left 100 && AB="MERE_CUDA_PDL=1;MERE_CUDA_PREFILL_SWIGLU=fused" timeout $((LIMIT - SECONDS + t0 - 5)) bash tools/cuda/engine_run.sh ab27; pack
echo "total $((SECONDS-t0))s"; pack
