#!/usr/bin/env bash
# Session 22, second device call: the routed experts with their scale words in shared memory and three
# buffers of codes (moe_stream v2d, MERE_CUDA_MOE_STREAM=deep|deep3): `mere_prefill_check --only moe`
# (every variant bitwise the register kernel, then each at the 35B-A3B shapes), engine_check with deep,
# ab35 (tight vs deep vs deep3, whole-tile grid now the default), ncu of deep's gate_up, then the 5-rep
# receipts b27 and b35 (b35 on the variant with the best median ab35 prefill). LIMIT 420.
# Ran on binaries of c14a582; deep / deep3 were removed after it (no engine gain), so the engine now
# refuses MERE_CUDA_MOE_STREAM=deep with an error naming the switch: this is a record of what ran.
LIMIT_DEFAULT=420 . tools/cuda/call_prelude.sh
timeout -k 10 90 $B/mere_prefill_check --only moe --json $OUT/moe.json >$OUT/moe.log 2>&1; rc=$?; echo "moe rc=$rc $((SECONDS-t0))s"
grep -E "FAIL|checks|moe_stream.*E=256" $OUT/moe.log | head -30; pack
[ $rc -ne 0 ] && { echo "checks failed: no engine runs"; exit 0; }
MERE_CUDA_MOE_STREAM=deep timeout 60 $B/mere_engine_check . >$OUT/ec-deep.log 2>&1; echo "ec [deep] rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec-deep.log | head; pack
export PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s22b AB="MERE_CUDA_MOE_STREAM=tight;MERE_CUDA_MOE_STREAM=deep;MERE_CUDA_MOE_STREAM=deep3"
left 130 && timeout 130 bash tools/cuda/engine_run.sh ab35 2>&1; pack
best=$(python3 - $OUT <<'PY'
import json, sys, glob, statistics
names = ["tight", "deep", "deep3"]
med = {}
for i, n in enumerate(names):
    v = [json.load(open(f))["runs"][0]["prefill_tok_s"]["median"] for f in glob.glob(f"{sys.argv[1]}/ab35-v{i}-r*.json")]
    if v: med[n] = statistics.median(v)
print(max(med, key=med.get) if med else "tight")
PY
)
echo "best moe stream: $best"
left 60 && { timeout 50 ncu --clock-control none --kernel-name-base demangled -k "regex:moe_stream_deep_kernel<.bool.1" -s 3 -c 1 \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section MemoryWorkloadAnalysis \
  $B/mere_prefill_check --only moe >$OUT/ncu-moe-deep.txt 2>&1
  grep -E "Duration|DRAM Throughput|Issued Warp|Warp Cycles Per Issued|Achieved Active|Registers Per" $OUT/ncu-moe-deep.txt; pack; }
left 100 && timeout 100 bash tools/cuda/engine_run.sh b27 2>&1; pack
left 70 && MERE_CUDA_MOE_STREAM=$best timeout 80 bash tools/cuda/engine_run.sh b35 2>&1; pack
for j in $OUT/engine-*-s22b.json; do python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print(sys.argv[1], d['machine']['device'].split('prefill GEMMs')[-1])" $j; done
echo "total $((SECONDS-t0))s"; pack
