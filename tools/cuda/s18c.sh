#!/usr/bin/env bash
# Session 18, third device call: v6e — the wgmma prefill GEMM's scales and biases staged in shared
# memory by three producer warps (s18b's ncu of v6d: 35% of the consumers' stall samples on the
# scale loads' long scoreboard, 7% on the load queue) — and the new default MERE_CUDA_PREFILL=auto
# (ws on 4-bit matrices of >= 2^25 weights, cuBLASLt on the rest).
#  * prefill_check --only wgemm (every form vs ops::linear / cuBLASLt, then the bench)
#  * only if that passed: engine_check on the defaults, 27B A/B blas vs auto vs wgmma+ws everywhere,
#    35B-A3B A/B blas vs auto, ncu tensor-pipe rate and stalls of one ws launch
# LIMIT (420).
LIMIT_DEFAULT=420 . tools/cuda/call_prelude.sh
($B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out /tmp/synth-27b --quiet) &
($B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out /tmp/synth-ab35 --quiet) &
timeout -k 10 150 $B/mere_prefill_check --only wgemm --json $OUT/wgemm.json >$OUT/wgemm.log 2>&1; rc=$?; echo "wgemm rc=$rc $((SECONDS-t0))s"
grep -vE "^ok" $OUT/wgemm.log | grep -E "FAIL|checks|d2d|27B \[|27B gate/up T=2048" | grep -vE "wgemm (q4|stream-K)" | head -50; pack
if [ $rc -ne 0 ]; then echo "prefill_check failed or timed out: no engine runs"; wait; exit 0; fi
timeout 100 $B/mere_engine_check . >$OUT/ec-auto.log 2>&1
echo "ec [auto] rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec-auto.log | head; pack
wait
left 160 && AB="MERE_CUDA_PREFILL=blas;MERE_CUDA_PDL=1;MERE_CUDA_PREFILL=wgmma MERE_CUDA_WGEMM=ws" timeout 240 bash tools/cuda/engine_run.sh ab27; pack
left 100 && AB="MERE_CUDA_PREFILL=blas;MERE_CUDA_PDL=1" timeout 150 bash tools/cuda/engine_run.sh ab35; pack
left 40 && timeout -k 10 60 ncu --clock-control none --kernel-name-base mangled -k regex:wgemm_ws -s 20 -c 1 \
  --metrics regex:smsp__pcsamp_warps_issue_stalled_.*,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum \
  $B/mere_prefill_check --only wgemm --no-bench >$OUT/ncu-ws-stalls.txt 2>&1
grep -E "tensor_op|duration" $OUT/ncu-ws-stalls.txt
echo "total $((SECONDS-t0))s"; pack
