#!/usr/bin/env bash
# Session 34's 2nd call (mere.run, mere_cuda_check, mere_engine_check: `tools/cuda/make_carry.sh`;
# bench/cuda and bench/cpu aside, the bundled models travel):
#  1. checks of MERE_CUDA_NORM_W=early (the RMSNorm and gated-norm kernels load their weights before the
#     PDL wait; read once per process, so the pairs are two processes): cuda_check rms_norm / gdn / src_mv /
#     moe_route with it;
#     greedy 64 tokens (token ids) late vs early on both bundled models (and `text logits`, .npy, bitwise)
#     and the 35B-A3B / 27B geometries;
#  2. decode A/B late (the default) / early, two alternating rounds, 35B-A3B then 27B;
#  3. on an H200: the receipts' runs (512-token prompt, 5 reps) and the 27B oracle-fed verification at
#     widths 1, 4, 8, 9 (MERE_CUDA_QMATVEC=mma).
# Ran once (LIMIT=170, H100): bench/cuda/s34/h100-b (its 27B section found no model, see the README there);
# after it `early` became the default, so with this tree's binaries "default" is early.
CARRY=build/carry/bin.tar.xz LIMIT_DEFAULT=${LIMIT:-500} . tools/cuda/call_prelude.sh
MERE_CUDA_NORM_W=early CC_TAG=-early cuda_checks rms_norm gdn src_mv moe_route
# `same MODEL TAG [ids]`: greedy 64 tokens and the logits of 12 prompt ids (with "ids": the tokens only),
# late vs early (two processes each)
same() {
  for v in late early; do
    MERE_CUDA_NORM_W=$v timeout 60 $B/mere.run text generate --model $1 --backend cuda --prompt "The history of the city" \
      --max-tokens 64 --temperature 0 --ignore-eos --no-mtp --json 2>/dev/null |
      python3 -c "import json,sys; print(json.load(sys.stdin)['token_ids'])" >$OUT/gen-$2-$v.txt
    [ -z "$3" ] && MERE_CUDA_NORM_W=$v timeout 60 $B/mere.run text logits --model $1 --backend cuda \
      --token-ids 1,2,3,4,5,6,7,8,9,10,11,12 --output /tmp/lg-$2-$v.npy >/dev/null 2>&1
  done
  [ -s $OUT/gen-$2-late.txt ] || { echo "$2: NO OUTPUT (model missing or failed)"; return; }
  [ -n "$3" ] && { echo "$2: greedy ids $(cmp -s $OUT/gen-$2-late.txt $OUT/gen-$2-early.txt && echo equal || echo DIFFER)"; return; }
  echo "$2: greedy ids $(cmp -s $OUT/gen-$2-late.txt $OUT/gen-$2-early.txt && echo equal || echo DIFFER) ($(wc -c <$OUT/gen-$2-late.txt) bytes)," \
    "logits $(cmp -s /tmp/lg-$2-late.npy /tmp/lg-$2-early.npy && echo bitwise || echo DIFFER) ($(stat -c %s /tmp/lg-$2-late.npy) bytes)"
}
same models/qwen35-moe-tiny moe-tiny; same models/qwen35-dense-tiny dense-tiny; pack
D35=/tmp/synth-35b D27=/tmp/synth-27b
$B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out $D35 --quiet
same $D35 35b ids
ab 35b $D35 MERE_CUDA_NORM_W early 2; pack
receipt 35b-a3b $D35
rm -rf $D35; pack
left 100 && $B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet
[ -d $D27 ] && left 60 && same $D27 27b ids
ab 27b $D27 MERE_CUDA_NORM_W early 2; pack
receipt 27b $D27
grep -q H200 $OUT/gpu0.txt && left 70 && MERE_CUDA_QMATVEC=mma timeout 90 $B/mere.run model verify-bench --model $D27 \
  --backend cuda --widths 1,4,8,9 --prompt-tokens 128 --passes 8 --reps 5 --json >$OUT/vb-27b-mma.json 2>$OUT/vb-27b-mma.err &&
  vb_summary $OUT/vb-27b-mma.json "27b mma"
rm -rf $D27
echo "total $((SECONDS-t0))s"; pack
