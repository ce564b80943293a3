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
  // Wall and process CPU seconds (all threads: node's main thread, the libuv worker running the
  // encode, rayon's single worker) of one pass.
  const measure = async (fn) => {
    const t = now();
    const c = process.cpuUsage();
    const tokens = await fn();
    const d = process.cpuUsage(c);
    return { wall: now() - t, cpu: (d.user + d.system) / 1e6, tokens };
  };
  const whole = async () => (await tok.encode(text)).getIds().length;
  const perLine = async () => {
    let n = 0;
    for (let i = 0; i < lines.length; i += 1000)
      for (const e of await tok.encodeBatch(lines.slice(i, i + 1000))) n += e.getLength();
    return n;
  };
  const best = (a, b) => ({ wall: Math.min(a.wall, b.wall), cpu: Math.min(a.cpu, b.cpu), tokens: a.tokens });
  const coldWhole = await measure(whole);
  let warmWhole = { wall: Infinity, cpu: Infinity };
  for (let i = 0; i < repeats; i++) warmWhole = best(warmWhole, await measure(whole));
  tok = Tokenizer.fromFile(path.join(modelDir, 'tokenizer.json'));
  const coldLines = await measure(perLine);
  let warmLines = { wall: Infinity, cpu: Infinity };
  for (let i = 0; i < repeats; i++) warmLines = best(warmLines, await measure(perLine));
  const mb = bytes / 1e6;
  const f = (x) => Number(x.toFixed(2));
  console.log(JSON.stringify({ impl: 'hf', bytes, lines: lines.length, tokens: coldWhole.tokens,
    tokens_per_line_sum: coldLines.tokens, load_s: Number(load.toFixed(3)),
    whole_cold_mb_s: f(mb / coldWhole.wall), whole_warm_mb_s: f(mb / warmWhole.wall),
    lines_cold_mb_s: f(mb / coldLines.wall), lines_warm_mb_s: f(mb / warmLines.wall),
    cpu_whole_cold_mb_s: f(mb / coldWhole.cpu), cpu_whole_warm_mb_s: f(mb / warmWhole.cpu),
    cpu_lines_cold_mb_s: f(mb / coldLines.cpu), cpu_lines_warm_mb_s: f(mb / warmLines.cpu) }));
}
main();
