#!/usr/bin/env bash
# Issue 8's H200 receipts run (docs/benchmark.md): the bundled models and the synthetic Qwen3.5-27B
# and 35B-A3B geometries (4-bit g64, random weights), five workloads x 3 repetitions x 256 tokens,
# baseline,adaptive, plus reversed-order controls for code and prose; and (issue 7) the oracle-fed
# verification benchmark at the 27B geometry. Runs on the GPU machine from the repo root with the
# CUDA build of mere.run carried in $B (default build/engine-carry).
# Usage: REV=<git sha> bash tools/bench/h200_receipts.sh [check] [models...]   (default: all four models)
# ("check" runs $B/mere_engine_check first; synthetic models also get `mere.run bench` at 512/128.)
# KEEP_SYNTH=1 leaves the synthetic checkpoints in /tmp/synth-27b and /tmp/synth-35b-a3b for later stages.
# Writes $OUT/receipts.tar.gz (bench/receipts/h200-<stamp>/: receipts per model, verify-bench JSON) and $OUT/summary.md.
set -uo pipefail
OUT=${OUT:-/tmp/mere-receipts-out}
B=${B:-build/engine-carry}
REV=${REV:-unknown}
STAMP=${STAMP:-$(date -u +%Y%m%d)}
WARMUP_TOKENS=${WARMUP_TOKENS:-64}
R=/tmp/receipts/h200-$STAMP
mkdir -p "$OUT" "$R"
models=("$@")
[ ${#models[@]} -eq 0 ] && models=(qwen35-dense-tiny qwen35-moe-tiny synth-27b synth-35b-a3b)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv >"$R/gpu.txt" 2>&1
collect() {  # name dir outdir [collector flags...]
  local name=$1 dir=$2 out=$3
  shift 3
  python3 scripts/benchmark-q35-generation.py --binary "$B/mere.run" --source-root . --build-source-revision "$REV" \
    --model "$dir" --output "$out" --backend cuda --tokens 256 --repetitions 3 --warmups 1 \
    --warmup-tokens "$WARMUP_TOKENS" "$@"
  echo "[receipts] $name $(basename "$out"): exit $?"
}
for m in "${models[@]}"; do
  t0=$SECONDS
  if [ "$m" = check ]; then  # the engine's correctness checks first (goldens, fixtures, parity)
    "$B/mere_engine_check" . >"$R/engine_check.log" 2>&1
    echo "[receipts] engine_check: exit $? ($(tail -1 "$R/engine_check.log"))"
    continue
  fi
  case $m in
    synth-27b) dir=/tmp/synth-27b; geo=qwen3.5-27b ;;
    synth-35b-a3b) dir=/tmp/synth-35b-a3b; geo=qwen3.5-35b-a3b ;;
    *) dir=$m; geo= ;;
  esac
  if [ -n "$geo" ] && [ ! -d "$dir" ]; then
    "$B/mere.run" model synth --geometry "$geo" --bits 4 --group-size 64 --out "$dir" --quiet || { echo "synth $geo failed"; continue; }
    echo "[receipts] synth $geo: $((SECONDS - t0)) s"
  fi
  if [ -n "$geo" ]; then  # issue 6: prefill 512 / decode 128 throughput against the device copy bandwidth
    "$B/mere.run" bench --model "$dir" --backend cuda --prompt-tokens 512 --gen-tokens 128 --reps 5 --json \
      >"$R/bench-$m.json" 2>"$R/bench-$m.err"
    echo "[receipts] bench $m: exit $?"
  fi
  collect "$m" "$dir" "$R/$m" --workloads code chat prose math summary --variants baseline,adaptive
  collect "$m" "$dir" "$R/$m-reversed" --workloads code prose --variants adaptive,baseline
  # issue 7 on CUDA: oracle-fed verification by width, head cost, and greedy parity with MTP forced
  # at every depth 1..B-1 (random weights: nearly every draft is rejected, rollback every round)
  case $m in
    synth-27b) depths=1,2,3,4,5,6,7 ;;
    *) depths=1,2,3 ;;
  esac
  vdir=$dir; [ -d "models/$dir" ] && vdir=models/$dir  # the collector resolves bundled names; verify-bench takes a path
  "$B/mere.run" model verify-bench --model "$vdir" --backend cuda --widths 1,2,4,8,9 --prompt-tokens 512 --passes 16 \
    --reps 5 --parity-depths $depths --parity-tokens 64 --json --quiet >"$R/verify-bench-$m.json" 2>"$R/verify-bench-$m.err"
  echo "[receipts] verify-bench $m: exit $? (1 = a row or a parity run differs)"
  echo "[receipts] $m done in $((SECONDS - t0)) s"
  [ -n "$geo" ] && [ -z "${KEEP_SYNTH-}" ] && rm -rf "$dir"
  # after every model, so a call cut off at its time limit still returns what finished
  tar -C /tmp/receipts -czf "$OUT/receipts.tar.gz" "h200-$STAMP"
done
python3 scripts/benchmark-q35-generation.py summarize "$R" >"$OUT/summary.md" 2>&1
cat "$OUT/summary.md"
tar -C /tmp/receipts -czf "$OUT/receipts.tar.gz" "h200-$STAMP"
