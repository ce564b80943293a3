#!/usr/bin/env bash
# Session 29's last call (mere.run, mere_engine_check: `tools/cuda/make_carry.sh --bins "mere.run
# mere_engine_check" --out build/carry/run.tar.xz`, CARRY=build/carry/run.tar.xz; the bundled MoE
# model aside): the review refactor (upload_head_rows) and the head's priming on the prompt's GEMMs
# (head_prefill, opt-in: MERE_CUDA_HEAD_PREFILL=on) checked, then the numbers the issues ask
# of the H200 when the machine is one (else they are labelled by the GPU line at the top):
#  1. engine_check's dense, 0.8B and 35B-A3B sections (CUDA+MTP == CUDA, CUDA == CPU; the
#     MERE_CUDA_HEAD_PREFILL=on pairs);
#  2. the bundled dense model's model benchmark, five workloads, baseline / adaptive, 5 reps, and the
#     head prefill on for code / math / summary;
#  3. 27B oracle-fed verification, group-integer mma (the width table) and the int default, w1/4/8/9;
#  4. decode receipts 27B and 35B-A3B (bench, 512-token prompt, 128 tokens, 5 reps); 27B parity.
CARRY=build/carry/run.tar.xz LIMIT_DEFAULT=${LIMIT:-480} . tools/cuda/call_prelude.sh
for sec in qwen35-dense-tiny "0.8b geometry" "35b-a3b geometry"; do
  f=$OUT/ec-$(echo $sec | tr ' .' '__').log
  timeout -k 5 120 $B/mere_engine_check . "$sec" >$f 2>&1
  echo "engine_check '$sec' rc=$? $((SECONDS-t0))s"; grep -E "FAIL|engine_check:|greedy.*(CPU|MTP)|HEAD_PREFILL.*greedy" $f | cut -c1-160 | head -6
done; pack
timeout 150 $B/mere.run model benchmark --model models/qwen35-dense-tiny --backend cuda --variants baseline,adaptive \
  --tokens 256 --repetitions 5 --quiet --json >$OUT/mb-dense.json 2>$OUT/mb-dense.err
mb_summary $OUT/mb-dense.json dense; pack
MERE_CUDA_HEAD_PREFILL=on timeout 100 $B/mere.run model benchmark --model models/qwen35-dense-tiny --backend cuda \
  --workloads code,math,summary --variants baseline,adaptive --tokens 256 --repetitions 5 --quiet --json \
  >$OUT/mb-dense-hp-on.json 2>$OUT/mb-dense-hp-on.err
mb_summary $OUT/mb-dense-hp-on.json "dense head-prefill on"; pack
D27=/tmp/synth-27b
$B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet
for mv in mma int; do
  left 60 && MERE_CUDA_QMATVEC=$mv timeout 90 $B/mere.run model verify-bench --model $D27 --backend cuda \
    --widths 1,4,8,9 --prompt-tokens 128 --passes 8 --reps 5 --json >$OUT/vb-$mv.json 2>$OUT/vb-$mv.err &&
    vb_summary $OUT/vb-$mv.json "27b $mv"
  pack
done
left 60 && timeout 80 $B/mere.run bench --model $D27 --backend cuda --prompt-tokens 512 --gen-tokens 128 --reps 5 --json \
  >$OUT/engine-27b.json 2>/dev/null && bench_summary $OUT/engine-27b.json 27b
left 40 && timeout 60 $B/mere.run model verify-bench --model $D27 --backend cuda --widths 1 --prompt-tokens 64 --passes 2 \
  --reps 1 --parity-depths 1,4,7 --json --quiet >$OUT/parity-27b.json 2>$OUT/parity-27b.err && parity_summary $OUT/parity-27b.json 27b
rm -rf $D27; pack
if left 100; then
  D35=/tmp/synth-35b
  $B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out $D35 --quiet
  timeout 80 $B/mere.run bench --model $D35 --backend cuda --prompt-tokens 512 --gen-tokens 128 --reps 5 --json \
    >$OUT/engine-35b-a3b.json 2>/dev/null && bench_summary $OUT/engine-35b-a3b.json 35b-a3b
  rm -rf $D35
fi
echo "total $((SECONDS-t0))s"; pack
