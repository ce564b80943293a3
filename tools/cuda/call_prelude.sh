# Sourced by the per-session device-call scripts (tools/cuda/s*.sh), in the repo root on the GPU
# machine: unpacks the carried binaries (build/carry/bin.tar.xz) into $B, works in $OUT = /tmp/o and
# packs it into the tool's own $OUT ($R/x.tgz) with `pack` (CARRY names another tarball of the same
# layout, e.g. mere.run alone when both bundled models must travel), records the GPU, and gives `left N`:
# true while N more seconds fit in LIMIT (default $LIMIT_DEFAULT, else 540), and `trace_summary JSON LABEL`:
# the first 16 kernels of a kernel-trace summary (MERE_CUDA_TRACE_OUT) of verification passes; the
# summaries, `ab` (an alternating A/B of one switch on mere.run bench), `same_env` (a per-process switch's
# two processes compared), `ablate`, `receipt`, `cuda_checks` and `engine_checks` are further down.
R=$OUT; export OUT=/tmp/o B=build/engine-carry; mkdir -p $B $OUT; tar xJf ${CARRY:-build/carry/bin.tar.xz} -C $B
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv | tee $OUT/gpu0.txt
t0=$SECONDS; LIMIT=${LIMIT:-${LIMIT_DEFAULT:-540}}
left() { [ $((SECONDS - t0 + $1)) -lt $LIMIT ]; }
pack() { tar czf $R/x.tgz -C $OUT .; }
trace_summary() {
  python3 - "$@" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
print("%s: %d passes traced, %.1f us a pass in sequence" % (sys.argv[2], t["steps"], t["us_per_step"]))
for k in t["kernels"][:16]:
    print("  %-44s %6.2f a pass %8.1f us a pass %7.2f us each" % (k["name"][:44], k["launches_per_step"], k["us_per_step"], k["us_each"]))
PY
}
# `vb_summary JSON LABEL`: one line of an oracle-fed verification run (model verify-bench --json);
# `bench_summary JSON LABEL`: one line of a bench run (decode, prefill, % of copy);
# `parity_summary JSON LABEL`: verify-bench's forced-depth greedy parity (--parity-depths).
vb_summary() {
  python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(sys.argv[2], "head %.4f" % d["head_cost_ratio"], " ".join("w%d %.1f [%.1f-%.1f] x%.2f mism %s" % (
    x["width"], x["tokens_per_s"]["median"], x["tokens_per_s"]["min"], x["tokens_per_s"]["max"], x["speedup_vs_width1"],
    x.get("oracle_mismatches")) for x in d["widths"]))
PY
}
bench_summary() {
  python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); r = d["runs"][0]; t = r["decode_tok_s"]; p = r["prefill_tok_s"]
print("%s: decode %.1f [%.1f-%.1f] prefill %.0f [%.0f-%.0f] %.1f%% of copy %.0f GB/s" % (sys.argv[2], t["median"], t["min"],
      t["max"], p["median"], p["min"], p["max"], r.get("decode_pct_of_copy_bw", 0), d["machine"].get("copy_bandwidth_gb_s", 0)))
