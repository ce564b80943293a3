#!/usr/bin/env bash
# The bundled models (or other large tracked folders a device call does not need) out of the tree for
# a device call (a call sends the tree and its carry, at most 64 MiB; tools/cuda/make_carry.sh says
# when something must go) and back after it:
#   tools/cuda/models_aside.sh out [NAME|PATH...]  move models/NAME, or the folder PATH (with a '/':
#                                                  e.g. tests/data/mtp, 8 MB of MTP goldens), aside;
#                                                  default: every qwen35-* model
#   tools/cuda/models_aside.sh in                  move back everything that is aside
#   tools/cuda/models_aside.sh status              what is aside (exit 1 when something is)
# They wait in $MERE_MODELS_ASIDE (default /tmp/mere-models-aside), each under its path with '/' as
# '%'. While any is out, git sees its files as deleted: commit only after `in` (session 28 lost the
# models/ folder to a `git stash` while they were out, and a later plain `mv` back put one model's
# files straight into models/).
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
      p=$n
      case $p in */*) ;; *) p=models/$p ;; esac
      p=${p%/}
      [ -d "$p" ] || { echo "[models_aside] no folder $p" >&2; exit 1; }
      key=${p//\//%}
      [ -e "$aside/$key" ] && { echo "[models_aside] $aside/$key already exists: run 'in' first" >&2; exit 1; }
      mv "$p" "$aside/$key"
      echo "[models_aside] $p -> $aside/$key"
    done ;;
  in)
    for d in "$aside"/*; do
      [ -d "$d" ] || continue
      key=$(basename "$d")
      case $key in *%*) p=${key//%//} ;; *) p=models/$key ;; esac  # plain names: models/NAME
      [ -e "$p" ] && { echo "[models_aside] $p exists and $d too: resolve by hand" >&2; exit 1; }
      mkdir -p "$(dirname "$p")"
      mv "$d" "$p"
      echo "[models_aside] $d -> $p"
    done ;;
  status)
    out=$(ls "$aside" 2>/dev/null || true)
    if [ -n "$out" ]; then echo "[models_aside] aside: $out (run 'in' before committing)"; exit 1; fi
    echo "[models_aside] nothing aside" ;;
  *) echo "usage: $0 out [NAME|PATH...] | in | status" >&2; exit 2 ;;
esac
