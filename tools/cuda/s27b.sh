#!/usr/bin/env bash
# Ran in session 28 on an H100: bench/cuda/s28/h100-b.
# Session 27 (not run: every start was refused), a follow-up call on the warm machine after s27c.sh /
# s27a.sh (same carried binaries; it profiles whichever group-integer kernel they hold): issue 7's
# width-8 matvec under ncu. The group-integer matvec (MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=db4, the
# shape of the verification runs) at [17408, 5120], T = 1 (launch 1 of cuda_check --ncu) and T = 8
# (launch 7): speed of light, warp states, memory tables, instruction stats and per-instruction stall
# samples, to find what is left of T = 8's extra time over T = 1 (docs/speculation.md). LIMIT 200.
LIMIT_DEFAULT=200 . tools/cuda/call_prelude.sh
for s in 1 7; do
  left 60 || break
  MERE_CUDA_GM=db4 NCU_S=$s NCU_TAG=-s$s timeout 120 bash tools/cuda/engine_run.sh ncusrc 2>&1 | head -40
  gzip -f $OUT/ncu-qmatvec_gmma-s$s-src.csv; pack
done
echo "total $((SECONDS-t0))s"; pack
