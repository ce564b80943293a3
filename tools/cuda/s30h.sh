#!/usr/bin/env bash
# Written in session 30, NOT run (the device time ran out): the next session's first call (mere.run: `tools/cuda/make_carry.sh --bins mere.run --out build/carry/run.tar.xz`;
# bench/ and tests/data/mtp aside): is s30g's 1.5-2.3% (adaptive falling back before its first round,
# --cost-ratio 5, decoding slower than the baseline) the speculative path's or the run order's? The same
# MoE prose benchmark with the variants in both orders, 5 reps each, twice.
CARRY=build/carry/run.tar.xz LIMIT_DEFAULT=${LIMIT:-90} . tools/cuda/call_prelude.sh
for r in 1 2; do
  for order in baseline,adaptive adaptive,baseline; do
    timeout 30 $B/mere.run model benchmark --model models/qwen35-moe-tiny --backend cuda --workloads prose --variants $order \
      --cost-ratio 5 --tokens 256 --repetitions 5 --quiet --json >$OUT/c5-$order-r$r.json 2>&1
    python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
for s in d['scenarios']:
  v={x['variant']:x for x in s['variants']}
  b=[round(x['decodeSeconds']*1e3,2) for x in v['baseline']['repetitions']]; a=[round(x['decodeSeconds']*1e3,2) for x in v['adaptive']['repetitions']]
  print('$order r$r baseline ms', sorted(b)[2], b, 'adaptive ms', sorted(a)[2], a)" $OUT/c5-$order-r$r.json
  done
done; pack
