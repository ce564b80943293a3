#!/usr/bin/env bash
# Session 29, issue 7 on CUDA with the bundled models, after s29d (bench/cuda/s29/h100-d: adaptive /
# baseline code 1.37x, chat 1.50x, summary 1.40x, prose 0.87x, math 0.92x): greedy drafts made and
# chained on the device (DeviceEngine::draft_greedy, one host wait a chain; MERE_CUDA_DRAFTS=host the
# old loop) and a kind of pass captured on its 2nd use in a request (MERE_CUDA_GRAPH_AFTER=2; 1 the
# old behaviour); graph captures and their seconds in the stats. MODEL=dense|moe (the other aside).
#  1. checks: engine_check's MODEL sections (parity: CUDA == CPU, CUDA+MTP == CUDA); dense also the
#     0.8B geometry (MERE_CUDA_DRAFTS=host pair) and forced-depth parity at the 27B geometry;
#  2. MODEL's model benchmark, five workloads, baseline / adaptive, 256 tokens, 5 reps;
#  3. A/B on code and prose: MERE_CUDA_DRAFTS=host, MERE_CUDA_GRAPH_AFTER=1.
LIMIT_DEFAULT=${LIMIT:-500} . tools/cuda/call_prelude.sh
m=${MODEL:-dense}; M=models/qwen35-$m-tiny
secs=("qwen35-$m-tiny")
[ $m = dense ] && secs+=("0.8b geometry")
for sec in "${secs[@]}"; do
  f=$OUT/ec-$(echo $sec | tr ' .' '__').log
  timeout -k 5 150 $B/mere_engine_check . "$sec" >$f 2>&1
  echo "engine_check '$sec' rc=$? $((SECONDS-t0))s"; grep -E "FAIL|engine_check:" $f | cut -c1-200 | head -8
  grep -E "greedy.*(CPU|MTP)|DRAFTS" $f | cut -c1-200 | head -8; pack
done
left 60 && timeout 200 $B/mere.run model benchmark --model $M --backend cuda --variants baseline,adaptive --tokens 256 \
  --repetitions 5 --quiet --json >$OUT/mb-$m.json 2>$OUT/mb-$m.err
echo "model benchmark $m rc=$?"; mb_summary $OUT/mb-$m.json "$m"; pack
for ev in MERE_CUDA_DRAFTS=host MERE_CUDA_GRAPH_AFTER=1; do
  left 40 && env $ev timeout 100 $B/mere.run model benchmark --model $M --backend cuda --workloads code,prose \
    --variants baseline,adaptive --tokens 256 --repetitions 5 --quiet --json >$OUT/mb-$m-${ev%%=*}.json 2>$OUT/mb-$m-${ev%%=*}.err
  mb_summary $OUT/mb-$m-${ev%%=*}.json "$m $ev"
done; pack
if [ $m = dense ] && left 90; then
  D27=/tmp/synth-27b
  $B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet
  timeout 90 $B/mere.run model verify-bench --model $D27 --backend cuda --widths 1 --prompt-tokens 64 --passes 2 --reps 1 \
    --parity-depths 1,4,7 --json --quiet >$OUT/parity-27b.json 2>$OUT/parity-27b.err && parity_summary $OUT/parity-27b.json 27b
  rm -rf $D27
fi
echo "total $((SECONDS-t0))s"; pack
