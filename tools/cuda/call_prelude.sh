# Sourced by the per-session device-call scripts (tools/cuda/s*.sh), in the repo root on the GPU
# machine: unpacks the carried binaries (build/carry/bin.tar.xz) into $B, works in $OUT = /tmp/o and
# packs it into the tool's own $OUT ($R/x.tgz) with `pack`, records the GPU, and gives `left N`:
# true while N more seconds fit in LIMIT (default $LIMIT_DEFAULT, else 540), and `trace_summary JSON LABEL`:
# the first 16 kernels of a kernel-trace summary (MERE_CUDA_TRACE_OUT) of verification passes.
R=$OUT; export OUT=/tmp/o B=build/engine-carry; mkdir -p $B $OUT; tar xJf build/carry/bin.tar.xz -C $B
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv | tee $OUT/gpu0.txt
t0=$SECONDS; LIMIT=${LIMIT:-${LIMIT_DEFAULT:-540}}
left() { [ $((SECONDS - t0 + $1)) -lt $LIMIT ]; }
pack() { tar czf $R/x.tgz -C $OUT .; }
trace_summary() {
  python3 - "$@" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
print("%s: %d passes traced, %.1f us a pass in sequence" % (sys.argv[2], t["steps"], t["us_per_step"]))
for k in t["kernels"][:16]:
    print("  %-44s %6.2f a pass %8.1f us a pass %7.2f us each" % (k["name"][:44], k["launches_per_step"], k["us_per_step"], k["us_each"]))
PY
}
