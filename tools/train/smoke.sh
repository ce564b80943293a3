#!/usr/bin/env bash
# Device call 1: goldens + implementation cross-checks + a miniature end-to-end pipeline run
# (real data, 25 s of training per model) + throughput of eager vs torch.compile.
set -u
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=true
L=$OUT/smoke.log
{
date; nvidia-smi -L; nproc; free -g | head -2
python3 -c "import torch, transformers, tokenizers, safetensors, numpy; print('torch', torch.__version__, 'transformers', transformers.__version__, 'tokenizers', tokenizers.__version__, 'safetensors', safetensors.__version__, 'numpy', numpy.__version__, 'cuda', torch.cuda.is_available())"
python3 -c "import importlib.util as u; print('fla', u.find_spec('fla'), 'causal_conv1d', u.find_spec('causal_conv1d'), 'kernels', u.find_spec('kernels'))"
echo "== goldens"; time python3 tools/goldens/make_goldens.py
echo "== check_impl"; time python3 tools/train/check_impl.py
echo "== mini pipeline"; time python3 tools/train/run_all.py --out $OUT/mini --budget-dense 25 --budget-moe 25 --final-eval-windows 16 --check-repro --bundle small --stamp smoke
echo "== eager solo dense"; timeout 120 python3 tools/train/train.py --model dense --data /tmp/mr_data --out /tmp/s1 --smoke --max-steps 40
echo "== compile solo dense"; timeout 170 python3 tools/train/train.py --model dense --data /tmp/mr_data --out /tmp/s2 --smoke --max-steps 60 --compile 1
date
} 2>&1 | tee $L
tar czf $OUT/goldens.tgz tests/data/goldens
cp /tmp/mr_data/tokenizer.json /tmp/mr_data/tokenizer_config.json /tmp/mr_data/data_stats.json $OUT/mini/ 2>/dev/null
cat /tmp/s1/smoke.json /tmp/s2/smoke.json 2>/dev/null
ls -la $OUT $OUT/mini
