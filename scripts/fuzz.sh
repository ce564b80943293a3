#!/usr/bin/env bash
# Builds the libFuzzer targets, replays each committed corpus, then fuzzes each briefly.
# FUZZ_SECONDS (default 20) sets the fuzzing time per target.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh fuzz
secs="${FUZZ_SECONDS:-20}"
for bin in build/fuzz/fuzz_*; do
  name="$(basename "$bin")"
  corpus="tests/data/fuzz/${name#fuzz_}"
  [ -d "$corpus" ] || { echo "[fuzz] missing corpus $corpus"; exit 1; }
  work="$(mktemp -d)"
  cp -r "$corpus"/. "$work"/
  echo "[fuzz] $name: replaying $(ls "$corpus" | wc -l) inputs, then fuzzing ${secs}s"
  "$bin" -runs=0 "$corpus" 2>&1 | tail -n 2
  "$bin" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 "$work" 2>&1 | tail -n 3
  rm -rf "$work"
done
