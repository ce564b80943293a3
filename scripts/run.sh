#!/usr/bin/env bash
# The main job: builds mere.run (release) and generates code with the bundled model.
# PROMPT, MAX_TOKENS and MODEL override the defaults. When the bundled model is absent, a small
# random-weight model is synthesised instead (its text is noise, but every stage runs).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release >/dev/null
bin=build/release/mere.run
model="${MODEL:-models/qwen35-dense-tiny}"
if [ ! -f "$model/config.json" ]; then
  model=build/models/synth-tiny-dense
  echo "[run] bundled model not found; synthesising a random-weight model in $model" >&2
  "$bin" model synth --geometry tiny-dense --dtype bf16 --seed 1 --out "$model" --force >/dev/null
fi
default_prompt=$'import os\n\ndef read_json(path):'
exec "$bin" text generate --model "$model" --prompt "${PROMPT:-$default_prompt}" \
  --max-tokens "${MAX_TOKENS:-96}" --temperature 0 --stream --stats
