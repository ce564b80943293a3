#!/usr/bin/env bash
# session 12, first device call: validate the cuBLASLt prefill (v4b dequant, overlap), A/B decode shapes
R=$OUT; export OUT=/tmp/o B=build/engine-carry; mkdir -p $B $OUT; tar xJf build/carry/bin.tar.xz -C $B
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv | tee $OUT/gpu0.txt
t0=$SECONDS
MERE_CUDA_MOE_PREFILL=stream $B/mere_engine_check . >$OUT/ec-default.log 2>&1; echo "ec moe stream rc=$? $((SECONDS-t0))s"; tail -2 $OUT/ec-default.log
MERE_CUDA_PREFILL=blas $B/mere_engine_check . >$OUT/ec-blas.log 2>&1; echo "ec blas rc=$? $((SECONDS-t0))s"; tail -2 $OUT/ec-blas.log
MERE_CUDA_PREFILL=blas MERE_CUDA_BLAS_OVERLAP=24 $B/mere_engine_check . >$OUT/ec-blas-ov24.log 2>&1; echo "ec blas ov24 rc=$?"; tail -2 $OUT/ec-blas-ov24.log; grep -i fail $OUT/ec-*.log | head
bash tools/cuda/engine_run.sh pcheck; echo "pcheck $((SECONDS-t0))s"
grep -iE "blas|overlap|moe_stream|MoE experts|FAIL" $OUT/prefill_check.log | tail -40
export MERE_CUDA_GM=db4 MVS="int mma"
AB="MERE_CUDA_PREFILL=gemm;MERE_CUDA_PREFILL=blas;MERE_CUDA_PREFILL=blas MERE_CUDA_BLAS_OVERLAP=24;MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=ring4;MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=db4" bash tools/cuda/engine_run.sh ab27 vb27
echo "ab27 vb27 $((SECONDS-t0))s"
unset MERE_CUDA_GM
AB="MERE_CUDA_MOE_PREFILL=grouped;MERE_CUDA_MOE_PREFILL=stream;MERE_CUDA_MOE_PREFILL=stream MERE_CUDA_PREFILL=blas;MERE_CUDA_MOE_PREFILL=stream MERE_CUDA_PREFILL=blas MERE_CUDA_BLAS_OVERLAP=24" bash tools/cuda/engine_run.sh ab35
echo "ab35 $((SECONDS-t0))s"
MERE_CUDA_PREFILL=blas MERE_CUDA_BLAS_OVERLAP=24 timeout $((570-SECONDS)) bash tools/cuda/engine_run.sh ncupf27 | tail -40
echo "total $((SECONDS-t0))s"
tar czf $R/x.tgz -C $OUT .
