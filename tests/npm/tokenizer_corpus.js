// Deterministic tokenizer test corpus (same strings on every run): code in several languages, prose
// in many scripts, emoji and ZWJ sequences, whitespace and CRLF runs, contractions in every case,
// decomposed text that NFC composes, special tokens inside text, and every Unicode code point.
'use strict';

function rng(seed) {
  // mulberry32
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const PROSE = {
  english: ["The quick brown fox jumps over the lazy dog.", "It's a truth universally acknowledged.",
    "Don't panic; we'll fix it, they've said.", "HELLO WORLD, I'M SHOUTING!", "e-mail me at foo.bar@example.com"],
  chinese: ["我们今天去公园散步吧。", "机器学习是人工智能的一个分支。", "你好，世界！这是一个测试。", "繁體中文與简体中文混合。"],
  japanese: ["今日はいい天気ですね。", "カタカナとひらがなと漢字。", "東京スカイツリーに行きました！"],
  korean: ["안녕하세요, 세계!", "한국어 문장을 토큰화합니다.", "대한민국의 수도는 서울입니다."],
  arabic: ["مرحبا بالعالم", "اللغة العربية جميلة جداً.", "هذا اختبار للترميز، أليس كذلك؟"],
  hebrew: ["שלום עולם", "זוהי בדיקה של המקודד.", "עִבְרִית עם ניקוד"],
  devanagari: ["नमस्ते दुनिया", "यह एक परीक्षण वाक्य है।", "क़ ख़ ग़ ज़ ड़ ढ़ फ़ य़", "संस्कृतम् भाषा"],
  thai: ["สวัสดีชาวโลก", "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ", "กรุงเทพมหานคร"],
  cyrillic: ["Привет, мир!", "Съешь же ещё этих мягких французских булок.", "ЁЛКА и ёлка"],
  greek: ["Γειά σου Κόσμε!", "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.", "ΆΈΉΊΌΎΏ ΐΰ"],
  bengali: ["আমি বাংলায় গান গাই।", "কম্পিউটার বিজ্ঞান"],
  tamil: ["வணக்கம் உலகம்", "தமிழ் மொழி"],
  georgian: ["გამარჯობა მსოფლიო"],
  armenian: ["Բարեւ աշխարհ"],
  vietnamese: ["Tiếng Việt có dấu: ă â đ ê ô ơ ư", "Xin chào thế giới!"],
  turkish: ["İstanbul'da ılık bir gün; IĞDIR ığdır."],
  amharic: ["ሰላም ለዓለም"],
  mixed: ["naïve café résumé coöperate", "Straße ß ẞ ǅ ǈ ǋ", "ﬁ ﬂ ﬀ ligatures", "ＦＵＬＬＷＩＤＴＨ １２３"],
};

const CODE = [
  (r) => `def ${id(r)}(${id(r)}, ${id(r)}=None):\n    """Docstring."""\n    if ${id(r)} is None:\n        return [x**2 for x in range(${int(r)})]\n    return {'k': ${int(r)}}\n`,
  (r) => `#include <vector>\nint ${id(r)}(const std::vector<int>& v) {\n\tint s = 0;\n\tfor (auto x : v) s += x * ${int(r)};\n\treturn s; // sum\n}\n`,
  (r) => `const ${id(r)} = async (${id(r)}) => {\n  await fetch(\`/api/\${${id(r)}}\`);\n  return ${id(r)}?.map((x) => x + ${int(r)}) ?? [];\n};\n`,
  (r) => `fn ${id(r)}(x: &str) -> Result<u32, Box<dyn Error>> {\n    let n: u32 = x.parse()?;\n    Ok(n << ${int(r) % 31})\n}\n`,
  (r) => `func ${id(r)}(ctx context.Context) error {\n\tif err := run(ctx); err != nil {\n\t\treturn fmt.Errorf("fail: %w", err)\n\t}\n\treturn nil\n}\n`,
  (r) => `SELECT ${id(r)}, COUNT(*) AS n FROM ${id(r)} WHERE x >= ${int(r)} GROUP BY 1 ORDER BY n DESC;\n`,
  (r) => `<div class="${id(r)}" data-x='${int(r)}'>\r\n  <p>Hello &amp; bye</p>\r\n</div>\r\n`,
  (r) => `#!/bin/bash\nfor f in *.txt; do\n  grep -n '${id(r)}' "$f" | awk '{print $1}' >> out.log 2>&1\ndone\n`,
  (r) => `{"${id(r)}": [${int(r)}, ${int(r)}.5e-3, true, null], "nested": {"a": "b\\n"}}\n`,
  (r) => `public static void main(String[] args) { System.out.println("${id(r)}" + ${int(r)}); }\n`,
  (r) => `    \t  ${id(r)} = lambda x: x if x else ${int(r)}    \n\n\n`,
];

function id(r) {
  const parts = ["foo", "bar", "baz", "get", "set", "Value", "HTTP", "parse", "Json", "x", "_tmp", "i18n", "utf8",
    "camelCase", "snake_case", "SCREAMING", "__init__", "ptr", "κ", "данные", "変数"];
  let s = "";
  const n = 1 + Math.floor(r() * 3);
  for (let i = 0; i < n; i++) s += parts[Math.floor(r() * parts.length)];
  return s;
}
function int(r) { return Math.floor(r() * 100000); }
function pick(r, a) { return a[Math.floor(r() * a.length)]; }

const EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇺🇸🇯🇵", "1️⃣", "❤️", "🤗", "🧑🏿‍💻", "👩‍❤️‍💋‍👨", "✊🏻✊🏼✊🏽✊🏾✊🏿", "⚽️🏀",
  "🫠🫥", "©®™", "☺︎☺️"];
const SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>", "</tool_call>",
  "<tool_response>", "<|fim_prefix|>", "<|vision_start|>", "<|image_pad|>", "<|im_start", "<|im_end|", "< think>",
  "<think", "think>", "<|", "|>", "<<think>>", "<|im_start|><|im_end|>"];
const CONTRACTIONS = ["'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'rE", "'ve", "'VE", "'Ve", "'vE", "'m", "'M",
  "'ll", "'LL", "'Ll", "'lL", "'d", "'D", "'ſ", "’s", "''", "'", "'x"];
const DECOMPOSED = ["e\u0301", "A\u030A", "o\u0308\u0304", "a\u0323\u0302", "a\u0302\u0323", "\u1100\u1161\u11A8",
  "\u1112\u1161\u11AB\u1100\u1173\u11AF", "\u212B", "\u2126", "\u1E9B\u0323", "\u0915\u093C", "\uF900\uF901",
  "\u0387", "\u00C5\u0328", "n\u0303o\u0303", "\u05D0\u05B8", "i\u0307\u0301", "\u0041\u0301\u0327",
  "\u0301\u0301start", "\u0CC6\u0CC2", "\u0DD9\u0DCF", "\u0B47\u0B3E", "\u1025\u102E", "\u3099\u304B\u3099",
  "\u30AB\u3099", "\u0627\u0653", "\u0648\u0654", "x\u20D7\u20D7", "\u1B05\u1B35"];
const WHITESPACE = [" ", "  ", "\t", "\n", "\r\n", "\r", "\u00A0", "\u3000", "\u2028", "\u2029", "\u0085", "\u000B",
  "\u000C", "\u001C", "\u001F", "\u200B", "\u2009", "\u202F", "\uFEFF"];
const NUMBERS = ["0", "42", "3.14159", "1,000,000", "-273.15", "1e-9", "0x1F", "٣٤٥", "१२३", "１２３", "²³", "½¾",
  "ⅫⅣ", "①②", "𝟙𝟚𝟛"];

function prose(r) {
  const langs = Object.keys(PROSE);
  return pick(r, PROSE[pick(r, langs)]);
}

function whitespaceRun(r) {
  const kind = Math.floor(r() * 6);
  const n = 1 + Math.floor(r() * (r() < 0.1 ? 600 : 12));
  if (kind === 0) return " ".repeat(n);
  if (kind === 1) return "\r\n".repeat(n);
  if (kind === 2) return "\n".repeat(n);
  if (kind === 3) return "\t".repeat(n);
  if (kind === 4) return (" \r\n").repeat(n);
  let s = "";
  for (let i = 0; i < n; i++) s += pick(r, WHITESPACE);
  return s;
}

