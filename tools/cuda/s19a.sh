#!/usr/bin/env bash
# Next session's first device call (written in session 18, whose device time ran out):
#  * engine_check: incl. the new check of the greedy verification's row argmax (device ids vs the
#    argmax of T = 1 logits, widths 1..9, traced) and greedy MTP parity with ids-only verification
#  * issue 7: verify-bench at the 27B geometry (ids-only passes now) with the integer matvec and the
#    group-integer mma (db4), and at 35B-A3B; prediction (docs/speculation.md): db4 w8/w1 ~5.2-5.5x
#    (s17 with every row's logits copied back: 4.72x)
#  * issue 6: the ncu source view (per-instruction stall samples) of one v6d launch (27B gate/up,
#    T = 512; s18f's attempt matched no kernel: the regex needs mangled names) and the prompt's
#    per-kernel times on the session-18 defaults (auto prefill GEMMs, fused SwiGLU)
# Binaries: build/carry/bin.tar.xz (scripts/build-cuda.sh, stripped, xz). LIMIT (540).
LIMIT_DEFAULT=540 . tools/cuda/call_prelude.sh
D27=/tmp/synth-27b
($B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet) &
timeout 110 $B/mere_engine_check . >$OUT/ec.log 2>&1
echo "ec rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks|row argmax" $OUT/ec.log | head; pack
wait
vb() {  # tag geometry-dir env... : verify-bench widths 1,2,4,8,9
  local tag=$1 dir=$2; shift 2
  env "$@" timeout 150 $B/mere.run model verify-bench --model $dir --backend cuda --widths 1,2,4,8,9 --prompt-tokens 128 \
    --passes 8 --reps 3 --json --quiet >"$OUT/verify-$tag.json" 2>"$OUT/verify-$tag.err"
  python3 - "$OUT/verify-$tag.json" "$tag $*" <<'PY'
import json, sys
try: d = json.load(open(sys.argv[1]))
except Exception as e: print(sys.argv[2], "no result:", e); sys.exit()
print(sys.argv[2], "| head/target %.3f |" % d["head_cost_ratio"],
      " ".join("w%d %.1f (x%.2f, %d mismatches)" % (w["width"], w["tokens_per_s"]["median"], w["speedup_vs_width1"],
               w["oracle_mismatches"]) for w in d["widths"]))
PY
  pack
}
vb 27b-int $D27 MERE_CUDA_QMATVEC=int 2>&1 | tee -a $OUT/vb.log
left 300 && vb 27b-db4 $D27 MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=db4 2>&1 | tee -a $OUT/vb.log
left 240 && timeout -k 5 90 ncu --clock-control none --kernel-name-base mangled -k regex:wgemm_ws_kernelILi1ELb0E -s 26 -c 1 \
  --section WarpStateStats --section SourceCounters --page source --print-source sass --csv \
  $B/mere_prefill_check --only wgemm --no-bench >$OUT/ncu-ws-src.csv 2>&1
echo "ncu src: $(wc -l <$OUT/ncu-ws-src.csv) lines"; gzip -9 -f $OUT/ncu-ws-src.csv; pack
left 200 && timeout 200 bash tools/cuda/engine_run.sh ncupf27 2>&1 | head -30; gzip -9 -f $OUT/ncu-pf27.csv 2>/dev/null; pack
left 100 && ($B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out /tmp/synth-35b --quiet) && \
  vb 35b-int /tmp/synth-35b MERE_CUDA_QMATVEC=int 2>&1 | tee -a $OUT/vb.log
echo "total $((SECONDS-t0))s"; pack
