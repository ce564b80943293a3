#!/usr/bin/env bash
# Runs on the GPU machine (the `run` tool of this workplace, or any CUDA host): checks + benchmarks
# of the CUDA kernels, then compute-sanitizer on the small shapes, SASS of the matvec and an ncu
# profile. Uses a carried binary (build/cuda-carry/mere_cuda_check) when it starts there, else
# builds one with that machine's nvcc. Writes everything under $OUT (default /tmp/mere-cuda-out).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/mere-cuda-out}"
mkdir -p "$OUT"
BIN=build/cuda-carry/mere_cuda_check
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu \
  --format=csv >"$OUT/gpu.txt" 2>&1
"$BIN" --probe-usage >/dev/null 2>&1
if [ "$?" -ne 2 ]; then
  echo "[device_run] carried binary does not start here: building with $(command -v nvcc)"
  B=/tmp/mere-cuda-build
  mkdir -p "$B"
  FL="-std=c++20 -O3 -gencode arch=compute_90a,code=sm_90a -Isrc"
  for f in src/backend/cuda/*.cu tools/cuda/cuda_check.cu; do nvcc $FL -c "$f" -o "$B/$(basename "$f").o" & done
  for f in src/backend/cuda/*.cpp src/backend/cpu/ref_ops.cpp src/model/matrix.cpp src/core/dtype.cpp; do
    g++ -std=c++20 -O3 -Isrc -I/usr/local/cuda/include -c "$f" -o "$B/$(basename "$f").o" &
  done
  wait
  nvcc -gencode arch=compute_90a,code=sm_90a "$B"/*.o -o "$B/mere_cuda_check" -lpthread || exit 1
  BIN="$B/mere_cuda_check"
fi
"$BIN" --json "$OUT/cuda_check.json" 2>&1 | tee "$OUT/check.log"
rc=${PIPESTATUS[0]}
echo "[device_run] mere_cuda_check exit $rc"
if [ "${MERE_SKIP_TOOLS:-0}" != 1 ]; then
  timeout 150 compute-sanitizer --tool memcheck --print-limit 20 "$BIN" --quick >"$OUT/sanitizer.log" 2>&1
  echo "[device_run] compute-sanitizer exit $? ($(tail -1 "$OUT/sanitizer.log"))"
  # the 4-bit tensor-core kernel at T = 1: shared-memory pipeline R=1 S=8, scales copied too
  K=qmatvec_tcs_kernelILi1ELi1ELi8ELi6ELb1E
  cuobjdump --dump-sass "$BIN" 2>/dev/null |
    awk -v k="$K" '/Function : /{p=index($0,k)>0} p' >"$OUT/sass_q4_T1.txt"
  echo "[device_run] SASS op histogram of q4 tensor-core T=1 R=1 S=8:"
  grep -oE '^\s+/\*[0-9a-f]{4}\*/\s+[A-Z][A-Z0-9_.]*' "$OUT/sass_q4_T1.txt" | awk '{print $2}' | sed 's/\..*//' |
    sort | uniq -c | sort -rn | head -14 | tr '\n' ' '
  echo
  timeout 150 ncu --clock-control none -k regex:qmatvec_tc --section SpeedOfLight --section Occupancy \
    --section SchedulerStats --section WarpStateStats --section LaunchStats "$BIN" --ncu >"$OUT/ncu.txt" 2>&1
  echo "[device_run] ncu exit $?"
  grep -E "qmatvec_tc|DRAM Throughput|Memory Throughput|Duration|Issue Slots Busy|No Eligible|Achieved Occupancy|Registers Per" \
    "$OUT/ncu.txt" | head -60
fi
exit "$rc"
