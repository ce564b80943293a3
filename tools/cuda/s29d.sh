#!/usr/bin/env bash
# Session 29, issue 7 on CUDA with the bundled models, after s29b/c (bench/cuda/s29/h100-b, -c): the
# tiny models' 64-wide GatedDeltaNet heads ran gdn_generic_kernel (18 µs a layer at width 1, 52 at
# width 3: a third of a pass), now gdn_decode's half-warp rows; the measured cost model leaves out
# passes captured into a graph; MERE_CUDA_CONV=width (v3 at width 1, v4 wider) is the default.
# MODEL=dense|moe: the bundled model in the tree (the other is aside: 64 MiB). Carried: the full
# carry (mere.run, mere_cuda_check, mere_engine_check, trace/mere.run).
#  1. checks: cuda_check gdn (D = 64 cases, T tokens vs T single calls bitwise); engine_check's
#     sections of MODEL (fixtures, parity = CUDA vs CPU and MTP vs plain, gqa, fusion); with dense
#     also the 0.8B and 35B-A3B geometry sections (MERE_CUDA_CONV tokens / loop pairs);
#  2. MODEL's verify-bench widths 1-4 and kernel traces at widths 1 and 3 (against s29c);
#  3. MODEL's model benchmark, five workloads, baseline / adaptive, 256 tokens, 5 reps (issue 7's
#     >= 0.97x serial on CUDA), then the forced depths 1-3 on the code prompt (text chat --json).
LIMIT_DEFAULT=${LIMIT:-500} . tools/cuda/call_prelude.sh
export BT=$B/trace
m=${MODEL:-dense}; M=models/qwen35-$m-tiny
timeout -k 5 30 $B/mere_cuda_check --only gdn --no-bench >$OUT/cc-gdn.log 2>&1; echo "cuda_check gdn rc=$?"
grep -h "checks:\|FAIL" $OUT/cc-gdn.log | head -8
secs=("qwen35-$m-tiny")
[ $m = dense ] && secs+=("0.8b geometry" "35b-a3b geometry")
for sec in "${secs[@]}"; do
  f=$OUT/ec-$(echo $sec | tr ' .' '__').log
  timeout -k 5 150 $B/mere_engine_check . "$sec" >$f 2>&1
  echo "engine_check '$sec' rc=$? $((SECONDS-t0))s"; grep -E "FAIL|engine_check:" $f | cut -c1-200 | head -8
  grep -E "greedy|CPU" $f | cut -c1-200 | head -6; pack
done
timeout 60 $B/mere.run model verify-bench --model $M --backend cuda --widths 1,2,3,4 --prompt-tokens 98 --passes 16 \
  --reps 5 --json >$OUT/vb-$m.json 2>$OUT/vb-$m.err && vb_summary $OUT/vb-$m.json "$m graphs"
for w in 1 3; do
  MERE_CUDA_GRAPH=0 MERE_CUDA_TRACE_OUT=$OUT/trace-$m-w$w.json MERE_CUDA_TRACE_ROWS=$w MERE_CUDA_TRACE_STEPS=16 \
    timeout 40 $BT/mere.run model verify-bench --model $M --backend cuda --widths $w --prompt-tokens 98 --passes 16 --reps 2 \
    --json >$OUT/vb-trace-$m-w$w.json 2>$OUT/vb-trace-$m-w$w.err || tail -3 $OUT/vb-trace-$m-w$w.err
  [ -f $OUT/trace-$m-w$w.json ] && trace_summary $OUT/trace-$m-w$w.json "$m width $w (no graphs)" | head -8
done; pack
left 60 && timeout 200 $B/mere.run model benchmark --model $M --backend cuda --variants baseline,adaptive --tokens 256 \
  --repetitions 5 --quiet --json >$OUT/mb-$m.json 2>$OUT/mb-$m.err
echo "model benchmark $m rc=$?"
python3 - $OUT/mb-$m.json $m <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for s in d["scenarios"]:
    v = {x["variant"]: x["summary"] for x in s["variants"]}
    b, a = v["baseline"]["decodeTokensPerSecond"], v["adaptive"]["decodeTokensPerSecond"]; acc = v["adaptive"]["acceleration"]
    print(sys.argv[2], s["name"], "baseline %.0f [%.0f-%.0f] adaptive %.0f [%.0f-%.0f] x%.3f" % (b["median"], b["min"], b["max"],
          a["median"], a["min"], a["max"], a["median"] / b["median"]), acc["routes"], "rounds", acc["rounds"],
          "acc %.2f" % acc["acceptanceRate"], "len %.2f" % acc["meanAcceptedLength"])
PY
pack
P="$($B/mere.run model benchmark --list-workloads | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["prompt"])')"
for d in 0 1 2 3 debug; do
  case $d in debug) fl="--mtp"; ev="MERERUN_Q35_MTP_DEBUG=1" ;; 0) fl="--no-mtp"; ev="" ;; *) fl="--mtp-depth $d"; ev="MERERUN_Q35_MTP_PROFILE=1" ;; esac
  left 20 && env $ev timeout 30 $B/mere.run text chat --model $M --backend cuda --prompt "$P" --no-thinking --max-tokens 256 \
    --ignore-eos --temperature 0 --json $fl >$OUT/chat-$m-$d.json 2>$OUT/chat-$m-$d.err
  python3 -c "
import json,sys; s=json.load(open(sys.argv[1]))['stats']; a=s['acceleration']
print(sys.argv[2], 'decode %.0f tok/s' % s['decode_tok_s'], a['route'], 'rounds', a['rounds'], 'acc %.2f' % a['acceptance_rate'], json.dumps(a.get('profile')))" $OUT/chat-$m-$d.json "$m code depth $d"
done
grep "mtp-debug" $OUT/chat-$m-debug.err | head -3 | cut -c1-200; grep "mtp-debug" $OUT/chat-$m-debug.err | tail -2 | cut -c1-200
echo "total $((SECONDS-t0))s"; pack
