#!/usr/bin/env bash
# Not run as a whole: session 28 ran its parts in s28d.sh (bench/cuda/s28/h100-h), on an H100.
# A device call written in session 26 (not run in sessions 26 or 27: every session-27 start was refused;
# the next session runs it after s27c.sh, on the same warm machine), on binaries of the tree
# (build/carry/bin.tar.xz: mere.run, mere_cuda_check; models/ and tests/ need not travel):
#  1. the grid barrier's own cost: `mere_cuda_check --only barrier` (µs a barrier at 1, 2, 4, 8 resident
#     blocks of 256 threads an SM; docs/cuda-kernels.md §5.14's last paragraph): the number that decides
#     whether the one-launch GDN middle / MoE block (§5.12-5.13, measured slower) have a next form;
#  2. the H200 receipts with this tree's defaults (the split argmax among them; session 24's are the last
#     H200 ones): 35B-A3B and 27B geometry, 512-token prompt, 128 generated, 5 reps (on an H100 these
#     are A/B numbers only; the JSON names the card);
#  3. (session 27) the one-block argmax's checks (its PTX changed in 6795c3b's review and had not run),
#     then trace27 from the trace build ($B/trace/mere.run): where the 27B decode step goes on the H200.
# LIMIT 330.
LIMIT_DEFAULT=330 . tools/cuda/call_prelude.sh
export BT=$B/trace
timeout -k 5 60 $B/mere_cuda_check --only barrier --json $OUT/cc-barrier.json >$OUT/cc-barrier.log 2>&1
echo "cuda_check barrier rc=$?"; grep -E "barrier|FAIL" $OUT/cc-barrier.log | head -12; pack
for g in 35b-a3b 27b; do
  d=/tmp/synth-$g
  left 90 || break
  $B/mere.run model synth --geometry qwen3.5-$g --bits 4 --group-size 64 --out $d --quiet
  timeout 80 $B/mere.run bench --model $d --backend cuda --prompt-tokens 512 --gen-tokens 128 --reps 5 --json \
    >$OUT/engine-$g-s27a.json 2>$OUT/bench-$g.log && python3 -c "
import json,sys;d=json.load(open(sys.argv[1]));r=d['runs'][0];t=r['decode_tok_s'];p=r['prefill_tok_s']
print('receipt %s: decode %.1f [%.1f-%.1f] prefill %.0f [%.0f-%.0f] %.1f%% of copy %.0f GB/s'%(sys.argv[2],t['median'],t['min'],t['max'],p['median'],p['min'],p['max'],r.get('decode_pct_of_copy_bw',0),d['machine'].get('copy_bandwidth_gb_s',0)))" $OUT/engine-$g-s27a.json $g
  [ $g = 27b ] || rm -rf $d; pack  # trace27 reuses /tmp/synth-27b
done
timeout -k 5 60 $B/mere_cuda_check --only argmax --no-bench >$OUT/cc-argmax.log 2>&1
echo "cuda_check argmax rc=$?"; grep -E "checks|FAIL" $OUT/cc-argmax.log | head -5; pack
left 60 && timeout 80 bash tools/cuda/engine_run.sh trace27 2>&1 | tail -30
rm -rf /tmp/synth-27b; echo "total $((SECONDS-t0))s"; pack
