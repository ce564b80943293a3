#!/usr/bin/env bash
# Installs what the build and tests need (Debian packages), only when missing. Idempotent.
set -euo pipefail
need=()
for pkg in cmake g++ make ninja-build libgtest-dev clang libclang-rt-14-dev nodejs npm python3; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "[setup] installing: ${need[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
