#!/usr/bin/env bash
# Ran in session 28 on an H100: bench/cuda/s28/h100-a (it found the split argmax bug, b2928b0).
# Session 27's device call: issue 7's group-integer matvec v14 (qmatvec_gmma.cu: the x-window staging
# and the prologue without integer divisions, no selects in whole steps; ncu of s19b put ~32 of the
# 112 warp instructions a group at T = 8 in the divisions), conv_gdn_prepare v2 (a chunk of tokens'
# loads together, one barrier for their sums) and the GDN row step loading token t + 1 ahead.
# Carried (build/carry/bin.tar.xz, made by `tools/cuda/make_carry.sh --trace --old 6795c3b`): the tree's
# mere.run, mere_cuda_check, mere_engine_check in $B and 6795c3b's (the tree before these kernels)
# mere.run and mere_cuda_check in $B/old; the bundled models stay out of the call (64 MiB). NOT RUN in
# session 27: every device start was refused (the session's device time went to the refusals), so
# this is the next session's first call, before anything else is built on these kernels: steps 1
# and 3 are the only GPU checks of the changed default-path GDN kernels.
# In order of what must not be lost when the device time runs short (LIMIT, default 480):
#  1. cuda_check --only qmatvec --no-bench (new): every matvec check, with the new one holding the
#     group-integer kernel to its contract computed on the host, bitwise, at T = 1, 8, 9;
#  2. verify-bench at the 27B geometry under MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=db4, widths 1, 8
#     (graph), new and old, 3 reps each (round 1);
#  3. cuda_check's gdn phase and engine_check's 0.8B-geometry section (fused conv_gdn_prepare vs
#     conv_silu + gdn_prepare bitwise at T = 1 and 9, the GDN block and the step + norm pairs);
#  4. the matvec benchmark of the group-integer shapes (--kernels gmma), old and new binaries in turn;
#  5. verify-bench round 2 (new first).
LIMIT_DEFAULT=480 . tools/cuda/call_prelude.sh
timeout -k 5 150 $B/mere_cuda_check --only qmatvec --no-bench --json $OUT/cc-qmatvec.json >$OUT/cc-qmatvec.log 2>&1
echo "cuda_check qmatvec rc=$? $((SECONDS-t0))s"; grep -E "FAIL|contract|done in" $OUT/cc-qmatvec.log | head -20; pack
D27=/tmp/synth-27b
vb() {  # vb ROUND VARIANT...
  local r=$1; shift
  [ -d $D27 ] || $B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet
  for v in "$@"; do
    bb=$B; [ $v = old ] && bb=$B/old
    left 40 && MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=db4 timeout 60 $bb/mere.run model verify-bench --model $D27 --backend cuda \
      --widths 1,8 --prompt-tokens 128 --passes 8 --reps 3 --json >$OUT/vb-$v-r$r.json 2>$OUT/vb-$v-r$r.err && python3 -c "
import json,sys;d=json.load(open(sys.argv[1]))
print(sys.argv[2], ' '.join('w%d %.1f [%.1f-%.1f] x%.2f mism %s'%(x['width'],x['tokens_per_s']['median'],x['tokens_per_s']['min'],x['tokens_per_s']['max'],x['speedup_vs_width1'],x.get('oracle_mismatches')) for x in d['widths']))" $OUT/vb-$v-r$r.json "$v r$r"
    pack
  done
}
vb 1 new old
left 60 && { timeout -k 5 60 $B/mere_cuda_check --only gdn --no-bench >$OUT/cc-gdn.log 2>&1
  echo "cuda_check gdn rc=$? $((SECONDS-t0))s"; grep -E "FAIL|done in|checks" $OUT/cc-gdn.log | head -8; }
left 60 && { timeout -k 5 100 $B/mere_engine_check . "0.8b geometry" >$OUT/ec-08b.log 2>&1
  echo "engine_check 0.8b rc=$? $((SECONDS-t0))s"; grep -E "FAIL|engine_check:" $OUT/ec-08b.log | head -8; pack; }
for v in old new; do
  bb=$B; [ $v = old ] && bb=$B/old
  left 70 && { timeout -k 5 90 $bb/mere_cuda_check --only "bench qmatvec" --kernels gmma --json $OUT/cc-bench-$v.json >$OUT/cc-bench-$v.log 2>&1
    echo "bench $v rc=$? $((SECONDS-t0))s"; pack; }
done
python3 - $OUT/cc-bench-old.json $OUT/cc-bench-new.json <<'PY' 2>&1 | tee $OUT/bench-compare.txt
import json, sys
def load(f):
    try: d = json.load(open(f))
    except Exception as e: print("no", f, e); return {}
    return {b["bench"]: b for b in d.get("bench", [])}
o, n = load(sys.argv[1]), load(sys.argv[2])
for k in n:
    if k in o:
        a, b = o[k], n[k]
        print("%-70s old %7.2f us (graph %7.2f)  new %7.2f us (graph %7.2f)" % (k[:70], a.get("median_us", 0), a.get("graph_us_per_launch", 0), b.get("median_us", 0), b.get("graph_us_per_launch", 0)))
PY
pack
vb 2 new old
rm -rf $D27; echo "total $((SECONDS-t0))s"; pack
