#!/usr/bin/env bash
# session 12, first device call: engine checks on the MoE weight stream and the cuBLASLt prefill
# (v4b dequant, overlap), their kernel checks, then A/Bs in priority order; optional stages only
# while time is left (LIMIT seconds, default 540).
R=$OUT; export OUT=/tmp/o B=build/engine-carry; mkdir -p $B $OUT; tar xJf build/carry/bin.tar.xz -C $B
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv | tee $OUT/gpu0.txt
t0=$SECONDS; LIMIT=${LIMIT:-540}
left() { [ $((SECONDS - t0 + $1)) -lt $LIMIT ]; }
pack() { tar czf $R/x.tgz -C $OUT .; }
MERE_CUDA_MOE_PREFILL=stream $B/mere_engine_check . >$OUT/ec-moe-stream.log 2>&1; echo "ec moe stream rc=$? $((SECONDS-t0))s"; tail -1 $OUT/ec-moe-stream.log
MERE_CUDA_MOE_PREFILL=stream MERE_CUDA_PREFILL=blas MERE_CUDA_BLAS_OVERLAP=24 $B/mere_engine_check . >$OUT/ec-blas-ov24-stream.log 2>&1; echo "ec blas ov24 + moe stream rc=$?"; tail -1 $OUT/ec-blas-ov24-stream.log; grep -i fail $OUT/ec-*.log | head
pack
bash tools/cuda/engine_run.sh pcheck; echo "pcheck $((SECONDS-t0))s"
grep -iE "moe_stream|MoE experts|chunked|blas .*overlap|layer|FAIL" $OUT/prefill_check.log | tail -30
pack
AB="MERE_CUDA_MOE_PREFILL=grouped;MERE_CUDA_MOE_PREFILL=stream MERE_CUDA_PREFILL=blas;MERE_CUDA_MOE_PREFILL=stream MERE_CUDA_PREFILL=blas MERE_CUDA_GDN_PREFILL=chunked" bash tools/cuda/engine_run.sh ab35
echo "ab35 $((SECONDS-t0))s"; pack
left 120 && AB="MERE_CUDA_PREFILL=gemm;MERE_CUDA_PREFILL=blas;MERE_CUDA_PREFILL=blas MERE_CUDA_BLAS_OVERLAP=24;MERE_CUDA_PREFILL=blas MERE_CUDA_GDN_PREFILL=chunked" bash tools/cuda/engine_run.sh ab27
echo "ab27 $((SECONDS-t0))s"; pack
left 120 && ABTAG=mv AB="MERE_CUDA_QMATVEC=int;MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=ring4;MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=db4" bash tools/cuda/engine_run.sh ab27
left 60 && MERE_CUDA_GM=db4 MVS=mma bash tools/cuda/engine_run.sh vb27
echo "total $((SECONDS-t0))s"
pack
