#!/usr/bin/env bash
# CUDA engine checks and decode benchmarks on the GPU machine (docs/cuda-engine.md). Stages:
#   check    build/engine-carry/mere_engine_check: goldens, MTP fixtures, CUDA vs CPU parity
#   b27      synth the Qwen3.5-27B geometry (4-bit g64) into /tmp, `mere.run bench --backend cuda`
#            (graph on and off), ncu per-kernel times of one 1-token forward, GPU memory peak
#   b27tc    b27's bench with the tensor-core matvec (MERE_CUDA_QMATVEC=tc), no ncu / no-graph runs
#   b35      the same for the 35B-A3B geometry
#   kcheck   $B/mere_cuda_check (kernel checks + matvec benchmarks; KARGS: extra arguments such as
#            "--kernels gmma,int", KTAG: a suffix of its log and JSON), pcheck: $B/mere_prefill_check
#   vb27     model verify-bench at the 27B geometry with the integer (default) and the tensor-core matvec
#   b27long  27B geometry, decode at context depths 0 and 8,192 (512-token prompt, 64 generated), with
#            the default split attention and with MERE_CUDA_ATTN=gqa: tok/s at both depths and the
#            ratio depth 8192 / depth 0 (issue criterion: >= 0.9)
#   pdl      greedy generations with MERE_CUDA_PDL=0 and =1 must match (bundled models, 27B geometry)
#   ab27 / ab35  decode of env variants AB="A=1 B=2;A=0" (';' between them), alternating, twice each
#            (ROUNDS=n: n times each; ABTAG: a suffix of their JSON names)
#   fab27 / fab35  decode with fusion (default) vs MERE_CUDA_FUSE=0 at the 27B / 35B-A3B geometry
#            (512-token prompt, 128 generated, 3 reps each, alternating order)
#   ncupf27 / ncupf35  ncu per-kernel times of one 512-token prefill pass at the 27B / 35B-A3B geometry
#   ncud27 / ncud35  ncu per-kernel times and DRAM bytes of one decode step with the tuned matvec shapes
#            (caches flushed between kernels unless NCU_CACHE=none): each kernel group's rate on this card
#   trace27 / trace35  in-sequence kernel times of 32 decode steps (no graph) from the trace build of
#            mere.run ($BT/mere.run, cmake -DMERE_CUDA_TRACE=ON; src/backend/cuda/kernel_trace.h), with the
#            normal binary's no-graph and graph decode rates beside it
#   ncumoe   ncu sections (speed of light, warp states, memory, occupancy) of one decode launch of each
#            MoE kernel at the 35B-A3B geometry (the second forward's first moe_gate_up and moe_down)
#   ncuv27   ncu per-kernel times of the verification passes of width 1 and 8 at the 27B geometry (VMV)
#   sass / pattern / ncusrc  SASS of a kernel (SASS_RE), the access-pattern benchmark, ncu of one
#            launch with per-instruction stall samples (NCU_K, NCU_MV)
# Usage (in the repo root; binaries carried in build/engine-carry): bash tools/cuda/engine_run.sh check b27
# Writes logs and JSON under $OUT (default /tmp/mere-engine-out). Env: B (binaries, default
# build/engine-carry), PROMPT / GEN (bench tokens), TAG (JSON name), NCU= / NOGRAPH= (empty: skip),
# NCU_CACHE=none (ncu keeps the caches warm between kernels, as in a real step; default all = flushed).
set -uo pipefail
OUT=${OUT:-/tmp/mere-engine-out}
mkdir -p "$OUT"
B=${B:-build/engine-carry}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv >"$OUT/gpu.txt" 2>&1
P=${PROMPT:-64}
G=${GEN:-128}
bench() {  # name geometry
  local name=$1 geo=$2 dir=/tmp/synth-$1 tag=${TAG:-v1}
  [ "$name" = 27b ] && dir=$D27
  [ "$name" = 35b ] && [ -d /tmp/synth-ab35 ] && dir=/tmp/synth-ab35  # made by an earlier stage
  local t0=$SECONDS
  [ -d "$dir" ] || $B/mere.run model synth --geometry "$geo" --bits 4 --group-size 64 --out "$dir" --quiet || return 1
  echo "[engine_run] synth $geo: $((SECONDS - t0)) s"
  t0=$SECONDS
  # GPU memory high-water mark of the bench process (nvidia-smi every 100 ms; includes the CUDA context)
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >"/tmp/mem-$name.txt" 2>/dev/null &
  local smi=$!
  $B/mere.run bench --model "$dir" --backend cuda --prompt-tokens "$P" --gen-tokens "$G" --reps 5 --json \
    >"$OUT/engine-$name-$tag.json" 2>"/tmp/engine-$name-$tag.err" || { kill $smi; cat "/tmp/engine-$name-$tag.err"; return 1; }
  kill $smi 2>/dev/null
  echo "[engine_run] bench $name (graph): $((SECONDS - t0)) s; GPU memory peak $(sort -n "/tmp/mem-$name.txt" | tail -1) MiB"
  python3 - "$OUT/engine-$name-$tag.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["runs"]:
    print("decode %.1f tok/s [%.1f-%.1f], %.0f GB/s, %.1f%% of copy %.0f GB/s; prefill %.1f tok/s [%.1f-%.1f]" % (
        r["decode_tok_s"]["median"], r["decode_tok_s"]["min"], r["decode_tok_s"]["max"],
        r["decode_weight_gb_s"]["median"], r["decode_pct_of_copy_bw"], d["machine"]["copy_bandwidth_gb_s"],
        r["prefill_tok_s"]["median"], r["prefill_tok_s"]["min"], r["prefill_tok_s"]["max"]))
print("memory", json.dumps(d.get("memory")))
PY
  if [ -n "${NOGRAPH-1}" ]; then
    MERE_CUDA_GRAPH=0 $B/mere.run bench --model "$dir" --backend cuda --prompt-tokens 16 --gen-tokens "$G" --reps 3 \
      --json >"$OUT/engine-$name-$tag-nograph.json" 2>/dev/null &&
      python3 -c "import json,sys;d=json.load(open(sys.argv[1]));r=d['runs'][0];print('no graph: decode %.1f tok/s'%r['decode_tok_s']['median'])" "$OUT/engine-$name-$tag-nograph.json"
  fi
  if [ -n "${NCU-1}" ] && command -v ncu >/dev/null; then
    t0=$SECONDS
    # MERE_CUDA_MV_TUNE=0: the load-time shape tuning would fill the captured launches (s16b's capture
    # held only tuning launches); the fixed shapes differ from the tuned ones by a few µs a launch
    MERE_CUDA_MV_TUNE=${MERE_CUDA_MV_TUNE:-0} MERE_CUDA_GRAPH=0 timeout 150 ncu --clock-control none --cache-control ${NCU_CACHE:-all} --csv \
      --metrics gpu__time_duration.sum --launch-count 3400 $B/mere.run bench --model "$dir" --backend cuda --prompt-tokens 1 --gen-tokens 1 --reps 1 >"$OUT/ncu-$name.csv" 2>/dev/null
    echo "[engine_run] ncu $name: $((SECONDS - t0)) s"
    python3 tools/cuda/ncu_summary.py "$OUT/ncu-$name.csv" | tee "$OUT/ncu-$name-summary.txt"
  fi
  [ "$name" = 27b ] || rm -rf "$dir"
}
# every 27B stage shares one synthetic checkpoint, made on first use and removed at the end, unless
# the caller made it first (session 26's s26a.sh lost its 27B receipt to this trap): then it stays
D27=/tmp/synth-27b
D27_OURS=0
[ -d $D27 ] || D27_OURS=1
synth27() { [ -d $D27 ] || $B/mere.run model synth --geometry qwen3.5-27b --bits 4 --group-size 64 --out $D27 --quiet; }
trap '[ $D27_OURS = 1 ] && rm -rf $D27' EXIT
for stage in "$@"; do
  case $stage in
    check) $B/mere_engine_check . 2>&1 | tee "$OUT/engine_check.log" ;;
    kcheck) $B/mere_cuda_check --json "$OUT/cuda_check${KTAG-}.json" ${KARGS-} >"$OUT/cuda_check${KTAG-}.log" 2>&1
      echo "[engine_run] mere_cuda_check exit $?"; grep -E "FAIL|checks|failed" "$OUT/cuda_check${KTAG-}.log" | tail -8 ;;
    pcheck) $B/mere_prefill_check --json "$OUT/prefill_check.json" >"$OUT/prefill_check.log" 2>&1
      echo "[engine_run] mere_prefill_check exit $?"; grep -E "FAIL|checks|failed" "$OUT/prefill_check.log" | tail -8 ;;
    b27) bench 27b qwen3.5-27b 2>&1 | tee "$OUT/bench-27b.log" ;;
    b27tc) MERE_CUDA_QMATVEC=tc TAG=${TAG:-v1}-tc NCU= NOGRAPH= bench 27b qwen3.5-27b 2>&1 | tee "$OUT/bench-27b-tc.log" ;;
    b35) bench 35b qwen3.5-35b-a3b 2>&1 | tee "$OUT/bench-35b.log" ;;
    vb27)  # issue 7: oracle-fed verification by width at the 27B geometry, SIMT vs tensor-core matvec
      synth27
      for mv in ${MVS:-int tc}; do
        MERE_CUDA_QMATVEC=$mv $B/mere.run model verify-bench --model $D27 --backend cuda --widths 1,2,4,8,9 \
          --prompt-tokens 128 --passes 8 --reps 3 --parity-depths ${PARITY_DEPTHS:-1,4,7} --json --quiet >"$OUT/verify-27b-$mv.json" 2>"/tmp/verify-27b-$mv.err" ||
          cat "/tmp/verify-27b-$mv.err"
        python3 - "$OUT/verify-27b-$mv.json" "$mv" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(sys.argv[2], "head/target %.3f;" % d["head_cost_ratio"],
      " ".join("w%d %.1f tok/s (x%.2f)" % (w["width"], w["tokens_per_s"]["median"], w["speedup_vs_width1"]) for w in d["widths"]))
