#!/usr/bin/env bash
# The next session's first device call (written in session 28, whose device time ran out first):
# conv_gdn_prepare v4 (MERE_CUDA_CONV=tokens: a block runs up to 8 tokens side by side, each channel's
# conv from its predecessors; s28k's ncu of v3 at width 8: 81 blocks of 4 warps, 0.12 issued a
# scheduler, 10.9 µs against 4.2 at width 1). Carried: `tools/cuda/make_carry.sh --trace` (mere.run,
# mere_cuda_check, mere_engine_check, trace/mere.run); `tools/cuda/models_aside.sh out qwen35-moe-tiny`
# before the call (64 MiB) and `tools/cuda/models_aside.sh in` after it. In order of what must not be lost:
#  1. engine_check's 0.8B and 35B-A3B geometry sections: the MERE_CUDA_CONV=tokens pairs (decode,
#     T = 9 verification = two chunks, MTP-head logits bitwise; greedy and MTP vs plain), and
#     cuda_check gdn; forced-depth greedy parity at the 27B (int, mma) and 35B-A3B geometries;
#  2. the 27B width-8 / width-1 verification traces under mma, tokens against loop;
#  3. 27B verification (mma) w1, 8, 9 and the decode receipts (27B, 35B-A3B), tokens (3 reps) against
#     loop (5 reps: the receipts when the machine is an H200);
#  4, 5. ncu of the matvec and the GDN kernels (below); LIMIT 560 (~600 s of work: the tail is what the
#     `left` checks drop first). Run it with the call's timeout at 600.
# Prediction: conv_gdn_prepare at width 8 10.6 -> ~3-4 µs a layer (-0.3 ms a 27B width-8 pass, w8
# 636 -> ~650 tok/s on the H100); width 1 unchanged (4.2 µs).
LIMIT_DEFAULT=${LIMIT:-560} . tools/cuda/call_prelude.sh
export BT=$B/trace D27=/tmp/synth-27b
timeout -k 5 30 $B/mere_cuda_check --only gdn --no-bench >$OUT/cc-gdn.log 2>&1; echo "cuda_check gdn rc=$?"; grep -h "checks:" $OUT/cc-gdn.log
for sec in "0.8b geometry" "35b-a3b geometry"; do
  f=$OUT/ec-$(echo $sec | tr ' .' '__').log
  timeout -k 5 100 $B/mere_engine_check . "$sec" >$f 2>&1
  echo "engine_check '$sec' rc=$? $((SECONDS-t0))s"; grep -E "FAIL|CONV|engine_check:" $f | cut -c1-170 | head -8; pack
done
$B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet
# forced-depth greedy parity at the real geometry (every round rolls back: random weights), int and mma:
# the split argmax bug (fixed in b2928b0) broke it from session 26 on; not run at real geometries since
for mv in int mma; do
  left 60 && MERE_CUDA_QMATVEC=$mv timeout 90 $B/mere.run model verify-bench --model $D27 --backend cuda --widths 1 \
    --prompt-tokens 64 --passes 2 --reps 1 --parity-depths 1,4,7 --json --quiet >$OUT/parity-27b-$mv.json 2>$OUT/parity-27b-$mv.err &&
    parity_summary $OUT/parity-27b-$mv.json "27b $mv"
done; pack
# issue 7 on CUDA with the bundled dense model (the MoE one is out of the tree: 64 MiB): the five
# workloads, baseline / adaptive / forced, 256 tokens, 3 reps; the harness checks greedy parity (exit 6)
left 60 && { timeout 120 $B/mere.run model benchmark --model models/qwen35-dense-tiny --backend cuda \
    --variants baseline,adaptive,forced --tokens 256 --repetitions 3 --quiet --json >$OUT/mb-dense.json 2>$OUT/mb-dense.err
  echo "model benchmark dense rc=$?"; python3 - $OUT/mb-dense.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for s in d.get("scenarios", []):
    print(" ", s.get("name"), "speedups", json.dumps(s.get("speedups")), "parity mismatches", len(s.get("parityMismatches", [])))
PY
  pack; }
