#!/usr/bin/env bash
# Installs what the build and tests need (Debian packages), only when missing. Idempotent.
# Tools are checked by command (node/npm may come from NodeSource rather than Debian), libraries by package.
set -euo pipefail
need=()
declare -A cmd_pkg=([cmake]=cmake [g++]=g++ [ninja]=ninja-build [clang++]=clang [node]=nodejs [python3]=python3)
for c in "${!cmd_pkg[@]}"; do
  command -v "$c" >/dev/null 2>&1 || need+=("${cmd_pkg[$c]}")
done
command -v npm >/dev/null 2>&1 || { dpkg -s nodejs 2>/dev/null | grep -q nodesource || need+=(npm); }
for pkg in libgtest-dev libclang-rt-14-dev; do
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
