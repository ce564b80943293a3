#!/usr/bin/env bash
# Session 13, last device call: the final defaults (tight MoE stream, glue v1) — engine_check,
# prefill_check, then the acceptance benches (5 reps) and the 8k-context ratio. LIMIT seconds (300).
R=$OUT; export OUT=/tmp/o B=build/engine-carry; mkdir -p $B $OUT; tar xJf build/carry/bin.tar.xz -C $B
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv | tee $OUT/gpu0.txt
t0=$SECONDS; LIMIT=${LIMIT:-300}
left() { [ $((SECONDS - t0 + $1)) -lt $LIMIT ]; }
pack() { tar czf $R/x.tgz -C $OUT .; }
$B/mere_engine_check . >$OUT/engine_check.log 2>&1; echo "ec rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/engine_check.log; pack
$B/mere_prefill_check --no-bench >$OUT/prefill_check.log 2>&1; echo "pcheck rc=$?"; grep -E "FAIL|checks:" $OUT/prefill_check.log; pack
left 120 && PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s13-final bash tools/cuda/engine_run.sh b27 b35; pack
left 45 && bash tools/cuda/engine_run.sh b27long; pack
echo "total $((SECONDS-t0))s"; pack