for cv in tokens loop; do for w in 8 1; do
  left 30 && MERE_CUDA_CONV=$cv MERE_CUDA_QMATVEC=mma MERE_CUDA_GRAPH=0 MERE_CUDA_TRACE_OUT=$OUT/trace-$cv-w$w.json \
    MERE_CUDA_TRACE_ROWS=$w MERE_CUDA_TRACE_STEPS=8 timeout 40 $BT/mere.run model verify-bench --model $D27 --backend cuda \
    --widths $w --prompt-tokens 128 --passes 8 --reps 2 --json >$OUT/vb-trace-$cv-w$w.json 2>$OUT/vb-trace-$cv-w$w.err ||
    tail -3 $OUT/vb-trace-$cv-w$w.err
  [ -f $OUT/trace-$cv-w$w.json ] && trace_summary $OUT/trace-$cv-w$w.json "$cv width $w (mma)" | head -6
  pack
done; done
for r in 1 2; do for cv in tokens loop; do
  left 30 && MERE_CUDA_CONV=$cv MERE_CUDA_QMATVEC=mma timeout 60 $B/mere.run model verify-bench --model $D27 --backend cuda \
    --widths 1,8,9 --prompt-tokens 128 --passes 8 --reps 3 --json >$OUT/vb-$cv-r$r.json 2>$OUT/vb-$cv-r$r.err &&
    vb_summary $OUT/vb-$cv-r$r.json "$cv r$r"
  pack
done; done
for g in 27b 35b-a3b; do
  d=/tmp/synth-$g
  left 90 || break
  [ -d $d ] || $B/mere.run model synth --geometry qwen3.5-$g --bits 4 --group-size 64 --out $d --quiet
  [ $g = 35b-a3b ] && timeout 90 $B/mere.run model verify-bench --model $d --backend cuda --widths 1 --prompt-tokens 64 \
    --passes 2 --reps 1 --parity-depths 1,3 --json --quiet >$OUT/parity-35b.json 2>$OUT/parity-35b.err &&
    parity_summary $OUT/parity-35b.json 35b
  for cv in tokens loop; do  # loop (the default) with 5 reps: on an H200 these are issue 6's receipts
    reps=3; [ $cv = loop ] && reps=5
    MERE_CUDA_CONV=$cv timeout 80 $B/mere.run bench --model $d --backend cuda --prompt-tokens 512 --gen-tokens 128 --reps $reps \
      --json >$OUT/engine-$g-$cv.json 2>/dev/null && bench_summary $OUT/engine-$g-$cv.json "$g $cv"
  done
  rm -rf $d; pack
done
# 4. ncu of the group-integer matvec at [17408, 5120] with the default per-width shapes (cuda_check
#    --ncu: launch 1 is T = 1, launch 7 T = 8): sections and per-instruction stall samples, for the next
#    step on the width-8 matvec (s27b's were of db4, whose T = 8 stalls sat on the weight loads).
for s in 1 7; do
  left 50 || break
  NCU_S=$s NCU_TAG=-w$s timeout 100 bash tools/cuda/engine_run.sh ncusrc 2>&1 | head -12
  gzip -f $OUT/ncu-qmatvec_gmma-w$s-src.csv; pack
done
# 5. the same for the GatedDeltaNet decode kernels at T = 8 (cuda_check --ncu's launches after the
#    matvec's): conv_gdn_prepare v3 and v4, gdn_decode
for kk in conv_gdn_prepare_kernel conv_gdn_prepare_tokens gdn_decode_kernel; do
  left 50 || break
  NCU_K=$kk NCU_S=0 timeout 100 bash tools/cuda/engine_run.sh ncusrc 2>&1 | head -12
  gzip -f $OUT/ncu-$kk-src.csv; pack
done
echo "total $((SECONDS-t0))s"; pack
