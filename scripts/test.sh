#!/usr/bin/env bash
# Runs every test: the GoogleTest suite under ASan+UBSan, the npm reference tests' fixtures,
# and the fuzz corpora (replayed, then fuzzed briefly). Installs what it needs first.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ -f tests/npm/package-lock.json ]; then
  (cd tests/npm && npm ci --no-audit --no-fund --loglevel=error)
fi
scripts/build.sh asan
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
(cd build/asan && ctest --output-on-failure -j "$(nproc)")
scripts/fuzz.sh
# The CUDA backend compiles wherever nvcc is installed (its checks run on the GPU machine:
# tools/cuda/device_run.sh).
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] || [ -n "${CUDACXX:-}" ]; then
  echo "[test] compiling the CUDA backend: mere.run with the CUDA engine and the GPU check tools"
  scripts/build-cuda.sh mere.run mere_engine_check mere_cuda_check mere_prefill_check
else
  echo "[test] no nvcc on this machine: the CUDA backend was not compiled"
fi
echo "[test] all tests passed"
