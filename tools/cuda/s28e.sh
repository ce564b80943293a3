#!/usr/bin/env bash
# Session 28: decode A/B of this tree ($B/mere.run) against 6795c3b ($B/old/mere.run, before session 27's
# GDN kernels and the argmax fix): s28d's H100 receipts (35B-A3B 385.7 tok/s) read below session 26's
# H100 409-410. 35B-A3B then 27B geometry, 512-token prompt, 128 generated, 3 reps a run, rounds
# alternating old/new.
LIMIT_DEFAULT=${LIMIT:-400} . tools/cuda/call_prelude.sh
for g in 35b-a3b 27b; do
  d=/tmp/synth-$g
  left 100 || break
  $B/mere.run model synth --geometry qwen3.5-$g --bits 4 --group-size 64 --out $d --quiet
  for r in 1 2; do for v in old new; do
    bb=$B; [ $v = old ] && bb=$B/old
    left 30 && timeout 60 $bb/mere.run bench --model $d --backend cuda --prompt-tokens 512 --gen-tokens 128 --reps 3 --json \
      >$OUT/ab-$g-$v-r$r.json 2>/dev/null && python3 -c "
import json,sys;d=json.load(open(sys.argv[1]));t=d['runs'][0]['decode_tok_s']
print('%s %s r%s: decode %.1f [%.1f-%.1f]'%(sys.argv[2],sys.argv[3],sys.argv[4],t['median'],t['min'],t['max']))" $OUT/ab-$g-$v-r$r.json $g $v $r
  done; done
  rm -rf $d; pack
done
echo "total $((SECONDS-t0))s"; pack
