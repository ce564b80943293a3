// Writes the benchmark input (~1.2 MB, deterministic): pinned third-party source code (TypeScript,
// Rust, JavaScript from tests/npm/node_modules) followed by the multilingual tokenizer test corpus.
// Usage: node bench/tokenizer/make_input.js OUT_FILE
'use strict';
const fs = require('fs');
const path = require('path');
const nm = path.join(__dirname, '../../tests/npm/node_modules');
const { buildCorpus } = require('../../tests/npm/tokenizer_corpus.js');

const dirs = ['@huggingface/jinja/src', '@anush008/tokenizers/src', '@anush008/tokenizers/src/tasks',
  '@lenml/tokenizers/src/tokenizers', '@lenml/tokenizers/src/tokenizers/utils'];
const parts = [];
for (const d of dirs) {
  for (const f of fs.readdirSync(path.join(nm, d)).sort()) {
    const p = path.join(nm, d, f);
    if (fs.statSync(p).isFile() && /\.(ts|rs|js|md)$/.test(f)) parts.push(fs.readFileSync(p, 'utf8'));
  }
}
for (const f of ['@anush008/tokenizers/README.md', '@lenml/tokenizers/readme.md'])
  parts.push(fs.readFileSync(path.join(nm, f), 'utf8'));
parts.push(buildCorpus().main.join('\n'));
const text = parts.join('\n');
fs.writeFileSync(process.argv[2], text);
console.error(`make_input: ${Buffer.byteLength(text)} bytes, ${text.split('\n').length} lines -> ${process.argv[2]}`);
