#!/usr/bin/env bash
# Session 19, sixth device call: token quads in the group-integer matvec (MERE_CUDA_GM_QUAD=1: at
# T = 5..8 a warp takes 4 tokens of a (tile, split), so a width-8 launch runs twice the warps at
# T = 4's instructions a group; bitwise the same rows by construction).
# Prediction (written before the run): width-8 pass ~11.5 ms (no quads: 14.2), db4 w8/w1 ~5.8-6x.
#  * mere_cuda_check --kernels gmma --no-bench with quads: the family's T = 1..9 bitwise checks
#  * engine_check with mma, db4, quads; verify-bench 27B db4 with and without quads
#  * ncu of one T = 8 quad launch at [17408, 5120]
# LIMIT (400).
LIMIT_DEFAULT=400 . tools/cuda/call_prelude.sh
D27=/tmp/synth-27b
($B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet) &
export MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=db4
MERE_CUDA_GM_QUAD=1 timeout 120 $B/mere_cuda_check --kernels gmma --no-bench >$OUT/cc-quad.log 2>&1
echo "cuda_check [quad] rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks|group mma" $OUT/cc-quad.log | head -12; pack
MERE_CUDA_GM_QUAD=1 timeout 100 $B/mere_engine_check . >$OUT/ec-quad.log 2>&1
echo "ec [mma db4 quad] rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec-quad.log | head; pack
wait
vb() {  # tag env...
  local tag=$1; shift
  env "$@" timeout 120 $B/mere.run model verify-bench --model $D27 --backend cuda --widths 1,2,4,8,9 --prompt-tokens 128 \
    --passes 8 --reps 3 --json --quiet >"$OUT/verify-$tag.json" 2>"$OUT/verify-$tag.err"
  python3 - "$OUT/verify-$tag.json" "$tag" <<'PY'
import json, sys
try: d = json.load(open(sys.argv[1]))
except Exception as e: print(sys.argv[2], "no result:", e); sys.exit()
print(sys.argv[2], " ".join("w%d %.1f (x%.2f, %d mism, %.2f ms)" % (w["width"], w["tokens_per_s"]["median"], w["speedup_vs_width1"],
      w["oracle_mismatches"], w["pass_ms"]["median"]) for w in d["widths"]))
PY
  pack
}
left 120 && vb 27b-db4-quad MERE_CUDA_GM_QUAD=1 2>&1 | tee -a $OUT/vb.log
left 90 && vb 27b-db4 MERE_CUDA_GM_QUAD=0 2>&1 | tee -a $OUT/vb.log
left 50 && MERE_CUDA_GM_QUAD=1 timeout 45 ncu --clock-control none -k regex:qmatvec_gmma -s 7 -c 1 --section SpeedOfLight \
  --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats $B/mere_cuda_check --ncu \
  >$OUT/ncu-gm-quad-s7.txt 2>&1
grep -E "qmatvec_gmma|Duration|DRAM Throughput|L2 Cache Throughput|Issued Warp|Achieved Active" $OUT/ncu-gm-quad-s7.txt | cut -c1-120
rm -rf $D27; echo "total $((SECONDS-t0))s"; pack
