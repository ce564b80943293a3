#!/usr/bin/env bash
# Session 18, sixth device call: v6d's consumer with its scale / bias registers refilled after their
# last use (two register sets, even and odd groups) instead of copied through s2 -> s_n -> s_r at the
# loop's end (a copy waits for the load it copies). Same operands and order: bitwise the old v6d.
#  * prefill_check --only wgemm (checks + bench), the SASS of the ws kernel
#  * engine_check on the defaults; ab27 auto vs blas; b27 (5 reps)
#  * ncu source view (per-instruction stall samples) of one ws launch: 27B gate/up at T = 512 (the
#    27th ws launch of the checks) — where the next version's time goes
# LIMIT (300).
LIMIT_DEFAULT=300 . tools/cuda/call_prelude.sh
D27=/tmp/synth-27b
($B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet) &
timeout -k 10 120 $B/mere_prefill_check --only wgemm --json $OUT/wgemm.json >$OUT/wgemm.log 2>&1; rc=$?; echo "wgemm rc=$rc $((SECONDS-t0))s"
grep -E "FAIL|checks|d2d|^wgemm ws" $OUT/wgemm.log | head -12; pack
cuobjdump -sass $B/mere_prefill_check | awk '/Function : /{f=($0 ~ /wgemm_ws_kernelILi1ELb0E/)} f' >$OUT/sass-ws.txt
echo "sass: $(wc -l <$OUT/sass-ws.txt) lines, $(grep -c 'LDG' $OUT/sass-ws.txt) LDG, $(grep -c 'MOV ' $OUT/sass-ws.txt) MOV"; gzip -9 $OUT/sass-ws.txt; pack
[ $rc -ne 0 ] && { echo "checks failed: no engine runs"; wait; exit 0; }
timeout 90 $B/mere_engine_check . >$OUT/ec-auto.log 2>&1
echo "ec rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec-auto.log | head; pack
wait
left 110 && AB="MERE_CUDA_PDL=1;MERE_CUDA_PREFILL=blas" PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s18f timeout 150 \
  bash tools/cuda/engine_run.sh ab27 b27; pack
python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print([x for x in d['machine']['device'].split('; ') if 'ws' in x])" $OUT/engine-27b-s18f.json
left 30 && timeout -k 5 70 ncu --clock-control none -k regex:wgemm_ws_kernelILi1ELb0E -s 26 -c 1 --section WarpStateStats \
  --section SourceCounters --page source --print-source sass --csv $B/mere_prefill_check --only wgemm --no-bench >$OUT/ncu-ws-src.csv 2>&1
echo "ncu src: $(wc -l <$OUT/ncu-ws-src.csv) lines"; gzip -9 $OUT/ncu-ws-src.csv
echo "total $((SECONDS-t0))s"; pack
