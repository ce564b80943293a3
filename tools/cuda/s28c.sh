#!/usr/bin/env bash
# Session 28: engine_check's sections of one bundled model (MODEL, in the tree alone: 64 MiB) with
# b2928b0's binaries: MTP fixtures, parity (CUDA vs CPU, MTP vs plain on 8 + 8 prompts, scheduling
# variants), and the model's env pairs.
LIMIT_DEFAULT=500 . tools/cuda/call_prelude.sh
f=$OUT/ec-$MODEL.log
timeout -k 5 480 $B/mere_engine_check . "$MODEL" >$f 2>&1
echo "== engine_check '$MODEL' rc=$? $((SECONDS-t0))s"; grep -E "FAIL|PASS|diverges|differs|engine_check:" $f | cut -c1-220 | head -60; pack
