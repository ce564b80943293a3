#!/usr/bin/env bash
# Session 13, third device call (binaries: scripts/build-cuda.sh mere.run mere_engine_check
# mere_prefill_check mere_glue_check + pack into build/carry/bin.tar.xz). With a time guard (LIMIT
# seconds, default 540):
#  1. mere_glue_check: the prefill glue kernels (bitwise the old ones; old vs new times)
#  2. prefill_check: moe_stream tight / L2-prefetch variants (bitwise checks + benches)
#  3. engine_check (the glue kernels are on every prefill path) and with the best stream variant
#  4. ab35: stream default vs prefetch 4 vs tight; ab27 default (27B glue gain vs s13b's numbers)
R=$OUT; export OUT=/tmp/o B=build/engine-carry; mkdir -p $B $OUT; tar xJf build/carry/bin.tar.xz -C $B
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv | tee $OUT/gpu0.txt
t0=$SECONDS; LIMIT=${LIMIT:-540}
left() { [ $((SECONDS - t0 + $1)) -lt $LIMIT ]; }
pack() { tar czf $R/x.tgz -C $OUT .; }
if [ -x $B/mere_glue_check ]; then
  $B/mere_glue_check --json $OUT/glue_check.json >$OUT/glue_check.log 2>&1; echo "glue_check rc=$? $((SECONDS-t0))s"
  grep -vE "^ok" $OUT/glue_check.log | tail -30
  timeout 120 compute-sanitizer --tool memcheck $B/mere_glue_check --no-bench >$OUT/glue_memcheck.log 2>&1; echo "memcheck rc=$?"; tail -2 $OUT/glue_memcheck.log; pack
fi
bash tools/cuda/engine_run.sh pcheck; grep -E "FAIL|moe_stream|checks:" $OUT/prefill_check.log | tail -30
echo "pcheck $((SECONDS-t0))s"; pack
$B/mere_engine_check . >$OUT/engine_check.log 2>&1; echo "ec rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/engine_check.log; pack
MERE_CUDA_MOE_PREFETCH=4 $B/mere_engine_check . >$OUT/ec-pf4.log 2>&1; echo "ec pf4 rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec-pf4.log; pack
AB="MERE_CUDA_MOE_PREFETCH=0;MERE_CUDA_MOE_PREFETCH=4;MERE_CUDA_MOE_STREAM=tight;MERE_CUDA_MOE_PREFETCH=8" bash tools/cuda/engine_run.sh ab35; pack
left 100 && AB="MERE_CUDA_PREFILL=blas" bash tools/cuda/engine_run.sh ab27; pack
echo "total $((SECONDS-t0))s"; pack