print(sys.argv[2], "forced-depth parity:", json.dumps(d.get("parity")))
PY
      done ;;
    b27long)  # long-context decode: default split attention vs MERE_CUDA_ATTN=gqa (k_attn.cu)
      d=$D27
      synth27
      for attn in split gqa; do  # MERE_CUDA_ATTN=split: anything but gqa is the default kernel
        t0=$SECONDS
        MERE_CUDA_ATTN=$attn $B/mere.run bench --model $d --backend cuda --prompt-tokens 512 --gen-tokens 64 \
          --depths 0,8192 --reps 3 --json >"$OUT/engine-27b-long-$attn.json" 2>"/tmp/engine-27b-long-$attn.err" ||
          { cat "/tmp/engine-27b-long-$attn.err"; continue; }
        echo "[engine_run] bench 27b long ($attn): $((SECONDS - t0)) s"
        python3 - "$OUT/engine-27b-long-$attn.json" "$attn" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
r = {x["depth"]: x["decode_tok_s"] for x in d["runs"]}
a, b = r[0]["median"], r[8192]["median"]
print("attention %s: decode depth 0 %.1f tok/s [%.1f-%.1f], depth 8192 %.1f tok/s [%.1f-%.1f], ratio %.3f (issue: >= 0.9)" % (
    sys.argv[2], a, r[0]["min"], r[0]["max"], b, r[8192]["min"], r[8192]["max"], b / a))
