# Sourced by the per-session device-call scripts (tools/cuda/s*.sh), in the repo root on the GPU
# machine: unpacks the carried binaries (build/carry/bin.tar.xz) into $B, works in $OUT = /tmp/o and
# packs it into the tool's own $OUT ($R/x.tgz) with `pack`, records the GPU, and gives `left N`:
# true while N more seconds fit in LIMIT (default $LIMIT_DEFAULT, else 540).
R=$OUT; export OUT=/tmp/o B=build/engine-carry; mkdir -p $B $OUT; tar xJf build/carry/bin.tar.xz -C $B
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv | tee $OUT/gpu0.txt
t0=$SECONDS; LIMIT=${LIMIT:-${LIMIT_DEFAULT:-540}}
left() { [ $((SECONDS - t0 + $1)) -lt $LIMIT ]; }
pack() { tar czf $R/x.tgz -C $OUT .; }
