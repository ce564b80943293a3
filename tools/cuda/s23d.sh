#!/usr/bin/env bash
# Session 23's last call (s23c.sh did not run: refused starts left ~590 s of device time; this holds its
# checks and A/B without its two ncu runs, plus the receipts): on the binaries of 4303363 —
# engine_check on the defaults (the prefill glue pairs), ab35 / ab27 of MERE_CUDA_PREFILL_GLUE=separate
# vs fused vs combine, then the 5-rep receipts b27 / b35 on the defaults (512-token prompt, 128
# generated). LIMIT 330.
LIMIT_DEFAULT=330 . tools/cuda/call_prelude.sh
timeout -k 10 75 $B/mere_engine_check . >$OUT/ec.log 2>&1; ec=$?; echo "ec [defaults] rc=$ec $((SECONDS-t0))s"
grep -E "FAIL|checks|glue" $OUT/ec.log | head; pack
[ $ec -ne 0 ] && { echo "engine_check failed: no engine runs"; exit 0; }
export PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s23d AB="MERE_CUDA_PREFILL_GLUE=separate;MERE_CUDA_PREFILL_GLUE=fused;MERE_CUDA_PREFILL_GLUE=combine"
left 100 && timeout 110 bash tools/cuda/engine_run.sh ab35 2>&1; pack
left 130 && timeout 140 bash tools/cuda/engine_run.sh ab27 b27 2>&1 | grep -v "^memory"; pack
left 60 && timeout 70 bash tools/cuda/engine_run.sh b35 2>&1 | grep -v "^memory"; pack
for j in $OUT/engine-*-s23d.json; do python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print(sys.argv[1], json.dumps(d.get('memory')))" $j; done
echo "total $((SECONDS-t0))s"; pack