PY
      done 2>&1 | tee "$OUT/bench-27b-long.log" ;;
    fab27 | fab35)  # fused decode vs MERE_CUDA_FUSE=0 (engine_forward.cpp decoder_layer)
      geo=qwen3.5-27b; [ $stage = fab35 ] && geo=qwen3.5-35b-a3b
      d=/tmp/synth-$stage
      [ -d $d ] || $B/mere.run model synth --geometry $geo --bits 4 --group-size 64 --out $d --quiet
      for fz in 1 0 1 0; do
        MERE_CUDA_FUSE=$fz $B/mere.run bench --model $d --backend cuda --prompt-tokens 512 --gen-tokens 128 --reps 3 \
          --json >"$OUT/$stage-fuse$fz-$SECONDS.json" 2>/dev/null &&
          python3 -c "import json,sys;d=json.load(open(sys.argv[1]));r=d['runs'][0]['decode_tok_s'];print('$stage fuse=$fz decode %.1f tok/s [%.1f-%.1f]'%(r['median'],r['min'],r['max']))" "$(ls -t $OUT/$stage-fuse$fz-*.json | head -1)"
      done 2>&1 | tee -a "$OUT/fab.log"
      rm -rf $d ;;
    pdl)  # programmatic dependent launch on vs off (MERE_CUDA_PDL): greedy 256 tokens of both bundled
      # models (serial, forced MTP depth 3, adaptive) and 64 of the 27B geometry must be identical
      synth27
      for m in models/qwen35-dense-tiny models/qwen35-moe-tiny $D27; do
        for mode in "--no-mtp" "--mtp --mtp-depth 3" "--mtp"; do
          for p in "def fibonacci(n):" "The capital of France is" "import numpy as np"; do
            mt=256; [ $m = $D27 ] && mt=64
            [ $m = $D27 ] && { [ "$p" = "def fibonacci(n):" ] && [ "$mode" != "--mtp" ] || continue; }
            for v in 0 1; do
              MERE_CUDA_PDL=$v $B/mere.run text generate --model $m --backend cuda --prompt "$p" --temperature 0 \
                --ignore-eos --max-tokens $mt $mode --json >/tmp/pdl$v.json 2>/tmp/pdl$v.err || tail -2 /tmp/pdl$v.err
            done
            python3 -c "import json,sys;a=json.load(open('/tmp/pdl0.json'));b=json.load(open('/tmp/pdl1.json'));sys.exit(0 if a.get('text')==b.get('text') and a.get('text') is not None else 1)" &&
              echo "pdl equal: $m $mode '$p'" || echo "PDL MISMATCH: $m $mode '$p'"
          done
        done
      done 2>&1 | tee "$OUT/pdl.log"
      echo "[engine_run] pdl on/off greedy: $(grep -c 'pdl equal' "$OUT/pdl.log") equal, $(grep -c 'PDL MISMATCH' "$OUT/pdl.log") mismatches" | tee -a "$OUT/pdl.log" ;;
    ab27 | ab35)  # A/B of env settings: AB="VAR=v VAR2=w;VAR=x;..." (';' between variants), run
      # twice each in alternating order, 512-token prompt, 128 generated, 3 reps; one line a run
      geo=qwen3.5-27b; d=$D27; [ $stage = ab35 ] && geo=qwen3.5-35b-a3b && d=/tmp/synth-ab35
      [ -d $d ] || $B/mere.run model synth --geometry $geo --bits 4 --group-size 64 --out $d --quiet
      IFS=';' read -ra variants <<<"${AB:-MERE_CUDA_PDL=1;MERE_CUDA_PDL=0}"
      for round in $(seq 1 ${ROUNDS:-2}); do
        for i in "${!variants[@]}"; do
          v=${variants[$i]}
          f="$OUT/$stage${ABTAG-}-v$i-r$round.json"
          env $v $B/mere.run bench --model $d --backend cuda --prompt-tokens 512 --gen-tokens 128 --reps 3 --json \
            >"$f" 2>"/tmp/$stage.err" || { echo "$v: failed"; tail -3 "/tmp/$stage.err"; continue; }
          python3 -c "import json,sys;d=json.load(open(sys.argv[1]));r=d['runs'][0];t=r['decode_tok_s'];p=r['prefill_tok_s'];print('$stage [$v] decode %.1f tok/s [%.1f-%.1f] prefill %.0f'%(t['median'],t['min'],t['max'],p['median']))" "$f"
        done
      done 2>&1 | tee -a "$OUT/ab.log"
      [ $stage = ab35 ] && [ -z "${KEEP35-}" ] && rm -rf $d ;;  # KEEP35=1: kept for later stages
    ncupf27 | ncupf35)  # ncu per-kernel times of one 512-token prefill pass (first forward), 27B / 35B-A3B geometry
      if [ $stage = ncupf27 ]; then synth27; d=$D27; else
        d=/tmp/synth-ab35; [ -d $d ] || $B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out $d --quiet; fi
      n=${stage#ncu}
      # the GEMM choice's timing launches at the first prompt (prefill_choice.h) are left out
      MERE_CUDA_MV_TUNE=${MERE_CUDA_MV_TUNE:-0} MERE_CUDA_GRAPH=0 timeout 240 ncu --clock-control none --csv --metrics gpu__time_duration.sum \
        --nvtx --nvtx-exclude "mere.prefill_choice/" --launch-count 2500 \
        $B/mere.run bench --model $d --backend cuda --prompt-tokens 512 --gen-tokens 1 --reps 1 >"$OUT/ncu-$n.csv" 2>/dev/null
      python3 tools/cuda/ncu_summary.py "$OUT/ncu-$n.csv" --first | tee "$OUT/ncu-$n-summary.txt" ;;
    ncud27 | ncud35)  # one decode step's kernels (the forward ranges only, so the load-time shape tuning's
      # launches stay out and the tuned shapes run): time and DRAM bytes read, per kernel group
      if [ $stage = ncud27 ]; then synth27; d=$D27; else
        d=/tmp/synth-ab35; [ -d $d ] || $B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out $d --quiet; fi
      n=${stage#ncu}
      MERE_CUDA_GRAPH=0 timeout 200 ncu --clock-control none --cache-control ${NCU_CACHE:-all} --csv \
        --metrics gpu__time_duration.sum,dram__bytes_read.sum --nvtx --nvtx-include "mere.forward T=1/" --launch-count 1400 \
        $B/mere.run bench --model $d --backend cuda --prompt-tokens 1 --gen-tokens 1 --reps 1 >"$OUT/ncu-$n.csv" 2>/dev/null
      python3 tools/cuda/ncu_summary.py "$OUT/ncu-$n.csv" | tee "$OUT/ncu-$n-summary.txt"; gzip -f "$OUT/ncu-$n.csv" ;;
    trace27 | trace35)  # the time each kernel adds to a decode step, in sequence (kernel_trace.h)
      if [ $stage = trace27 ]; then synth27; d=$D27; else
        d=/tmp/synth-ab35; [ -d $d ] || $B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out $d --quiet; fi
      n=${stage#trace}
      MERE_CUDA_GRAPH=0 MERE_CUDA_TRACE_OUT=$OUT/trace-$n.json timeout 100 ${BT:-build/trace-carry}/mere.run bench --model $d \
        --backend cuda --prompt-tokens 64 --gen-tokens 48 --reps 1 --json >$OUT/trace-$n-bench.json 2>$OUT/trace-$n.err || tail -3 $OUT/trace-$n.err
      for g in 0 1; do
        MERE_CUDA_GRAPH=$g timeout 100 $B/mere.run bench --model $d --backend cuda --prompt-tokens 64 --gen-tokens 48 --reps 3 --json \
          >$OUT/trace-$n-plain-g$g.json 2>/dev/null
      done
      python3 - $OUT/trace-$n.json $OUT/trace-$n-bench.json $OUT/trace-$n-plain-g0.json $OUT/trace-$n-plain-g1.json <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
rate = lambda f: json.load(open(f))["runs"][0]["decode_tok_s"]["median"]
print("trace: %d steps, %.1f us a step in sequence (%.1f tok/s); trace build no graph %.1f tok/s; normal build no graph %.1f, graph %.1f tok/s" % (
    t["steps"], t["us_per_step"], 1e6 / t["us_per_step"], rate(sys.argv[2]), rate(sys.argv[3]), rate(sys.argv[4])))
for k in t["kernels"][:16]:
    print("  %-44s %5.1f a step %8.1f us a step %6.2f us each" % (k["name"][:44], k["launches_per_step"], k["us_per_step"], k["us_each"]))
PY
      ;;
    ncumoe)  # one decode launch of each MoE kernel in detail (the first forward's 40 + 40 are skipped)
      d=/tmp/synth-ab35; [ -d $d ] || $B/mere.run model synth --geometry qwen3.5-35b-a3b --bits 4 --group-size 64 --out $d --quiet
      MERE_CUDA_GRAPH=0 timeout 150 ncu --clock-control none -k regex:"moe_(gate_up|down)" -s 80 -c 2 --section SpeedOfLight \
        --section WarpStateStats --section SchedulerStats --section Occupancy --section MemoryWorkloadAnalysis --section LaunchStats \
        $B/mere.run bench --model $d --backend cuda --prompt-tokens 1 --gen-tokens 4 --reps 1 >"$OUT/ncu-moe.txt" 2>&1
      grep -E "moe_|Duration|DRAM Throughput|Memory Throughput|Issued Warp|No Eligible|Warp Cycles Per Issued|Achieved Active|Registers Per|Stall" "$OUT/ncu-moe.txt" | head -40 ;;
    ncuv27)  # ncu per-kernel times of the oracle-fed verification passes at the 27B geometry, width 1 and
      # width 8 (NVTX ranges of CudaEngine::forward; VMV: the matvec env, default the group-integer mma db4)
      synth27
      for w in 1 8; do
        env ${VMV:-MERE_CUDA_QMATVEC=mma MERE_CUDA_GM=db4} MERE_CUDA_MV_TUNE=0 MERE_CUDA_GRAPH=0 timeout 200 ncu --clock-control none \
          --cache-control none --nvtx --nvtx-include "mere.forward T=$w/" --csv --metrics gpu__time_duration.sum --launch-count 1500 \
          $B/mere.run model verify-bench --model $D27 --backend cuda --widths $w --prompt-tokens 128 --passes 2 --reps 1 --quiet \
          >"$OUT/ncu-v27-w$w.csv" 2>/dev/null
        python3 tools/cuda/ncu_summary.py "$OUT/ncu-v27-w$w.csv" --all | tee "$OUT/ncu-v27-w$w-summary.txt"
      done ;;
    sass)  # SASS of the kernels whose mangled name matches SASS_RE (default: the T=1 group-integer matvec)
      re=${SASS_RE:-qmatvec_gmma_kernelILi1ELi6E}
      cuobjdump -sass $B/mere_cuda_check | awk -v re="$re" '/Function : /{f=($0 ~ re)} f' >"$OUT/sass.txt"
      echo "[engine_run] sass: $(wc -l <"$OUT/sass.txt") lines; $(grep -c IMMA "$OUT/sass.txt") IMMA, $(grep -c LDG "$OUT/sass.txt") LDG, $(grep -c DEPBAR "$OUT/sass.txt") DEPBAR" ;;
    pattern)  # tools/cuda/pattern_bench.cu (carried as build/carry/pattern_bench or built here)
      pb=build/carry/pattern_bench
      [ -x $pb ] || { nvcc -std=c++20 -O3 -gencode arch=compute_90a,code=sm_90a tools/cuda/pattern_bench.cu -o /tmp/pattern_bench && pb=/tmp/pattern_bench; }
      $pb ${PATTERN_SHAPE:-17408 5120} 2>&1 | tee "$OUT/pattern.txt" ;;
    ncusrc)  # ncu of one launch of the kernels matching NCU_K (default the group-integer matvec) under
      # MERE_CUDA_QMATVEC=${NCU_MV:-mma}: the speed-of-light, warp-state and memory sections plus the
      # per-instruction SASS stall samples (source page, csv)
      # (NCU_S: launches skipped, default 1: cuda_check --ncu's launches 0-2 are T = 1, 3-5 T = 4, 6-8
      # T = 8, 9-11 T = 9; NCU_TAG: a suffix of the file names)
      k=${NCU_K:-qmatvec_gmma} f="$OUT/ncu-${NCU_K:-qmatvec_gmma}${NCU_TAG-}"
      MERE_CUDA_QMATVEC=${NCU_MV:-mma} timeout 200 ncu --clock-control none -k regex:$k -s ${NCU_S:-1} -c 1 --section SpeedOfLight \
        --section WarpStateStats --section SchedulerStats --section Occupancy --section MemoryWorkloadAnalysis \
        --section MemoryWorkloadAnalysis_Tables --section InstructionStats --section LaunchStats \
        $B/mere_cuda_check --ncu >"$f.txt" 2>&1
      MERE_CUDA_QMATVEC=${NCU_MV:-mma} timeout 200 ncu --clock-control none -k regex:$k -s ${NCU_S:-1} -c 1 --section WarpStateStats \
        --section SourceCounters --page source --print-source sass --csv $B/mere_cuda_check --ncu >"$f-src.csv" 2>&1
      grep -E "Duration|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Executed Ipc|Issued Warp|No Eligible|Warp Cycles Per Issued|Achieved Active|Registers Per|Stall" "$f.txt" ;;
    *) echo "unknown stage $stage" ;;
  esac
done
