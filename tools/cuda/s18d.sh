#!/usr/bin/env bash
# Session 18, fourth device call: v6f (MERE_CUDA_WGEMM=wsd) — v6d's tiles with the producer
# warpgroup dequantising (TMA from its thread 0, scale words by cp.async three groups ahead) and the
# consumers only waiting and issuing wgmmas; bitwise v6d by construction. Then the session's 5-rep
# benches on the defaults (MERE_CUDA_PREFILL=auto with ws, the fused SwiGLU).
#  * prefill_check --only wgemm: every form incl. wsd vs ops::linear / cuBLASLt, wsd bitwise ws, bench
#  * only if that passed: engine_check with auto + wsd; 27B A/B auto(ws) vs auto(wsd); ncu of wsd
#  * b27 / b35: `mere.run bench --reps 5`, 512-token prompt, 128 generated (no ncu, no no-graph run)
# ncu: the 11th v6f launch of the checks = 27B gate/up at T = 512. LIMIT (480).
LIMIT_DEFAULT=480 . tools/cuda/call_prelude.sh
D27=/tmp/synth-27b
($B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet) &
($B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out /tmp/synth-35b --quiet) &
timeout -k 10 150 $B/mere_prefill_check --only wgemm --json $OUT/wgemm.json >$OUT/wgemm.log 2>&1; rc=$?; echo "wgemm rc=$rc $((SECONDS-t0))s"
grep -E "FAIL|checks|d2d|wsd q4\[|^blas dequant\+gemm|^wgemm" $OUT/wgemm.log | grep -vE "^ok" | head -40; pack
wait
if [ $rc -eq 0 ]; then
  MERE_CUDA_WGEMM=wsd timeout 100 $B/mere_engine_check . >$OUT/ec-wsd.log 2>&1
  echo "ec [wsd] rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec-wsd.log | head; pack
fi
# one engine_run.sh for both 27B stages: it removes the checkpoint when it exits
S27=b27; [ $rc -eq 0 ] && S27="ab27 b27"
left 150 && AB="MERE_CUDA_PDL=1;MERE_CUDA_WGEMM=wsd" PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s18d timeout 220 \
  bash tools/cuda/engine_run.sh $S27; pack
left 90 && PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s18d timeout 100 bash tools/cuda/engine_run.sh b35; pack
[ $rc -eq 0 ] && left 40 && timeout -k 10 60 ncu --clock-control none --kernel-name-base mangled -k regex:wgemm_ws_kernelILi1ELb1E -s 10 -c 1 \
  --metrics regex:smsp__pcsamp_warps_issue_stalled_.*,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,launch__block_size \
  $B/mere_prefill_check --only wgemm --no-bench >$OUT/ncu-wsd.txt 2>&1
grep -E "tensor_op|duration|Lb1EE|block_size" $OUT/ncu-wsd.txt | head
echo "total $((SECONDS-t0))s"; pack
