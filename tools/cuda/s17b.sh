#!/usr/bin/env bash
# Session 17, second device call: the v6c wgmma prefill GEMM (MERE_CUDA_WGEMM=wide: 256-token tiles,
# the weights dequantised into shared memory while the previous group's wgmmas run, stream-K) —
# prefill_check --only wgemm (checks vs ops::linear / cuBLASLt, bench vs the cuBLASLt path), engine_check
# with it, prefill/decode A/Bs at both geometries. Prediction (written before the run, H100): 27B
# gate/up T = 512 ~150 µs (cuBLASLt path 207, v6a 355), 27B prefill ~7,500 tok/s (6,380).
# Binaries: build/carry/bin.tar.xz. LIMIT seconds (400).
LIMIT_DEFAULT=400 . tools/cuda/call_prelude.sh
($B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out /tmp/synth-27b --quiet) &
($B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out /tmp/synth-ab35 --quiet) &
timeout 200 $B/mere_prefill_check --only wgemm --json $OUT/wgemm.json >$OUT/wgemm.log 2>&1; echo "wgemm rc=$? $((SECONDS-t0))s"
grep -E "FAIL|checks|^wgemm wide|wgemm.*27B gate|blas dequant\+gemm|d2d" $OUT/wgemm.log | head -70; pack
W="MERE_CUDA_PREFILL=wgmma MERE_CUDA_WGEMM=wide"
env $W timeout 100 $B/mere_engine_check . >$OUT/ec-wide.log 2>&1
echo "ec wide rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec-wide.log; pack
wait
left 120 && AB="MERE_CUDA_PDL=1;$W" timeout 150 bash tools/cuda/engine_run.sh ab27; pack
left 90 && AB="MERE_CUDA_PDL=1;$W" timeout 120 bash tools/cuda/engine_run.sh ab35; pack
echo "total $((SECONDS-t0))s"; pack
