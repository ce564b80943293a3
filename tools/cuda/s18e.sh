#!/usr/bin/env bash
# Session 18, fifth device call: MERE_CUDA_PREFILL=auto now measures ws against the cuBLASLt path on
# each of the engine's shapes at its first prompt (prefill_choice.h) instead of the 2^25-weight rule;
# v6f (wsd) with the TMA issue no longer waiting on the consumers (s18d: 307 µs, the warp waited for
# the consumers' group j - 1 every group).
#  * prefill_check --only wgemm (wsd checks, wsd bitwise ws, bench)
#  * engine_check on the defaults; ab27: auto vs blas (+ auto with wsd when its checks passed), then
#    b27 (5 reps, with the measured choices from the bench JSON); ab35 auto vs blas, b35 (5 reps)
# LIMIT (470).
LIMIT_DEFAULT=470 . tools/cuda/call_prelude.sh
D27=/tmp/synth-27b
($B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet) &
($B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out /tmp/synth-35b --quiet) &
timeout -k 10 150 $B/mere_prefill_check --only wgemm --json $OUT/wgemm.json >$OUT/wgemm.log 2>&1; rc=$?; echo "wgemm rc=$rc $((SECONDS-t0))s"
grep -E "FAIL|checks|d2d|wsd q4\[|^wgemm" $OUT/wgemm.log | grep -vE "^ok" | head -30; pack
timeout 100 $B/mere_engine_check . >$OUT/ec-auto.log 2>&1
echo "ec [auto, measured] rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec-auto.log | head; pack
wait
V="MERE_CUDA_PDL=1;MERE_CUDA_PREFILL=blas"; [ $rc -eq 0 ] && V="$V;MERE_CUDA_WGEMM=wsd"
choices() { python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print(d['machine']['device'].split('; ')[-1])" "$1"; }
left 150 && AB="$V" PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s18e timeout 230 bash tools/cuda/engine_run.sh ab27 b27; pack
choices $OUT/engine-27b-s18e.json
ln -s /tmp/synth-35b /tmp/synth-ab35
left 90 && AB="MERE_CUDA_PDL=1;MERE_CUDA_PREFILL=blas" timeout 100 bash tools/cuda/engine_run.sh ab35; pack
left 40 && PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s18e timeout 60 bash tools/cuda/engine_run.sh b35; pack
choices $OUT/engine-35b-s18e.json
echo "total $((SECONDS-t0))s"; pack
