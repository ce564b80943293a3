#!/usr/bin/env bash
# Session 29: the tiny models' prompts through gdn_decode's 64-wide rows (the tensor-core prefill's
# recurrent form ran gdn_generic_kernel over every prompt token). MODEL=dense|moe (the other aside).
# engine_check's MODEL section (CUDA vs CPU logits and tensor-core prefill, greedy CUDA == CPU after
# prefills of 16..58 tokens, CUDA+MTP == CUDA), then TTFT and decode on code and summary (468 tokens).
LIMIT_DEFAULT=${LIMIT:-300} . tools/cuda/call_prelude.sh
m=${MODEL:-dense}; M=models/qwen35-$m-tiny
f=$OUT/ec-$m.log
timeout -k 5 150 $B/mere_engine_check . "qwen35-$m-tiny" >$f 2>&1
echo "engine_check '$m' rc=$? $((SECONDS-t0))s"; grep -E "FAIL|engine_check:" $f | cut -c1-200 | head -8
grep -E "prefill|greedy.*(CPU|MTP)" $f | cut -c1-220 | head -8; pack
timeout 100 $B/mere.run model benchmark --model $M --backend cuda --workloads code,summary --variants baseline,adaptive \
  --tokens 256 --repetitions 5 --quiet --json >$OUT/mb-$m.json 2>$OUT/mb-$m.err
mb_summary $OUT/mb-$m.json "$m"
python3 - $OUT/mb-$m.json <<'PY'
import json, sys
for s in json.load(open(sys.argv[1]))["scenarios"]:
    for v in s["variants"]:
        t = v["summary"]["ttftSeconds"]; p = v["summary"]["prefillTokensPerSecond"]
        print(" ", s["name"], v["variant"], "TTFT %.2f ms, prefill %.0f tok/s" % (t["median"] * 1e3, p["median"]))
PY
echo "total $((SECONDS-t0))s"; pack
