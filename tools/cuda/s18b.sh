#!/usr/bin/env bash
# Session 18, second device call: v6d (the warp-specialised wgmma prefill GEMM) after its fix — s18a
# found the 288-thread block at 224 registers does not fit an SM (9 warps put 3 on one register-file
# quarter); it is now 384 threads with setmaxnreg (producer warpgroup 40, consumers 232).
#  * prefill_check --only wgemm: every wgmma form vs ops::linear / the cuBLASLt path, and the bench
#  * only if that passed: engine_check with ws and with wst; 27B A/B default vs ws vs wst; 35B-A3B
#    A/B default vs ws; ncu tensor-pipe rate and stalls of one ws launch
# The SwiGLU fusion is now the default (s18a: engine_check 49/49, 27B prefill +3.3%). LIMIT (420).
LIMIT_DEFAULT=420 . tools/cuda/call_prelude.sh
($B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out /tmp/synth-27b --quiet) &
($B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out /tmp/synth-ab35 --quiet) &
timeout -k 10 150 $B/mere_prefill_check --only wgemm --json $OUT/wgemm.json >$OUT/wgemm.log 2>&1; rc=$?; echo "wgemm rc=$rc $((SECONDS-t0))s"
grep -vE "^ok" $OUT/wgemm.log | head -70; pack
if [ $rc -ne 0 ]; then echo "prefill_check failed or timed out: no engine runs of the ws forms"; wait; exit 0; fi
W="MERE_CUDA_PREFILL=wgmma MERE_CUDA_WGEMM=ws" W2="MERE_CUDA_PREFILL=wgmma MERE_CUDA_WGEMM=wst"
for v in "$W" "$W2"; do
  env $v timeout 100 $B/mere_engine_check . >$OUT/ec-${v##*=}.log 2>&1
  echo "ec [$v] rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec-${v##*=}.log | head; pack
done
wait
left 160 && AB="MERE_CUDA_PDL=1;$W;$W2" timeout 240 bash tools/cuda/engine_run.sh ab27; pack
left 100 && AB="MERE_CUDA_PDL=1;$W" timeout 150 bash tools/cuda/engine_run.sh ab35; pack
left 40 && timeout -k 10 60 ncu --clock-control none --kernel-name-base mangled -k regex:wgemm_ws -s 20 -c 1 \
  --metrics regex:smsp__pcsamp_warps_issue_stalled_.*,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum \
  $B/mere_prefill_check --only wgemm --no-bench >$OUT/ncu-ws-stalls.txt 2>&1
grep -E "tensor_op|duration" $OUT/ncu-ws-stalls.txt
echo "total $((SECONDS-t0))s"; pack