function randomCodePoint(r) {
  const ranges = [[0x20, 0x7E], [0xA0, 0x24F], [0x300, 0x36F], [0x370, 0x3FF], [0x400, 0x4FF], [0x590, 0x5FF],
    [0x600, 0x6FF], [0x900, 0x97F], [0xE00, 0xE7F], [0x1100, 0x11FF], [0x1DC0, 0x1DFF], [0x2000, 0x206F],
    [0x20A0, 0x20CF], [0x2100, 0x214F], [0x2190, 0x22FF], [0x3000, 0x30FF], [0x4E00, 0x9FFF], [0xAC00, 0xD7A3],
    [0xF900, 0xFAFF], [0xFE00, 0xFE0F], [0xFF00, 0xFFEF], [0x1D400, 0x1D7FF], [0x1F300, 0x1FAFF], [0x20000, 0x2A6DF],
    [0xE000, 0xE0FF], [0xE0000, 0xE007F]];
  const [a, b] = pick(r, ranges);
  return String.fromCodePoint(a + Math.floor(r() * (b - a + 1)));
}

function fragment(r) {
  const k = r();
  if (k < 0.22) return pick(r, CODE)(r);
  if (k < 0.45) return prose(r);
  if (k < 0.52) return pick(r, EMOJI);
  if (k < 0.60) return whitespaceRun(r);
  if (k < 0.68) return pick(r, ["he", "she", "IT", "they", "We", "you", "I", "o"]) + pick(r, CONTRACTIONS);
  if (k < 0.75) return pick(r, DECOMPOSED);
  if (k < 0.83) return pick(r, SPECIALS);
  if (k < 0.89) return pick(r, NUMBERS);
  let s = "";
  const n = 1 + Math.floor(r() * 8);
  for (let i = 0; i < n; i++) s += randomCodePoint(r);
  return s;
}

function longStrings(r) {
  const out = [];
  out.push("a".repeat(5000), "ab".repeat(3000), "9".repeat(3000), "!".repeat(2000), " ".repeat(4000),
    " ".repeat(4000) + "x", "\n".repeat(3000), "\r\n".repeat(2000) + "end", "\t \t".repeat(1000) + "\n",
    "😀".repeat(500), "字".repeat(3000), "é".repeat(2000), "e\u0301".repeat(1000), "ـ".repeat(500),
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "https://example.com/path/to/resource?query=" + "x%20y".repeat(200) + "&a=b#frag",
    "VGhlIHF1aWNrIGJyb3duIGZveA==".repeat(100),
    Array.from({ length: 300 }, (_, i) => (i * 2654435761 >>> 0).toString(16)).join(""),
    "<|im_start|>".repeat(200), "<think>\n".repeat(100) + "</think>");
  let s = "";
  for (let i = 0; i < 3000; i++) s += pick(r, ["a", "é", "1", " ", "\n", "😀", "字", "'s", "!", "\u0301"]);
  out.push(s);
  return out;
}

// Every code point (surrogates excluded) in chunks, to cross-check categories and NFC data.
function allCodePoints(chunk) {
  const out = [];
  let cur = [];
  for (let c = 0; c < 0x110000; c++) {
    if (c >= 0xD800 && c < 0xE000) continue;
    cur.push(String.fromCodePoint(c));
    if (cur.length === chunk) {
      out.push(cur.join(""));
      cur = [];
    }
  }
  if (cur.length) out.push(cur.join(""));
  return out;
}

// Returns {main: [...>= 5000 strings], codepoints: [...]}.
function buildCorpus(seed = 20240601) {
  const r = rng(seed);
  const main = [""];
  for (const lang of Object.keys(PROSE)) for (const s of PROSE[lang]) main.push(s);
  for (const s of SPECIALS) main.push(s, "x" + s + "y", " " + s + " ", s + "\u0301", "\n" + s + "\n");
  for (const c of CONTRACTIONS) main.push("it" + c, "IT" + c + " good", c, " " + c);
  for (const s of DECOMPOSED) main.push(s, "x" + s, s + " " + s);
  for (const e of EMOJI) main.push(e, " " + e, e + e);
  for (const s of longStrings(r)) main.push(s);
  while (main.length < 5200) {
    const n = 1 + Math.floor(r() * 6);
    let s = "";
    for (let i = 0; i < n; i++) s += fragment(r);
    main.push(s);
  }
  return { main, codepoints: allCodePoints(512) };
}

module.exports = { buildCorpus, rng };
