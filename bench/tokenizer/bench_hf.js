// HF tokenizers (the @anush008/tokenizers binding) on the same input and protocol as
// bench_tokenizer.cpp: whole text as one string and line by line, cold and warm (best of N).
// Run with RAYON_NUM_THREADS=1 (bench/tokenizer/run.sh does) so everything is single-threaded.
// Usage: node bench/tokenizer/bench_hf.js MODEL_DIR TEXT_FILE [REPEATS]
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require(path.join(__dirname, '../../tests/npm/node_modules/@anush008/tokenizers'));

async function main() {
  const [modelDir, file, rep] = process.argv.slice(2);
  const repeats = Number(rep || 5);
  const text = fs.readFileSync(file, 'utf8');
  const bytes = Buffer.byteLength(text);
  const lines = text.match(/[^\n]*\n|[^\n]+$/g);
  const now = () => Number(process.hrtime.bigint()) / 1e9;
  let t0 = now();
  let tok = Tokenizer.fromFile(path.join(modelDir, 'tokenizer.json'));
  const load = now() - t0;
  const whole = async () => { const t = now(); const e = await tok.encode(text); return [now() - t, e.getIds().length]; };
  const perLine = async () => {
    const t = now();
    let n = 0;
    for (let i = 0; i < lines.length; i += 1000)
      for (const e of await tok.encodeBatch(lines.slice(i, i + 1000))) n += e.getLength();
    return [now() - t, n];
  };
  const [coldWhole, tokens] = await whole();
  let bestWhole = coldWhole;
  for (let i = 0; i < repeats; i++) bestWhole = Math.min(bestWhole, (await whole())[0]);
  tok = Tokenizer.fromFile(path.join(modelDir, 'tokenizer.json'));
  const [coldLines, tokensLines] = await perLine();
  let bestLines = coldLines;
  for (let i = 0; i < repeats; i++) bestLines = Math.min(bestLines, (await perLine())[0]);
  const mb = bytes / 1e6;
  const f = (x) => Number(x.toFixed(2));
  console.log(JSON.stringify({ impl: 'hf', bytes, lines: lines.length, tokens, tokens_per_line_sum: tokensLines,
    load_s: Number(load.toFixed(3)), whole_cold_mb_s: f(mb / coldWhole), whole_warm_mb_s: f(mb / bestWhole),
    lines_cold_mb_s: f(mb / coldLines), lines_warm_mb_s: f(mb / bestLines) }));
}
main();
