#!/usr/bin/env bash
# The full greedy-parity check of issue 7 on the CPU: both bundled models, the five workload-style
# prompts, 256 tokens with EOS ignored, MTP adaptive and forced at every depth 1..3 vs no MTP.
# Builds the release test binary and runs the parity test with the wide settings.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build/parity -G Ninja -DCMAKE_BUILD_TYPE=Release -DMERE_CUDA=OFF -DMERE_TESTS=ON >/dev/null
ninja -C build/parity mere_tests >/dev/null
MERE_PARITY_TOKENS="${TOKENS:-256}" MERE_PARITY_ALL_DEPTHS=1 build/parity/mere_tests --gtest_filter='*BundledParity*'
