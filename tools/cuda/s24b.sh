#!/usr/bin/env bash
# Session 24's second device call, on binaries of the session-24 tree: MERE_CUDA_MV_TUNE=2 (the
# load-time matvec shape tuning timed cold, across up to 16 layers of a kind, with R4U2 and the
# double-buffered register kernel R2DB/R4DB/R8DB among the candidates; qmatvec_tune.h):
#  1. cuda_check --quick --no-bench: the integer family's bitwise check now includes the DB shapes;
#  2. engine_check under MERE_CUDA_MV_TUNE=2 (parity, fusion pairs and MTP checks on its shapes);
#  3. ab27 / ab35 of MV_TUNE=1 (the default) vs 2; the chosen shapes are in each JSON's device line;
#  4. ncu of a 27B decode step under MV_TUNE=2 (the matvecs' DRAM rates against s24a's).
# If 2 passes and wins both, it becomes the default (qmatvec_tune.cpp matvec_tune_mode). LIMIT 420.
LIMIT_DEFAULT=420 . tools/cuda/call_prelude.sh
timeout -k 10 120 $B/mere_cuda_check --quick --no-bench >$OUT/cc.log 2>&1; cc=$?
echo "cuda_check rc=$cc $((SECONDS-t0))s"; grep -E "FAIL|checks|integer: all" $OUT/cc.log | head; pack
MERE_CUDA_MV_TUNE=2 timeout -k 10 110 $B/mere_engine_check . >$OUT/ec-tune2.log 2>&1; ec=$?
echo "ec [tune 2] rc=$ec $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec-tune2.log | head; pack
export PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s24b
if [ $cc -eq 0 ] && [ $ec -eq 0 ]; then
  left 100 && AB="MERE_CUDA_MV_TUNE=1;MERE_CUDA_MV_TUNE=2" timeout 110 bash tools/cuda/engine_run.sh ab27 2>&1; pack
  left 100 && AB="MERE_CUDA_MV_TUNE=1;MERE_CUDA_MV_TUNE=2" timeout 110 bash tools/cuda/engine_run.sh ab35 2>&1; pack
  for f in $OUT/ab27-v*-r1.json $OUT/ab35-v*-r1.json; do
    python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print(sys.argv[1].split('/')[-1], d['machine'].get('device','')[:900])" $f
  done
  left 60 && { MERE_CUDA_MV_TUNE=2 timeout 60 bash tools/cuda/engine_run.sh ncud27 2>&1 | head -8; pack; }
fi
echo "total $((SECONDS-t0))s"; pack
