#!/usr/bin/env bash
# Packs the binaries a device call carries (tools/cuda/s*.sh unpack them with call_prelude.sh) into
# build/carry/bin.tar.xz: this tree's mere.run, mere_cuda_check and mere_engine_check (build/cuda,
# the cuda preset), and optionally trace/mere.run (a trace build, build/cuda-trace) and old/mere.run +
# old/mere_cuda_check built from an earlier commit (a git worktree in /tmp/mere-old-REV) for A/B runs.
# All stripped; xz finds the old binaries' bytes in the new ones, so an A/B pair costs little more.
# Then it checks the 64 MiB limit on what a call sends (the tracked and untracked-unignored files plus
# the carry) and names what to move aside when it is over (the bundled models: ~34 MB, which only
# engine_check's model sections need).
# --bins "A B" packs only those of the three (e.g. "mere.run mere_engine_check": ~7 MB against ~13 for
# all three), --out PATH writes another tarball (call_prelude.sh's CARRY reads it).
# Usage: tools/cuda/make_carry.sh [--trace] [--old REV] [--bins "A B"] [--out PATH] [--help]
set -euo pipefail
cd "$(dirname "$0")/../.."
trace=0 old="" bins="mere.run mere_cuda_check mere_engine_check" out=build/carry/bin.tar.xz
while [ $# -gt 0 ]; do
  case "$1" in
    --trace) trace=1 ;;
    --old) [ $# -ge 2 ] || { echo "make_carry: --old needs a commit" >&2; exit 2; }; old=$2; shift ;;
    --bins) [ $# -ge 2 ] || { echo "make_carry: --bins needs a list" >&2; exit 2; }; bins=$2; shift ;;
    --out) [ $# -ge 2 ] || { echo "make_carry: --out needs a path" >&2; exit 2; }; out=$2; shift ;;
    -h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "make_carry: unknown argument '$1' (expected --trace, --old REV, --bins LIST, --out PATH or --help)" >&2; exit 2 ;;
  esac
  shift
done
stage=$(mktemp -d /tmp/mere-carry.XXXXXX)
trap 'rm -rf "$stage"' EXIT
for b in $bins; do
  case $b in mere.run | mere_cuda_check | mere_engine_check) ;; *) echo "make_carry: --bins: unknown binary '$b'" >&2; exit 2 ;; esac
done
echo "[make_carry] building $bins (build/cuda)"
scripts/build-cuda.sh $bins >/dev/null
for b in $bins; do cp "build/cuda/$b" "$stage/"; done
if [ $trace = 1 ]; then
  echo "[make_carry] building the trace build's mere.run (build/cuda-trace)"
  [ -f build/cuda-trace/build.ninja ] ||
    cmake -S . -B build/cuda-trace -G Ninja -DCMAKE_BUILD_TYPE=Release -DMERE_CUDA=ON -DMERE_TESTS=OFF -DMERE_CUDA_TRACE=ON \
      -DCMAKE_CUDA_COMPILER="${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}" >/dev/null
  cmake --build build/cuda-trace --target mere.run >/dev/null
  mkdir -p "$stage/trace" && cp build/cuda-trace/mere.run "$stage/trace/"
fi
if [ -n "$old" ]; then
  rev=$(git rev-parse --verify --short "$old^{commit}") || { echo "make_carry: '$old' is not a commit" >&2; exit 2; }
  wt=/tmp/mere-old-$rev
  [ -d "$wt" ] || git worktree add --detach "$wt" "$rev" >/dev/null
  echo "[make_carry] building $rev's mere.run and mere_cuda_check ($wt/build/cuda)"
  (cd "$wt" && scripts/build-cuda.sh mere.run mere_cuda_check >/dev/null)
  mkdir -p "$stage/old" && cp "$wt/build/cuda/mere.run" "$wt/build/cuda/mere_cuda_check" "$stage/old/"
fi
find "$stage" -type f -exec strip {} +
mkdir -p build/carry
mkdir -p "$(dirname "$out")"
(cd "$stage" && XZ_OPT=-9e tar cJf - $(find . -type f | sed 's|^\./||' | sort)) >"$out"
carry=$(stat -c %s "$out")
# the files a call sends: tracked ones present in the working tree and untracked ones git does not ignore
tree=$( (git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null || true) | awk '{s += $1} END {print s + 0}')
limit=$((64 * 1024 * 1024))
echo "[make_carry] $out: $(tar tJf "$out" | tr '\n' ' ')"
awk -v c="$carry" -v t="$tree" -v l="$limit" \
  'BEGIN {printf "[make_carry] carry %.1f MB + tree %.1f MB = %.1f MB of the %.1f MB a call may send\n", c / 1e6, t / 1e6, (c + t) / 1e6, l / 1e6}'
if [ $((carry + tree)) -ge $limit ]; then
  echo "[make_carry] OVER the limit: move bundled models out of the tree for the call with" \
    "'tools/cuda/models_aside.sh out [NAME...]' and back after it with '... in' (commit only when they are back)" >&2
  exit 1
fi
