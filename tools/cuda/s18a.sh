#!/usr/bin/env bash
# Next session's first device call (written in session 17, whose device time ran out): what session
# 17 built but never ran —
#  * v6d, the warp-specialised wgmma prefill GEMM (MERE_CUDA_PREFILL=wgmma MERE_CUDA_WGEMM=ws: a TMA
#    producer warp + mbarriers feeding v6c's consumers): prefill_check --only wgemm (checks vs
#    ops::linear / cuBLASLt for every form, bench against the cuBLASLt path and v6c), engine_check
#    with it, 27B / 35B-A3B prefill A/Bs. Prediction (H100): gate/up T = 512 ~140 µs (v6c 211-215,
#    cuBLASLt path 206), tensor pipe ~70% (v6c 44.5%); 27B prefill ~7,300 tok/s (6,370).
#  * the prompt's SwiGLU inside the down projection's X preparation (MERE_CUDA_PREFILL_SWIGLU=fused):
#    its bitwise check (in prefill_check), engine_check with it, the 27B A/B (prediction +3%).
#  * issue 7: ncu per-kernel times of verification passes of width 1 and 8 at the 27B geometry (ncuv27).
# A hang in the new kernel is bounded by the timeouts. Binaries: build/carry/bin.tar.xz. LIMIT (520).
LIMIT_DEFAULT=520 . tools/cuda/call_prelude.sh
($B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out /tmp/synth-27b --quiet) &
($B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out /tmp/synth-ab35 --quiet) &
timeout -k 10 150 $B/mere_prefill_check --only wgemm --json $OUT/wgemm.json >$OUT/wgemm.log 2>&1; rc=$?; echo "wgemm rc=$rc $((SECONDS-t0))s"
grep -E "FAIL|checks|swiglu|^wgemm (wide|ws|wst) q4 27B|blas dequant\+gemm|d2d" $OUT/wgemm.log | head -60; pack
S=MERE_CUDA_PREFILL_SWIGLU=fused W="MERE_CUDA_PREFILL=wgmma MERE_CUDA_WGEMM=ws" W2="MERE_CUDA_PREFILL=wgmma MERE_CUDA_WGEMM=wst"
# the ws forms go into the engine only if every check passed (a hang or a wrong result stops them here)
if [ $rc -ne 0 ]; then echo "prefill_check failed or timed out: the ws forms stay out of the engine runs"; W= W2=; fi
env $W $S timeout 100 $B/mere_engine_check . >$OUT/ec-ws-swiglu.log 2>&1
echo "ec [$W $S] rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec-ws-swiglu.log; pack
wait
V27="MERE_CUDA_PDL=1;$S"; [ -n "$W" ] && V27="$V27;$W $S;$W2 $S"
left 160 && AB="$V27" timeout 240 bash tools/cuda/engine_run.sh ab27; pack
[ -n "$W" ] && left 100 && AB="MERE_CUDA_PDL=1;$W $S" timeout 150 bash tools/cuda/engine_run.sh ab35; pack
[ -n "$W" ] && left 40 && timeout -k 10 60 ncu --clock-control none --kernel-name-base mangled -k regex:wgemm_ws -s 20 -c 1 \
  --metrics regex:smsp__pcsamp_warps_issue_stalled_.*,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum \
  $B/mere_prefill_check --only wgemm --no-bench >$OUT/ncu-ws-stalls.txt 2>&1
grep -E "tensor_op|duration" $OUT/ncu-ws-stalls.txt
# issue 7: where a width-8 verification pass spends its time against width 1 (group-integer mma, db4)
left 120 && timeout 220 bash tools/cuda/engine_run.sh ncuv27 2>&1 | head -50; pack
echo "total $((SECONDS-t0))s"; pack
