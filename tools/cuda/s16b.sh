#!/usr/bin/env bash
# Session 16, second device call (issue 7's width-8 ratio): the group-integer tensor-core matvec
# (MERE_CUDA_QMATVEC=mma, one kernel for every width) in the engine with the two shapes that never
# ran there (db4, ring4; session 11 measured db and ring2 only), against the integer default:
# engine_check under mma db4, oracle-fed verification widths 1..9 per variant, 27B decode A/B, then
# ncu per-kernel times of one 35B-A3B decode step with warm caches (NCU_CACHE=none).
# Binaries: build/carry/bin.tar.xz. LIMIT seconds (540).
R=$OUT; export OUT=/tmp/o B=build/engine-carry; mkdir -p $B $OUT; tar xJf build/carry/bin.tar.xz -C $B
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv | tee $OUT/gpu0.txt
t0=$SECONDS; LIMIT=${LIMIT:-540}
left() { [ $((SECONDS - t0 + $1)) -lt $LIMIT ]; }
pack() { tar czf $R/x.tgz -C $OUT .; }
D27=/tmp/synth-27b
($B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet) &
MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=db4 timeout 110 $B/mere_engine_check . >$OUT/ec-mma-db4.log 2>&1
echo "ec mma db4 rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks" $OUT/ec-mma-db4.log; pack
wait
M="MERE_CUDA_QMATVEC=mma MERE_CUDA_GM"
V="MERE_CUDA_QMATVEC=int;$M=db;$M=db4;$M=ring4"
IFS=';' read -ra VS <<<"$V"
for v in "${VS[@]}"; do
  left 70 || break
  tag=$(echo "$v" | tr ' =' '_-')
  env $v timeout 90 $B/mere.run model verify-bench --model $D27 --backend cuda --widths 1,2,4,8,9 --prompt-tokens 128 \
    --passes 8 --reps 3 --json --quiet >"$OUT/verify-27b-$tag.json" 2>"$OUT/verify-27b-$tag.err"
  python3 - "$OUT/verify-27b-$tag.json" "$v" <<'PY'
import json, sys
try: d = json.load(open(sys.argv[1]))
except Exception as e: print(sys.argv[2], "no result:", e); sys.exit()
print(sys.argv[2], "| head/target %.3f |" % d["head_cost_ratio"],
      " ".join("w%d %.1f (x%.2f)" % (w["width"], w["tokens_per_s"]["median"], w["speedup_vs_width1"]) for w in d["widths"]))
PY
  pack
done 2>&1 | tee $OUT/vb.log
# engine_run.sh reuses $D27 and removes it when it exits
left 200 && AB="$V" timeout 200 bash tools/cuda/engine_run.sh ab27; pack
left 150 && PROMPT=512 GEN=16 NOGRAPH= NCU_CACHE=none TAG=s16b-ncu timeout 170 bash tools/cuda/engine_run.sh b35; pack
echo "total $((SECONDS-t0))s"; pack
