#!/usr/bin/env bash
# Session 29, after the review commit c551bb5 (mtp_forward / draft_greedy share upload_head_rows):
# engine_check's bundled dense model section (CUDA+MTP == CUDA, CUDA == CPU) on the refactored
# binaries. Carried: mere.run and mere_engine_check (CARRY=build/carry/run.tar.xz); the MoE model aside.
CARRY=build/carry/run.tar.xz LIMIT_DEFAULT=${LIMIT:-200} . tools/cuda/call_prelude.sh
timeout -k 5 150 $B/mere_engine_check . qwen35-dense-tiny >$OUT/ec-dense.log 2>&1
echo "engine_check dense rc=$?"; grep -E "FAIL|engine_check:|greedy.*(CPU|MTP)" $OUT/ec-dense.log | cut -c1-200 | head -8
echo "total $((SECONDS-t0))s"; pack
