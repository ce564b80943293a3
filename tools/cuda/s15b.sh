#!/usr/bin/env bash
# Session 15's second device call: the new defaults (MoE routing in gate/up, 8-bit shape 1,4 for
# small launches, GDN step + gated norm in one launch) and the measured matvec shapes
# (MERE_CUDA_MV_TUNE=1). Binaries: build/carry/bin.tar.xz (mere.run, mere_engine_check,
# mere_cuda_check). LIMIT seconds (540):
#  1. mere_cuda_check --no-bench (new: gdn_step_norm_prep bitwise vs the two launches)
#  2. engine_check (new pairs: routing separate, step norm separate; the 0.8B-geometry synthetic
#     checkpoint with fusion and step-norm pairs), then the whole engine_check with MERE_CUDA_MV_TUNE=1
#  3. ab27 / ab35: session-14 defaults vs the new defaults vs the new defaults + MV_TUNE=1
#  4. vb27 with MV_TUNE=1 (issue 7 widths), the pdl greedy stage
R=$OUT; export OUT=/tmp/o B=build/engine-carry; mkdir -p $B $OUT; tar xJf build/carry/bin.tar.xz -C $B
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv | tee $OUT/gpu0.txt
t0=$SECONDS; LIMIT=${LIMIT:-540}
left() { [ $((SECONDS - t0 + $1)) -lt $LIMIT ]; }
pack() { tar czf $R/x.tgz -C $OUT .; }
($B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out /tmp/synth-27b --quiet) &
timeout 150 $B/mere_cuda_check --no-bench >$OUT/cuda_check.log 2>&1; echo "cuda_check rc=$? $((SECONDS-t0))s"
grep -E "FAIL|gdn_step_norm|checks" $OUT/cuda_check.log | tail -14; pack
timeout 150 $B/mere_engine_check . >$OUT/engine_check.log 2>&1; echo "ec rc=$? $((SECONDS-t0))s"
grep -E "FAIL|checks|STEP_NORM|ROUTE|0.8b" $OUT/engine_check.log; pack
wait
OLD="MERE_CUDA_MOE_ROUTE=separate MERE_CUDA_Q8_SHAPE=4,2 MERE_CUDA_STEP_NORM=separate"
left 150 && AB="$OLD;MERE_CUDA_PDL=1;MERE_CUDA_MV_TUNE=1" timeout 200 bash tools/cuda/engine_run.sh ab27; pack
python3 -c "import json;print(json.load(open('$OUT/ab27-v2-r1.json'))['machine']['device'])" 2>/dev/null | tee $OUT/tune27.txt
left 100 && AB="$OLD;MERE_CUDA_PDL=1;MERE_CUDA_MV_TUNE=1" timeout 170 bash tools/cuda/engine_run.sh ab35; pack
python3 -c "import json;print(json.load(open('$OUT/ab35-v2-r1.json'))['machine']['device'])" 2>/dev/null | tee $OUT/tune35.txt
left 60 && { MERE_CUDA_MV_TUNE=1 timeout 150 $B/mere_engine_check . >$OUT/ec-tune.log 2>&1; echo "ec tune rc=$? $((SECONDS-t0))s"
  grep -E "FAIL|checks" $OUT/ec-tune.log; pack; }
# the acceptance-style benches (5 reps) on the new defaults, tuned shapes only if they won ab27
T27=$(python3 - "$OUT" <<'PY'
import glob, json, re, statistics, sys
o = sys.argv[1]
ok = glob.glob(o + "/ec-tune.log") and re.search(r"checks, 0 failed", open(o + "/ec-tune.log").read())
med = lambda i: statistics.median([json.load(open(f))["runs"][0]["decode_tok_s"]["median"] for f in glob.glob("%s/ab27-v%d-r*.json" % (o, i))] or [0])
print("MERE_CUDA_MV_TUNE=1" if ok and med(2) > med(1) * 1.005 else "MERE_CUDA_PDL=1")
PY
)
echo "acceptance env 27B: $T27" | tee $OUT/acceptance-env.txt
left 100 && env $T27 PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s15b timeout 120 bash tools/cuda/engine_run.sh b27 b27long; pack
left 60 && PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s15b timeout 80 bash tools/cuda/engine_run.sh b35; pack
left 70 && env $T27 MVS="int" timeout 100 bash tools/cuda/engine_run.sh vb27; pack
left 60 && timeout 100 bash tools/cuda/engine_run.sh pdl 2>&1 | tail -1; pack
echo "total $((SECONDS-t0))s"; pack
