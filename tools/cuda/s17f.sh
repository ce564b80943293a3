#!/usr/bin/env bash
# Session 17, last device call: where a 512-token prompt's time goes — ncu per-kernel times of one
# prefill pass (the defaults: cuBLASLt path, moe_stream, the recurrent GDN kernel) at the 27B and
# 35B-A3B geometries (issue 6 asks for per-kernel timings where a target is missed).
# Binaries: build/carry/bin.tar.xz. LIMIT seconds (400).
LIMIT_DEFAULT=400 . tools/cuda/call_prelude.sh
($B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out /tmp/synth-ab35 --quiet) &
timeout 230 bash tools/cuda/engine_run.sh ncupf27 2>&1 | head -40; pack
wait
left 100 && timeout $((LIMIT - SECONDS + t0 - 5)) bash tools/cuda/engine_run.sh ncupf35 2>&1 | head -40; pack
gzip -f $OUT/ncu-pf27.csv $OUT/ncu-pf35.csv 2>/dev/null
echo "total $((SECONDS-t0))s"; pack
