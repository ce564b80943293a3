#!/usr/bin/env bash
# RAN ONCE (session 24, H200, bench/cuda/s24/h200-a): every variant it measures was neutral or slower and
# was removed after the run (MERE_CUDA_PREP_STAGE, _ATTN_MERGE, _MOE_X, _MOE_PF no longer exist), so
# the A/B part no longer measures anything; kept as the record of what ran.
# Session 24's first device call (written in session 23, which had no device time left for it), on
# binaries rebuilt from HEAD:
#  1. MERE_CUDA_PREP_STAGE=smem (opt-in, never run): the decode RMSNorm and gated RMSNorm producers
#     prepare the matvec input from shared memory instead of reading their output back from L2.
#     Checks: cuda_check --quick --no-bench under smem (its step + norm check compares the staged
#     gated_rms_norm_prep bitwise with gdn_step_norm_prep, which never stages), engine_check under
#     smem (the fusion pairs: staged fused producers vs MERE_CUDA_FUSE=0 bitwise; CUDA vs CPU parity);
#  2. ab27 / ab35 decode of l2 vs smem (prediction, docs/cuda-kernels.md §5.8: 27B +1.5%, 35B-A3B +3%);
#  3. MERE_CUDA_MOE_X=rows (opt-in, never run): the experts' gate/up reads X by token through
#     row_token instead of a gathered copy: prefill_check --only moe (bitwise the gathered launch),
#     engine_check's prefill pair (default vs rows, bitwise), a third variant in ab35 (predicted ~+1%
#     35B-A3B prefill, docs/cuda-kernels.md "MoE prefill v2f");
#  4. MERE_CUDA_ATTN_MERGE=fused (opt-in, never run): the decode attention's span merge inside the
#     gate + prepare launch; engine_check's env pairs (moe-tiny, the 0.8B geometry: decode, T = 9
#     verification and MTP-head logits bitwise) and a variant in ab27 / ab35 (docs/cuda-kernels.md §5.9);
#  5. ncu of one decode step at both geometries with DRAM bytes (engine_run.sh ncud35 / ncud27): each
#     kernel group's rate on the H200, where session 23 had only H100 profiles of the decode step;
#     ncu sections of one decode launch of each MoE kernel (engine_run.sh ncumoe).
# If smem passes and wins both, make it the default (k_basic.cu prep_stage_smem); the same for rows
# (engine_prefill.cpp moe_x_rows) and the merge (engine.cpp attn_merge_fused_). LIMIT 580.
# Session 24 added MERE_CUDA_MOE_PF=on (k_moe.cu: earlier weight loads in the decode MoE launches;
# its bitwise pair is in engine_check) as a fifth ab35 variant: binaries of the session-24 tree.
LIMIT_DEFAULT=580 . tools/cuda/call_prelude.sh
timeout -k 10 60 $B/mere_prefill_check --only moe --no-bench >$OUT/moe.log 2>&1; moe=$?
echo "moe rc=$moe $((SECONDS-t0))s"; grep -E "FAIL|checks|by token" $OUT/moe.log | head; pack
MERE_CUDA_PREP_STAGE=smem timeout -k 10 120 $B/mere_cuda_check --quick --no-bench >$OUT/cc-smem.log 2>&1; cc=$?
echo "cuda_check [smem] rc=$cc $((SECONDS-t0))s"; grep -E "FAIL|checks|step \+ norm" $OUT/cc-smem.log | head; pack
MERE_CUDA_PREP_STAGE=smem timeout -k 10 110 $B/mere_engine_check . >$OUT/ec-smem.log 2>&1; ec=$?
echo "ec [smem] rc=$ec $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec-smem.log | head; pack
export PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s24a KEEP35=1
if [ $cc -eq 0 ] && [ $ec -eq 0 ]; then
  AB="MERE_CUDA_PREP_STAGE=l2;MERE_CUDA_PREP_STAGE=smem;MERE_CUDA_ATTN_MERGE=fused"
  A35=$AB; [ $moe -eq 0 ] && A35="$AB;MERE_CUDA_MOE_X=rows"
  left 160 && AB="$A35;MERE_CUDA_MOE_PF=on" timeout 170 bash tools/cuda/engine_run.sh ab35 2>&1; pack
  left 110 && AB=$AB timeout 120 bash tools/cuda/engine_run.sh ab27 2>&1; pack
fi
left 70 && { timeout 70 bash tools/cuda/engine_run.sh ncud35 2>&1 | head -24; pack; }
left 45 && { timeout 45 bash tools/cuda/engine_run.sh ncumoe 2>&1; pack; }
left 60 && { timeout 60 bash tools/cuda/engine_run.sh ncud27 2>&1 | head -24; pack; }
echo "total $((SECONDS-t0))s"; pack
