#!/usr/bin/env bash
# The bundled models out of the tree for a device call (a call sends the tree and its carry, at most
# 64 MiB; tools/cuda/make_carry.sh says when they must go) and back after it:
#   tools/cuda/models_aside.sh out [NAME...]   move models/NAME (default: every qwen35-* model) aside
#   tools/cuda/models_aside.sh in              move back everything that is aside
#   tools/cuda/models_aside.sh status          what is aside (exit 1 when something is)
# They wait in $MERE_MODELS_ASIDE (default /tmp/mere-models-aside). While any is out, git sees its files
# as deleted: commit only after `in` (session 28 lost the models/ folder to a `git stash` while they
# were out, and a later plain `mv` back put one model's files straight into models/).
set -euo pipefail
cd "$(dirname "$0")/../.."
aside=${MERE_MODELS_ASIDE:-/tmp/mere-models-aside}
cmd=${1:-status}
[ $# -gt 0 ] && shift
case $cmd in
  out)
    mkdir -p "$aside"
    names=("$@")
    [ ${#names[@]} -gt 0 ] || names=($(cd models && ls -d qwen35-* 2>/dev/null))
    for n in "${names[@]}"; do
      [ -d "models/$n" ] || { echo "[models_aside] no models/$n" >&2; exit 1; }
      [ -e "$aside/$n" ] && { echo "[models_aside] $aside/$n already exists: run 'in' first" >&2; exit 1; }
      mv "models/$n" "$aside/$n"
      echo "[models_aside] models/$n -> $aside/$n"
    done ;;
  in)
    mkdir -p models
    for d in "$aside"/*; do
      [ -d "$d" ] || continue
      n=$(basename "$d")
      [ -e "models/$n" ] && { echo "[models_aside] models/$n exists and $d too: resolve by hand" >&2; exit 1; }
      mv "$d" "models/$n"
      echo "[models_aside] $d -> models/$n"
    done ;;
  status)
    out=$(ls "$aside" 2>/dev/null || true)
    if [ -n "$out" ]; then echo "[models_aside] aside: $out (run 'in' before committing)"; exit 1; fi
    echo "[models_aside] nothing aside" ;;
  *) echo "usage: $0 out [NAME...] | in | status" >&2; exit 2 ;;
esac
