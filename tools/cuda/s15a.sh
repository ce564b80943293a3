#!/usr/bin/env bash
# Next session's first device call (written in session 14, not run yet): the experiments session 14
# compiled but could not run (its device time was spent). Binaries: scripts/build-cuda.sh mere.run
# mere_engine_check mere_cuda_check, packed into build/carry/bin.tar.xz. LIMIT seconds (540):
#  1. mere_cuda_check --no-bench: the bulk-copy matvec (MERE_CUDA_QMATVEC=int-bulk, v11) must be
#     bitwise the register kernel at every shape and T = 1..9
#  2. engine_check (now with the MoE routing-in-gate/up pair, MERE_CUDA_MOE_ROUTE=fused), and the
#     whole engine_check again with MERE_CUDA_QMATVEC=int-bulk
#  3. mere_cuda_check --kernels int: the matvec sweep with the bulk shapes (and the 8-bit router shapes)
#  4. ab27: int vs int-bulk; ab35: default, routing fused, 8-bit router shapes 1,4 / 2,2, int-bulk, all
#  5. verify-bench at the 27B geometry (issue 7) with int and int-bulk
#  6. acceptance benches (5 reps; 8k-context ratio) with the fastest variant whose checks passed
#  7. greedy generations with MERE_CUDA_PDL=0 and 1 (engine_run.sh pdl), if time is left
. tools/cuda/call_prelude.sh
($B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out /tmp/synth-27b --quiet) &
timeout 150 $B/mere_cuda_check --no-bench >$OUT/cuda_check.log 2>&1; echo "cuda_check rc=$? $((SECONDS-t0))s"
grep -E "FAIL|integer: all|checks" $OUT/cuda_check.log | tail -8; pack
timeout 120 $B/mere_engine_check . >$OUT/engine_check.log 2>&1; echo "ec rc=$? $((SECONDS-t0))s"; grep -E "FAIL|checks|ROUTE" $OUT/engine_check.log; pack
MERE_CUDA_QMATVEC=int-bulk timeout 120 $B/mere_engine_check . >$OUT/ec-bulk.log 2>&1; echo "ec bulk rc=$? $((SECONDS-t0))s"
grep -E "FAIL|checks" $OUT/ec-bulk.log; pack
left 300 && { timeout 120 $B/mere_cuda_check --kernels int --json $OUT/cuda_check_int.json >$OUT/cuda_check_int.log 2>&1
  grep -E "q4int.*T=1 |multi" $OUT/cuda_check_int.log | head -40; pack; }
wait
Q=MERE_CUDA_QMATVEC
left 200 && AB="$Q=int;$Q=int-bulk" timeout 180 bash tools/cuda/engine_run.sh ab27; pack
M=MERE_CUDA_MOE_ROUTE=fused Q8=MERE_CUDA_Q8_SHAPE
left 140 && AB="$Q=int;$M;$Q8=1,4;$Q8=2,2;$Q=int-bulk;$Q=int-bulk $M $Q8=1,4" timeout 200 bash tools/cuda/engine_run.sh ab35; pack
left 90 && MVS="int int-bulk" timeout 150 bash tools/cuda/engine_run.sh vb27; pack
# 6. the acceptance benches (5 reps) with each geometry's fastest variant whose checks passed
pick() {  # stage -> the env of its fastest variant (by the median of its two runs), bulk only if checked
  python3 - "$OUT" "$1" "$2" <<'PY'
import glob, json, re, sys, statistics
out, stage, variants = sys.argv[1], sys.argv[2], sys.argv[3].split(";")
ok = lambda f, pat: re.search(pat, open(f).read()) is not None if glob.glob(f) else False
bulk_ok = ok(out + "/ec-bulk.log", r"checks, 0 failed") and not ok(out + "/cuda_check.log", r"FAIL")
route_ok = ok(out + "/engine_check.log", r"checks, 0 failed")
best, env = -1.0, ""
for i, v in enumerate(variants):
    if ("int-bulk" in v and not bulk_ok) or ("ROUTE" in v and not route_ok) or ("Q8_SHAPE" in v and ok(out + "/cuda_check.log", r"FAIL")):
        continue
    meds = [json.load(open(f))["runs"][0]["decode_tok_s"]["median"] for f in glob.glob("%s/%s-v%d-r*.json" % (out, stage, i))]
    if meds and statistics.median(meds) > best:
        best, env = statistics.median(meds), v
print(env)
PY
}
E27=$(pick ab27 "$Q=int;$Q=int-bulk"); E35=$(pick ab35 "$Q=int;$M;$Q8=1,4;$Q8=2,2;$Q=int-bulk;$Q=int-bulk $M $Q8=1,4")
echo "acceptance env: 27B [$E27] 35B [$E35]" | tee $OUT/acceptance-env.txt
left 80 && env $E27 PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s15 timeout 120 bash tools/cuda/engine_run.sh b27 b27long; pack
left 40 && env $E35 PROMPT=512 GEN=128 NCU= NOGRAPH= TAG=s15 timeout 90 bash tools/cuda/engine_run.sh b35; pack
# 7. greedy generations with PDL off and on (the early trigger changed the launch chain): must match
left 100 && timeout 120 bash tools/cuda/engine_run.sh pdl 2>&1 | tail -1; pack
echo "total $((SECONDS-t0))s"; pack
