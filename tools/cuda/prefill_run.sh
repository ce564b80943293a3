#!/usr/bin/env bash
# Runs on the GPU machine: prefill kernel checks + benchmarks (mere_prefill_check, carried in
# build/prefill-carry/ or $B), compute-sanitizer memcheck on --quick, and a cuBLAS bf16 matmul reference
# through PyTorch at the same shapes (the dense-bf16 ceiling our dequantising kernel is compared to).
# Writes everything under $OUT (default /tmp/mere-prefill-out).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/mere-prefill-out}"
mkdir -p "$OUT"
BIN=${B:-build/prefill-carry}/mere_prefill_check
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu \
  --format=csv >"$OUT/gpu.txt" 2>&1
"$BIN" --json "$OUT/prefill.json" 2>&1 | tee "$OUT/prefill.log"
rc=${PIPESTATUS[0]}
echo "[prefill_run] mere_prefill_check exit $rc"
if [ "${MERE_SKIP_TOOLS:-0}" != 1 ]; then
  timeout 90 compute-sanitizer --tool memcheck --print-limit 10 "$BIN" --quick >"$OUT/sanitizer.log" 2>&1
  echo "[prefill_run] compute-sanitizer exit $? ($(tail -1 "$OUT/sanitizer.log"))"
  timeout 60 python3 - <<'PY' 2>&1 | tee "$OUT/torch_ref.txt"
import torch
def t(M, N, K, reps=20):
    a = torch.randn(M, K, device='cuda', dtype=torch.bfloat16); b = torch.randn(N, K, device='cuda', dtype=torch.bfloat16)
    for _ in range(3): c = a @ b.t()
    s = [torch.cuda.Event(enable_timing=True) for _ in range(reps + 1)]
    for i in range(reps):
        s[i].record(); c = a @ b.t()
    s[reps].record(); torch.cuda.synchronize()
    ts = sorted(s[i].elapsed_time(s[i + 1]) * 1e3 for i in range(reps))
    us = ts[len(ts) // 2]
    print(f"torch bf16 matmul M={M} N={N} K={K}: {us:.1f} us, {2*M*N*K/us/1e6:.0f} TFLOP/s")
for (M, N, K) in [(512, 17408, 5120), (512, 5120, 17408), (512, 10240, 5120), (512, 5120, 6144), (512, 8192, 2048), (8192, 8192, 8192)]:
    t(M, N, K)
PY
fi
exit "$rc"
