#!/usr/bin/env bash
# Session 13, second device call (binaries: scripts/build-cuda.sh + pack into build/carry/bin.tar.xz as
# docs/cuda-kernels.md "How to run" says). With a time guard (LIMIT seconds, default 540):
#  1. prefill_check: the chunked cuBLASLt path (checks + the chunk-size sweep + the 27B layer bench)
#  2. engine_check with MERE_CUDA_BLAS_CHUNK_MB=16
#  3. ab27 / ab35: whole matrices vs 16 / 24 MB slices (prefill tok/s, GPU memory)
#  4. mere_glue_check (the prefill glue kernels, if built)
#  5. ncu of moe_stream_kernel<pair>: speed of light, warp states, scheduler, occupancy
R=$OUT; export OUT=/tmp/o B=build/engine-carry; mkdir -p $B $OUT; tar xJf build/carry/bin.tar.xz -C $B
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv | tee $OUT/gpu0.txt
t0=$SECONDS; LIMIT=${LIMIT:-540}
left() { [ $((SECONDS - t0 + $1)) -lt $LIMIT ]; }
pack() { tar czf $R/x.tgz -C $OUT .; }
bash tools/cuda/engine_run.sh pcheck; grep -E "FAIL|chunk|blas run|checks:" $OUT/prefill_check.log | tail -60
echo "pcheck $((SECONDS-t0))s"; pack
MERE_CUDA_BLAS_CHUNK_MB=16 $B/mere_engine_check . >$OUT/ec-chunk16.log 2>&1
echo "ec chunk16 rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec-chunk16.log; pack
ABTAG=-chunk AB="MERE_CUDA_BLAS_CHUNK_MB=0;MERE_CUDA_BLAS_CHUNK_MB=16;MERE_CUDA_BLAS_CHUNK_MB=24" bash tools/cuda/engine_run.sh ab27; pack
left 150 && ABTAG=-chunk AB="MERE_CUDA_BLAS_CHUNK_MB=0;MERE_CUDA_BLAS_CHUNK_MB=16" bash tools/cuda/engine_run.sh ab35; pack
for f in $OUT/ab27-chunk-*.json $OUT/ab35-chunk-*.json; do
  [ -f $f ] && python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print(sys.argv[1].split('/')[-1], 'gpu over weights+kv+state %.3f GiB'%d['memory']['gpu']['over_weights_kv_state_gib'])" $f
done
if [ -x $B/mere_glue_check ] && left 60; then
  $B/mere_glue_check --json $OUT/glue_check.json >$OUT/glue_check.log 2>&1; echo "glue_check rc=$?"
  grep -vE "^ok" $OUT/glue_check.log | tail -30; pack
fi
if left 100 && command -v ncu >/dev/null; then
  timeout 120 ncu --clock-control none -k regex:moe_stream_kernel -c 2 --section SpeedOfLight --section WarpStateStats \
    --section SchedulerStats --section Occupancy --section MemoryWorkloadAnalysis --section LaunchStats \
    $B/mere_prefill_check --bench-only >$OUT/ncu-moe-stream.txt 2>&1
  grep -E "moe_stream|Duration|Throughput|Issued Warp|No Eligible|Warp Cycles Per Issued|Achieved Active|Registers Per|Issue Slots|Stall|Theoretical Occ" $OUT/ncu-moe-stream.txt | head -40
fi
echo "total $((SECONDS-t0))s"; pack