PY
}
parity_summary() {
  python3 -c "import json, sys; print(sys.argv[2], 'forced-depth parity:', json.dumps(json.load(open(sys.argv[1])).get('parity')))" "$@"
}
# `mb_summary JSON LABEL`: one line a workload of a model benchmark run with baseline and adaptive
# (decode tok/s median [min-max], adaptive / baseline, routes, rounds, acceptance, graph captures)
mb_summary() {
  python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for s in d["scenarios"]:
    v = {x["variant"]: x for x in s["variants"]}
    b, a = v["baseline"]["summary"]["decodeTokensPerSecond"], v["adaptive"]["summary"]["decodeTokensPerSecond"]
    acc = v["adaptive"]["summary"]["acceleration"]
    caps = [r.get("graphCaptures", 0) for r in v["adaptive"]["repetitions"]]
    cs = [r.get("graphCaptureSeconds", 0) * 1e3 for r in v["adaptive"]["repetitions"]]
    print(sys.argv[2], s["name"], "baseline %.0f [%.0f-%.0f] adaptive %.0f [%.0f-%.0f] x%.3f" % (b["median"], b["min"],
          b["max"], a["median"], a["min"], a["max"], a["median"] / b["median"]), acc["routes"], "rounds", acc["rounds"],
          "acc %.2f" % acc["acceptanceRate"], "len %.2f" % acc["meanAcceptedLength"],
          "captures %s (%.1f ms)" % (caps[0] if caps else "-", cs[0] if cs else 0))
PY
}
# `ab NAME DIR VAR VALUES ROUNDS`: an A/B of one switch on `mere.run bench` (64-token prompt, 128 generated,
# 3 reps), ROUNDS rounds of the default then VAR=each of VALUES (one word or a quoted list: "out in on")
# alternating, each into $OUT/ab-NAME-{default,VALUE}-rR.json with a bench_summary line; stops when 40 s no
# longer fit (left).
ab() {
  local name=$1 dir=$2 var=$3 val=$4 rounds=$5
  for r in $(seq 1 $rounds); do
    for v in default $val; do
      left 40 || return
      if [ $v = default ]; then e=(); else e=("$var=$v"); fi
      env "${e[@]}" timeout 60 $B/mere.run bench --model $dir --backend cuda --prompt-tokens 64 --gen-tokens 128 --reps 3 \
        --json >$OUT/ab-$name-$v-r$r.json 2>$OUT/ab-$name-$v-r$r.err && bench_summary $OUT/ab-$name-$v-r$r.json "$name $var=$v r$r"
    done
  done
}
# `same_env VAR A B MODEL TAG [ids] [TOKENS]`: a per-process switch VAR=A against VAR=B, two processes each:
# greedy TOKENS (default 64) token ids and, without "ids", `text logits` of 12 prompt ids (.npy), compared
# byte for byte into one line; empty outputs are reported, never compared.
same_env() {
  local var=$1 a=$2 b=$3 model=$4 tag=$5 ids=${6:-} n=${7:-64} v r
  for v in $a $b; do
    env "$var=$v" timeout 60 $B/mere.run text generate --model $model --backend cuda --prompt "The history of the city" \
      --max-tokens $n --temperature 0 --ignore-eos --no-mtp --json 2>/dev/null |
      python3 -c "import json,sys; print(json.load(sys.stdin)['token_ids'])" >$OUT/gen-$tag-$v.txt
    [ -z "$ids" ] && env "$var=$v" timeout 60 $B/mere.run text logits --model $model --backend cuda \
      --token-ids 1,2,3,4,5,6,7,8,9,10,11,12 --output /tmp/lg-$tag-$v.npy >/dev/null 2>&1
  done
  if [ ! -s $OUT/gen-$tag-$a.txt ] || [ ! -s $OUT/gen-$tag-$b.txt ]; then
    echo "$tag $var=$a/$b: NO OUTPUT (model missing or failed)"; return
  fi
  r="greedy ids ($n) $(cmp -s $OUT/gen-$tag-$a.txt $OUT/gen-$tag-$b.txt && echo equal || echo DIFFER)"
  if [ -n "$ids" ]; then echo "$tag $var=$a/$b: $r"; return; fi
  if [ ! -s /tmp/lg-$tag-$a.npy ] || [ ! -s /tmp/lg-$tag-$b.npy ]; then echo "$tag $var=$a/$b: $r, logits: NO OUTPUT"; return; fi
  echo "$tag $var=$a/$b: $r, logits $(cmp -s /tmp/lg-$tag-$a.npy /tmp/lg-$tag-$b.npy && echo bitwise || echo DIFFER)" \
    "($(stat -c %s /tmp/lg-$tag-$a.npy) bytes)"
}
# `ablate NAME DIR KINDS...`: the trace build's `mere.run bench` (trace/mere.run: make_carry.sh --trace) with
# MERE_CUDA_ABLATE=each KINDS entry ("" = nothing left out) into $OUT/abl-NAME-KINDS.json, a bench_summary
# line each; stops when 40 s no longer fit (left).
ablate() {
  local name=$1 dir=$2; shift 2
  for kinds in "$@"; do
    left 40 || break
    local tag=${kinds:-none}
    MERE_CUDA_ABLATE=$kinds timeout 60 $B/trace/mere.run bench --model $dir --backend cuda --prompt-tokens 64 --gen-tokens 128 \
      --reps 3 --json >$OUT/abl-$name-${tag//,/+}.json 2>/dev/null && bench_summary $OUT/abl-$name-${tag//,/+}.json "$name ablate $tag"
  done
}
# `receipt NAME DIR`: on an H200 only, the receipts' run (512-token prompt, 128 generated, 5 reps) into
# $OUT/engine-NAME.json with a bench_summary line.
receipt() {
  grep -q H200 $OUT/gpu0.txt && left 60 || return 0
  timeout 80 $B/mere.run bench --model $2 --backend cuda --prompt-tokens 512 --gen-tokens 128 --reps 5 --json \
    >$OUT/engine-$1.json 2>/dev/null && bench_summary $OUT/engine-$1.json $1
}
# `cuda_checks PHASE...`: mere_cuda_check --only PHASE --no-bench for each, into $OUT/cc-PHASE$CC_TAG.log,
# a line each with its count and first failures (CC_TAG, e.g. "-early", names a run under an env switch).
cuda_checks() {
  local ph f
  for ph in "$@"; do
    f=$OUT/cc-$ph${CC_TAG:-}.log
    timeout -k 5 60 $B/mere_cuda_check --only $ph --no-bench >$f 2>&1
    echo "cuda_check $ph${CC_TAG:-} rc=$? $(grep -h 'checks:' $f)"; grep -hE "FAIL" $f | cut -c1-300 | head -5
  done
}
# `engine_checks SECONDS SECTION...`: mere_engine_check's sections whose name contains SECTION, each into
# $OUT/ec-SECTION.log while SECONDS more fit (left), a line each with its count and first failures (and the
# lines matching EC_SHOW, an extended regex, where set).
engine_checks() {
  local need=$1 sec f
  shift
  for sec in "$@"; do
    left $need || break
    f=$OUT/ec-$(echo $sec | tr ' .()' '____').log
    timeout -k 5 150 $B/mere_engine_check . "$sec" >$f 2>&1
    echo "engine_check '$sec' rc=$? $((SECONDS-t0))s"; grep -E "FAIL|engine_check:${EC_SHOW:+|$EC_SHOW}" $f | cut -c1-200 | head -8
  done
}
