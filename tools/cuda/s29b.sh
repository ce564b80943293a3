#!/usr/bin/env bash
# Session 29, issue 7 on CUDA with the bundled models: s29a's model benchmark of qwen35-dense-tiny
# (bench/cuda/s29/h100-a/mb-dense.json) had adaptive and forced at 0.95-0.97x serial on all five
# workloads, every request on the pipelined fallback (0 rounds). Why: (1) the variants in the other
# order (is the 4% the order?), (2) the measured cost model's table and depth choice
# (MERERUN_Q35_MTP_DEBUG), (3) forced depths 1-3 with MERERUN_Q35_MTP_PROFILE phase times: what MTP
# would give on the GPU. Both bundled models travel; carried: mere.run alone
# (CARRY=build/carry/run.tar.xz).
CARRY=build/carry/run.tar.xz LIMIT_DEFAULT=${LIMIT:-400} . tools/cuda/call_prelude.sh
P="$($B/mere.run model benchmark --list-workloads | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["prompt"])')"
for m in dense moe; do
  M=models/qwen35-$m-tiny
  left 60 && timeout 100 $B/mere.run model benchmark --model $M --backend cuda --workloads code,chat \
    --variants adaptive,baseline --tokens 256 --repetitions 3 --quiet --json >$OUT/mb-$m-order.json 2>$OUT/mb-$m-order.err
  python3 - $OUT/mb-$m-order.json $m <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for s in d["scenarios"]:
    for v in s["variants"]:
        t = v["summary"]["decodeTokensPerSecond"]; a = v["summary"]["acceleration"]
        print(sys.argv[2], s["name"], v["variant"], "decode %.0f [%.0f-%.0f]" % (t["median"], t["min"], t["max"]), a["routes"], a["rounds"])
PY
  for d in debug 0 1 2 3; do
    case $d in debug) fl="--mtp"; ev="MERERUN_Q35_MTP_DEBUG=1" ;; 0) fl="--no-mtp"; ev="" ;; *) fl="--mtp-depth $d"; ev="MERERUN_Q35_MTP_PROFILE=1" ;; esac
    for rep in 1 2; do
      env $ev timeout 30 $B/mere.run text chat --model $M --backend cuda --prompt "$P" --no-thinking --max-tokens 256 \
        --ignore-eos --temperature 0 --json $fl >$OUT/chat-$m-$d-$rep.json 2>$OUT/chat-$m-$d-$rep.err
      python3 -c "
import json,sys; s=json.load(open(sys.argv[1]))['stats']; a=s['acceleration']
print(sys.argv[2], 'decode %.0f tok/s' % s['decode_tok_s'], a['route'], 'rounds', a['rounds'], 'acc %.2f' % a['acceptance_rate'], json.dumps(a.get('profile')))" $OUT/chat-$m-$d-$rep.json "$m $d r$rep"
    done
  done
  grep -m12 "mtp-debug" $OUT/chat-$m-debug-1.err | cut -c1-200
  pack
done
echo "total $((SECONDS-t0))s"; pack
