#!/usr/bin/env bash
# Configures and builds the CUDA preset (sm_90a) with the installed nvcc; needs no GPU, so CI can
# compile the CUDA backend. Usage: scripts/build-cuda.sh [target...] (default: everything).
# Finds nvcc on PATH, in $CUDACXX or at /usr/local/cuda/bin/nvcc.
set -euo pipefail
cd "$(dirname "$0")/.."
nvcc_path="${CUDACXX:-$(command -v nvcc || true)}"
if [ -z "$nvcc_path" ] && [ -x /usr/local/cuda/bin/nvcc ]; then nvcc_path=/usr/local/cuda/bin/nvcc; fi
if [ -z "$nvcc_path" ]; then
  echo "[build-cuda] no nvcc: expected one on PATH, in \$CUDACXX or at /usr/local/cuda/bin/nvcc, got none" >&2
  exit 1
fi
cmake --preset cuda -G Ninja -DCMAKE_CUDA_COMPILER="$nvcc_path" >/dev/null
if [ "$#" -gt 0 ]; then
  cmake --build --preset cuda -j "$(nproc)" --target "$@"
else
  cmake --build --preset cuda -j "$(nproc)"
fi
