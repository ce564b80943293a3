#!/usr/bin/env bash
# Session 14, second call (warm machine, ~4.5 device minutes left): the small-launch shape with and
# without the prefetch, other shapes (2,2 / 3,1), 32 MB; ab35 with 2-row small launches. One round.
R=$OUT; export OUT=/tmp/o B=build/engine-carry; mkdir -p $B $OUT; tar xJf build/carry/bin.tar.xz -C $B
t0=$SECONDS; P=MERE_CUDA_MV_PREFETCH E=MERE_CUDA_PDL_EARLY S=MERE_CUDA_MV_SMALL
pack() { tar czf $R/x.tgz -C $OUT .; }
run_ab() {  # stage variants
  local stage=$1 geo=qwen3.5-27b d=/tmp/synth-27b
  [ $stage = ab35 ] && geo=qwen3.5-35b-a3b d=/tmp/synth-ab35
  [ -d $d ] || $B/mere.run model synth --geometry $geo --bits 4 --group-size 64 --out $d --quiet
  IFS=';' read -ra vs <<<"$2"
  for i in "${!vs[@]}"; do
    f=$OUT/$stage-s14b-v$i.json
    env ${vs[$i]} $B/mere.run bench --model $d --backend cuda --prompt-tokens 512 --gen-tokens 128 --reps 3 --json >$f 2>/tmp/e || { tail -2 /tmp/e; continue; }
    python3 -c "import json,sys;r=json.load(open(sys.argv[1]))['runs'][0];t=r['decode_tok_s'];print('$stage [${vs[$i]}] decode %.1f [%.1f-%.1f] prefill %.0f'%(t['median'],t['min'],t['max'],r['prefill_tok_s']['median']))" $f
  done 2>&1 | tee -a $OUT/ab.log; pack
}
run_ab ab27 "$P=0 $S=2,1;$P=16 $S=2,1;$P=16 $S=2,2;$P=16 $S=3,1;$P=32 $E=1 $S=2,1"
rm -rf /tmp/synth-27b
run_ab ab35 "$P=16 $E=1;$P=16 $E=1 $S=2,1"
echo "total $((SECONDS-t0))s"; pack
