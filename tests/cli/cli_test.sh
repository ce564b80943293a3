#!/usr/bin/env bash
# CLI contract: --help everywhere, unknown flags rejected, bad inputs give a clear error and a
# non-zero exit (never a crash), and the commands run end to end on a synthetic model.
set -uo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fails=0
check() {  # check NAME EXPECTED_RC PATTERN -- command...
  local name="$1" want="$2" pat="$3"
  shift 4
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ "$want" = "nonzero" ]; then
    if [ $rc -eq 0 ] || [ $rc -ge 128 ]; then echo "FAIL $name: rc=$rc (want a clean non-zero exit)"; cat "$tmp/err"; fails=$((fails+1)); return; fi
  elif [ $rc -ne "$want" ]; then echo "FAIL $name: rc=$rc want $want"; cat "$tmp/err"; fails=$((fails+1)); return; fi
  if [ -n "$pat" ] && ! grep -q -- "$pat" "$tmp/out" "$tmp/err"; then
    echo "FAIL $name: output lacks '$pat'"; cat "$tmp/out" "$tmp/err" | head -20; fails=$((fails+1)); return; fi
  echo "ok   $name"
}

check top-help 0 "commands:" -- "$bin" --help
# every listed command has --help
# the listing prints each command path in a 22-character column
"$bin" --help | sed -n '/^commands:/,$p' | tail -n +2 | cut -c3-24 | sed 's/ *$//' | while read -r path; do
  [ -z "$path" ] && continue
  "$bin" $path --help >"$tmp/h" 2>&1 || { echo "FAIL help: $path"; exit 1; }
  grep -q "usage: mere.run $path" "$tmp/h" || { echo "FAIL help text: $path"; exit 1; }
  "$bin" $path --definitely-not-a-flag >"$tmp/h" 2>&1 && { echo "FAIL unknown flag accepted: $path"; exit 1; }
  grep -q "unknown flag" "$tmp/h" || { echo "FAIL unknown flag message: $path"; cat "$tmp/h"; exit 1; }
  echo "ok   help+unknown-flag: $path"
done || fails=$((fails+1))
check unknown-command 2 "unknown command" -- "$bin" nope nope
# the CPU kernels' tuning switches: a value outside the allowed set is an error naming the variable
check bad-cpu-knob 2 "MERE_CPU_FLOAT_ROWS: expected 1, 2, 4" -- env MERE_CPU_FLOAT_ROWS=3 "$bin" --help
check bad-cpu-prefetch 2 "MERE_CPU_PREFETCH: expected an integer" -- env MERE_CPU_PREFETCH=abc "$bin" --help

m="$tmp/tiny"
check synth 0 "" -- "$bin" model synth --geometry tiny-dense --dtype bf16 --seed 3 --out "$m"
check synth-refuses-overwrite nonzero "" -- "$bin" model synth --geometry tiny-dense --dtype bf16 --seed 3 --out "$m"
check info 0 "parameters" -- "$bin" model info --model "$m"
check info-json 0 '"layer_kinds"' -- "$bin" model info --model "$m" --json
check logits 0 "wrote" -- "$bin" text logits --model "$m" --token-ids 1,2,3 --output "$tmp/l.npy"
check logits-bad-id nonzero "out of range" -- "$bin" text logits --model "$m" --token-ids 1,99999999,3 --output "$tmp/l.npy"
check logits-not-int nonzero "not an integer" -- "$bin" text logits --model "$m" --token-ids 1,x --output "$tmp/l.npy"
check missing-flag nonzero "missing required flag" -- "$bin" text logits --model "$m"
check no-model-dir nonzero "config.json" -- "$bin" model info --model "$tmp/none"

# corrupt copies of the model
bad="$tmp/bad"
corrupt() { rm -rf "$bad"; cp -r "$m" "$bad"; }
st=$(ls "$m"/*.safetensors | head -1); stb=$(basename "$st")
corrupt; head -c 100 "$st" > "$bad/$stb"
check truncated nonzero "$stb" -- "$bin" model info --model "$bad"
corrupt; printf '\xff\xff\xff\xff\xff\xff\x00\x00{}' > "$bad/$stb"
check header-past-end nonzero "header length" -- "$bin" model info --model "$bad"
corrupt; printf '{"model_type": "qwen3_5_text", ' > "$bad/config.json"
check malformed-config nonzero "config.json:1:" -- "$bin" model info --model "$bad"
corrupt; sed -i 's/"hidden_size": *[0-9]*/"hidden_size": 96/' "$bad/config.json"
check shape-contradicts nonzero "contradicts the config" -- "$bin" model info --model "$bad"
corrupt; sed -i 's/Qwen3_5ForConditionalGeneration/LlamaForCausalLM/' "$bad/config.json"
check unknown-arch nonzero "unknown architecture" -- "$bin" model info --model "$bad"

check verify-bench 0 '"first_divergence": -1' -- "$bin" model verify-bench --model "$m" --prompt-tokens 8 --passes 2 --reps 1 --widths 1,3 --parity-depths 1,2 --parity-tokens 8 --json --quiet
if [ "$(grep -c '"oracle_mismatches": 0' "$tmp/out")" != 2 ]; then echo "FAIL verify-bench: a pass row differs from the serial decode"; cat "$tmp/out"; fails=$((fails+1)); fi
check verify-bench-bad-width nonzero "width" -- "$bin" model verify-bench --model "$m" --widths 1,0

if [ -f "$m/tokenizer.json" ] && "$bin" text generate --help >/dev/null 2>&1; then
  check generate 0 "" -- "$bin" text generate --model "$m" --prompt "hello" --max-tokens 4 --temperature 0
  check generate-empty nonzero "empty prompt" -- "$bin" text generate --model "$m" --prompt ""
  check generate-too-long nonzero "does not fit the context" -- "$bin" text generate --model "$m" --prompt "hello world" --context 2
  check generate-bad-utf8 0 "invalid UTF-8" -- "$bin" text generate --model "$m" --prompt $'ab\xffcd' --max-tokens 2
fi

[ $fails -eq 0 ] && echo "cli: all checks passed" || { echo "cli: $fails failure(s)"; exit 1; }
