#!/usr/bin/env bash
# Session 16, first device call: the checks of what sessions 15-16 built but never ran — the GDN step
# + gated norm launch (MERE_CUDA_STEP_NORM=fused), the per-launch matvec shapes measured at load
# (MERE_CUDA_MV_TUNE=1), the wgmma prefill GEMMs (MERE_CUDA_PREFILL=wgmma, whole tiles or MERE_CUDA_WGEMM=streamk:
# prefill_check --only wgemm, its checks and its benchmark against the cuBLASLt path) — then engine_check with all of them on,
# decode / prefill A/Bs at both geometries, and engine_check with the defaults if time is left. Binaries: build/carry/bin.tar.xz (mere.run,
# mere_engine_check, mere_cuda_check, mere_prefill_check). LIMIT seconds (540).
. tools/cuda/call_prelude.sh
($B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out /tmp/synth-27b --quiet) &
($B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out /tmp/synth-ab35 --quiet) &
timeout 200 $B/mere_prefill_check --only wgemm --json $OUT/wgemm.json >$OUT/wgemm.log 2>&1; echo "wgemm rc=$? $((SECONDS-t0))s"
grep -E "FAIL|checks|^wgemm|blas dequant\+gemm|moe_stream.*tight|wgemm_moe|d2d" $OUT/wgemm.log | head -60; pack
timeout 60 $B/mere_cuda_check --no-bench >$OUT/cuda_check.log 2>&1; echo "cuda_check rc=$? $((SECONDS-t0))s"
grep -E "FAIL|gdn_step_norm|checks" $OUT/cuda_check.log | tail -8; pack
S=MERE_CUDA_STEP_NORM=fused U=MERE_CUDA_MV_TUNE=1 W=MERE_CUDA_PREFILL=wgmma K=MERE_CUDA_WGEMM=streamk M=MERE_CUDA_MOE_PREFILL=wgmma
env $S $U $W $K $M timeout 100 $B/mere_engine_check . >$OUT/ec-new.log 2>&1
echo "ec step+tune+wgmma streamk+moe rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec-new.log; pack
wait
V35="MERE_CUDA_PDL=1;$S;$S $U;$S $U $W $K $M"; V27="MERE_CUDA_PDL=1;$S $U;$S $U $W;$S $U $W $K"
left 120 && AB="$V27" timeout 170 bash tools/cuda/engine_run.sh ab27; pack
left 100 && AB="$V35" timeout 150 bash tools/cuda/engine_run.sh ab35; pack
left 60 && { timeout 100 $B/mere_engine_check . >$OUT/engine_check.log 2>&1; echo "ec default rc=$? $((SECONDS-t0))s";
  grep -E "FAIL|checks" $OUT/engine_check.log; }; pack
python3 -c "import json;print(json.load(open('$OUT/ab27-v1-r1.json'))['machine']['device'])" 2>/dev/null | tee $OUT/tune27.txt
python3 -c "import json;print(json.load(open('$OUT/ab35-v2-r1.json'))['machine']['device'])" 2>/dev/null | tee $OUT/tune35.txt
echo "total $((SECONDS-t0))s"; pack
