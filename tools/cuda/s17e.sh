#!/usr/bin/env bash
# Session 17, fifth device call: v6c after the stall data (copies issued under the wgmmas, scales two groups ahead, stream-K at least 32 groups a block, matrices under 2,048 rows on the cuBLASLt path) — the v6c wgmma prefill GEMM (MERE_CUDA_WGEMM=wide: 256-token tiles,
# the weights dequantised into shared memory while the previous group's wgmmas run, stream-K) —
# prefill_check --only wgemm (checks vs ops::linear / cuBLASLt, bench vs the cuBLASLt path), engine_check
# with it, prefill/decode A/Bs at both geometries. Prediction (written before the run, H100): 27B
# gate/up T = 512 ~180 µs (v6c first run 211, cuBLASLt path 207), 27B prefill ~6,800 tok/s (6,350).
# Binaries: build/carry/bin.tar.xz. LIMIT seconds (400).
R=$OUT; export OUT=/tmp/o B=build/engine-carry; mkdir -p $B $OUT; tar xJf build/carry/bin.tar.xz -C $B
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv | tee $OUT/gpu0.txt
t0=$SECONDS; LIMIT=${LIMIT:-400}
left() { [ $((SECONDS - t0 + $1)) -lt $LIMIT ]; }
pack() { tar czf $R/x.tgz -C $OUT .; }
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
left 40 && timeout 60 ncu --clock-control none --kernel-name-base mangled -k regex:ILi256E -s 20 -c 1 \
  --metrics regex:smsp__pcsamp_warps_issue_stalled_.*,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum \
  $B/mere_prefill_check --only wgemm --no-bench >$OUT/ncu-wide-stalls.txt 2>&1
grep -E "tensor_op|duration|stalled_(long|barrier|wait|selected|math|lg|dispatch|short|membar)[a-z_]* " $OUT/ncu-wide-stalls.txt | grep -v not_issued
echo "total $((SECONDS-t0))s"; pack
