#!/usr/bin/env bash
# Session 16, second device call: the 5-rep benches with the defaults chosen from s16a (27B decode +
# prefill, 27B at 8,192 context, 35B-A3B), oracle-fed verification at the 27B geometry with the
# forced-depth greedy parity (issue 7), the same widths with the group-integer tensor-core matvec in
# the shapes that never ran in the engine (MERE_CUDA_QMATVEC=mma, MERE_CUDA_GM=db4 / ring4; one kernel
# for every width), and ncu per-kernel times of one 35B-A3B decode step with warm caches.
# Binaries: build/carry/bin.tar.xz. LIMIT seconds (540). ENV: extra settings for every stage.
. tools/cuda/call_prelude.sh
D27=/tmp/synth-27b
$B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet
echo "synth $((SECONDS-t0))s"
# engine_run.sh removes $D27 when it exits: the verification runs go first
vb() {  # env... : verify-bench at the 27B geometry, widths 1..9 (and parity when PAR is set)
  local tag=$(echo "$*" | tr ' =' '_-')
  env "$@" timeout 150 $B/mere.run model verify-bench --model $D27 --backend cuda --widths 1,2,4,8,9 --prompt-tokens 128 \
    --passes 8 --reps 3 ${PAR:+--parity-depths $PAR} --json --quiet >"$OUT/verify-27b-$tag.json" 2>"$OUT/verify-27b-$tag.err"
  python3 - "$OUT/verify-27b-$tag.json" "$*" <<'PY'
import json, sys
try: d = json.load(open(sys.argv[1]))
except Exception as e: print(sys.argv[2], "no result:", e); sys.exit()
print(sys.argv[2], "| head/target %.3f |" % d["head_cost_ratio"],
      " ".join("w%d %.1f (x%.2f)" % (w["width"], w["tokens_per_s"]["median"], w["speedup_vs_width1"]) for w in d["widths"]))
if d.get("parity") is not None: print(sys.argv[2], "forced-depth parity:", json.dumps(d["parity"]))
PY
  pack
}
PAR=1,4,7 vb MERE_CUDA_QMATVEC=int ${ENV:-} 2>&1 | tee -a $OUT/vb.log
for gm in db4 ring4; do left 200 && vb MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=$gm ${ENV:-} 2>&1 | tee -a $OUT/vb.log; done
left 150 && env ${ENV:-} PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s16b timeout 150 bash tools/cuda/engine_run.sh b27 b27long; pack
left 60 && env ${ENV:-} PROMPT=512 GEN=128 NOGRAPH= NCU_CACHE=none TAG=s16b timeout $((LIMIT - SECONDS + t0 - 5)) \
  bash tools/cuda/engine_run.sh b35; pack
echo "total $((SECONDS-t0))s"; pack
