// Jinja interpreter cases for the gtest suite (tests/text/jinja_cases_test.cpp). This file is the
// source of truth for the inputs; the expected outputs in tests/data/chat/jinja_cases.json come
// from a reference implementation:
//   ref "hf"     : @huggingface/jinja 0.5.11 (what HF renders in JavaScript; our main reference)
//   ref "jinja2" : Python Jinja2 configured like transformers (tests/data/chat/jinja2_render.py),
//                  for constructs @huggingface/jinja lacks or gets wrong (documented divergences)
//   error cases  : mere.run must fail with a message containing `error` (and naming the line);
//                  for ref "hf" the reference must fail too.
// Usage: node jinja_cases.js --update   (rewrite jinja_cases.json; needs python3 with jinja2 for
//                                        the jinja2 cases, else keeps their recorded outputs)
//        node jinja_cases.js --check    (ctest: recorded hf outputs still match @huggingface/jinja)
"use strict";
const fs = require("fs");
const path = require("path");
const { execFileSync } = require("child_process");

const out = path.join(__dirname, "..", "data", "chat", "jinja_cases.json");
let Template;
try {
  ({ Template } = require("@huggingface/jinja"));
} catch (e) {
  console.log("FAIL: tests/npm/node_modules missing (run `npm ci` in tests/npm): " + e.message);
  process.exit(1);
}

const L = [0, 1, 2, 3, 4, 5, 6];
const users = [
  { name: "ann", age: 3, active: true },
  { name: "bob", age: 1, active: false },
  { name: "cid", age: 2, active: true, nick: "C" },
];
const obj = {
  s: "ünï \"q\" \\ \n\t\u0001 😀 </script>",
  n: [1, -2, 0.1, 1e21, 1e-7, -0.5, 123456789012],
  b: [true, false, null],
  e: { empty_list: [], empty_obj: {} },
  nested: { a: { b: [1, { c: "d" }] } },
};

const CASES = [
  // ---- text and whitespace control
  ["text", "Hello world", {}],
  ["trailing_newline_dropped", "a\n", {}],
  ["only_one_trailing_newline_dropped", "a\n\n", {}],
  ["dash_strips_both_sides", "a  \n {{- 'b' -}} \n c", {}],
  ["trim_blocks", "{% if true %}\nX\n{% endif %}\nY", {}],
  ["lstrip_blocks", "  {% if true %}X{% endif %}\n  {{ 'y' }}\n\t{# c #}z", {}],
  ["comments", "a {# c #} b {#- c -#} d", {}],
  ["statement_dashes", "x\n  {%- if true -%}\n  y  \n  {%- endif -%}\n  z", {}],
  ["expression_dashes_keep_inner", "<{{- ' a ' -}}>", {}],
  ["generation_tag_removed", "a {% generation %}b{% endgeneration %} c\n{%- generation -%} d", {}],
  ["dict_literal_braces", "{{ {'a': {'b': 1}} }}", {}],
  // ---- literals and operators
  ["string_escapes", "{{ 'a\\tb\\n\\'q\\' \"d\" \\\\ \\x41\\u00e9' }}|{{ \"x'y\" }}|{{ 'a' 'b' }}", {}],
  ["numbers", "{{ 1 }} {{ 1.5 }} {{ 1.0 }} {{ -0.0 }} {{ 10 / 4 }} {{ 10 / 5 }} {{ 10 // 4 }} {{ 7 % 3 }} {{ 2 ** 3 ** 2 }} {{ 3 * 1.5 }} {{ 0.1 + 0.2 }}", {}],
  ["concat", "{{ 'a' ~ 1 ~ 1.5 ~ true }} {{ 1.0 ~ '' }} {{ 'a' + 1 }} {{ [1] + [2, 3] }} {{ x ~ 'y' }}", { x: 2.0 }],
  ["comparisons", "{{ 1 < 2 }} {{ 2 >= 3 }} {{ 'a' == 'a' }} {{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ none == none }} {{ 1 == '1' }}", {}],
  ["logic", "{{ true and 'x' }} {{ false or '' }}|{{ 0 or 'd' }} {{ not [] }} {{ [] and 1 }} {{ not 'a' == 'b' }}", {}],
  ["membership", "{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }} {{ 'x' in nope }} {{ 'x' not in nope }}", {}],
  ["ternary_and_select", "{{ 'y' if true else 'n' }} [{{ 'y' if false }}] {{ 'a' if false else 'b' if true else 'c' }}", {}],
  ["unary", "{{ -x }} {{ +x }} {{ not x }} {{ - -2 }} {{ -x | abs }}", { x: 3 }],
  ["printing_values", "{{ [1, 'a', none, true, 1.5, [2], {'k': 'v'}] }} {{ {'a': 1, 'b': {'c': [none]}} }} [{{ none }}] [{{ nope }}] {{ [nope] }} {{ true }} {{ 2.50 }}", {}],
  // ---- access
  ["member_access", "{{ d.a }} {{ d['b'] }} {{ l[0] }} {{ l[-1] }} {{ l.1 }} {{ s[1] }} {{ s[-1] }} [{{ d.missing }}] [{{ d.missing.deeper }}] [{{ l[10] }}] [{{ none.x }}]", { d: { a: 1, b: 2 }, l: [1, 2, 3], s: "héllo" }],
  ["slicing", "{{ l[1:] }} {{ l[:-1] }} {{ l[::-1] }} {{ l[::2] }} {{ l[-2:] }} {{ l[5:1:-2] }} {{ l[1:100] }} {{ s[1:3] }} {{ s[::-1] }} {{ s[-2:] }}", { l: L, s: "héllo😀" }],
  // ---- loops
  ["loop_variables", "{% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}[{{ loop.previtem }}|{{ loop.nextitem }}];{% endfor %}", { l: ["a", "b", "c"] }],
  ["loop_else", "{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in [1] %}{{ x }}{% else %}empty{% endfor %}", {}],
  ["loop_filter", "{% for x in l if x is odd %}{{ loop.index }}:{{ x }}{{ ',' if not loop.last }}{% endfor %}", { l: L }],
  ["loop_dict", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}{% for k, v in d | items %}{{ v }}{% endfor %}", { d: { z: 1, a: [2], m: "x" } }],
  ["loop_break_continue", "{% for x in l %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}", { l: L }],
  ["nested_loops", "{% for a in [1, 2] %}{% for b in [3, 4] %}{{ a }}{{ b }}{{ loop.index }} {% endfor %}{{ loop.index }}|{% endfor %}", {}],
  ["loop_over_messages", "{% for m in messages %}{{ m.role }}:{{ m.content }}{% if not loop.last %}, {% endif %}{% endfor %}", { messages: [{ role: "user", content: "hi" }, { role: "assistant", content: "yo" }] }],
  // ---- conditionals, assignments, scoping
  ["if_elif_else", "{% for x in [1, 2, 3] %}{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %} {% endfor %}", {}],
  ["set_scoping", "{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}{% if true %}{% set x = 3 %}{% endif %}{{ x }}", {}],
  ["tuple_set", "{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set c = 1, 2 %}{{ c | length }}", {}],
  ["namespace", "{% set ns = namespace(n=0, s='') %}{% for x in [1, 2, 3] %}{% set ns.n = ns.n + x %}{% set ns.s = ns.s ~ x %}{% endfor %}{{ ns.n }} {{ ns.s }} {{ ns }} {{ ns | tojson }}", {}],
  ["block_set", "{% set x %}a{{ 1 }}b{% endset %}[{{ x }}]", {}],
  // ---- macros, call, filter blocks
  ["macro_defaults", "{% macro f(a, b=2, c='z') %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ f(1) }} {{ f(1, 3) }} {{ f(1, c='q') }} {{ f(a=5) }}", {}],
  ["macro_recursion", "{% macro count(n) %}{{ n }}{% if n > 0 %}{{ count(n - 1) }}{% endif %}{% endmacro %}{{ count(3) }}", {}],
  ["macro_varargs_kwargs", "{% macro f(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ f(1, 2, 3, x=4) }}", {}],
  ["call_spread", "{% macro f(a, b) %}{{ a }}-{{ b }}{% endmacro %}{{ f(**{'a': 1, 'b': 2}) }} {{ f(*[3, 4]) }}", {}],
  ["call_block", "{% macro w(t) %}<{{ t }}>{{ caller() }}</{{ t }}>{% endmacro %}{% call w('b') %}inner{% endcall %}", {}],
  ["call_block_args", "{% macro each(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(x) each([1, 2]) %}[{{ x }}]{% endcall %}", {}],
  ["macro_sees_globals", "{% set g = 'G' %}{% macro m() %}{{ g }}{{ ctx }}{% endmacro %}{{ m() }}", { ctx: "C" }],
  ["filter_block", "{% filter upper %}abc{{ 'd' }}{% endfilter %}|{% filter replace('a', 'o') %}banana{% endfilter %}", {}],
  // ---- tests
  ["tests_types", "{{ x is defined }} {{ y is undefined }} {{ n is none }} {{ 1 is number }} {{ 1.5 is number }} {{ true is number }} {{ 1 is integer }} {{ 'a' is string }} {{ d is mapping }} {{ l is iterable }} {{ 'a' is iterable }} {{ d is iterable }} {{ d is sequence }} {{ true is boolean }} {{ range is callable }}", { x: 1, n: null, d: { a: 1 }, l: [1] }],
  ["tests_values", "{{ false is false }} {{ 1 is true }} {{ 3 is odd }} {{ 4 is even }} {{ 'abc' is lower }} {{ 'ABC' is upper }} {{ x is not none }} {{ 1 is not string }}", { x: 1 }],
  // ---- filters
  ["filters_string", "{{ ' Ab c ' | trim }}|{{ 'abc' | upper }} {{ 'ÀBC' | lower }} {{ 'hello wORLD foo_bar 3d' | title }} {{ 'hello World' | capitalize }} {{ 'aXbX' | replace('X', '-') }} {{ 'aaa' | replace('a', 'b', 2) }} {{ 'héllo' | length }} {{ 'ab' | string }} {{ 'x' | safe }}", {}],
  ["filters_list", "{{ l | join(', ') }} {{ l | first }} {{ l | last }} {{ l | length }} {{ l | reverse | join }} {{ ['b', 'A', 'c'] | sort | join }} {{ [3, 1, 2] | sort(reverse=true) | join }} {{ [1, 2, 1, 'a', 'a'] | unique | join }} {{ l | list | length }} {{ l | string }}", { l: [3, 1, 2] }],
  ["filters_objects", "{{ users | map(attribute='name') | join(',') }} {{ users | selectattr('active') | map(attribute='name') | join }} {{ users | rejectattr('active') | map(attribute='name') | join }} {{ users | selectattr('name', 'equalto', 'bob') | length }} {{ users | map(attribute='nick', default='?') | join }} {{ users | sort(attribute='age') | map(attribute='name') | join }} {{ users | selectattr('nick', 'defined') | length }}", { users }],
  ["filters_dict", "{{ d | items }} {{ d | dictsort }} {{ d | dictsort(reverse=true) }} {{ d | length }} {{ d.keys() }} {{ d.values() }} {{ d.get('a') }} {{ d.get('zz', 'def') }} [{{ d.get('zz') }}] {{ d | dictsort(by='value') }}", { d: { b: 2, a: 1, C: 3 } }],
  ["filter_default", "{{ u | default('dflt') }} [{{ '' | default('e') }}] {{ '' | default('e', true) }} [{{ n | default('nn') }}] {{ x | default('x') }} {{ 0 | default(5, boolean=true) }}", { n: null, x: "X" }],
  ["filter_tojson", "{{ obj | tojson }}\n{{ obj | tojson(indent=2) }}\n{{ obj | tojson(separators=(',', ':')) }}\n{{ obj | tojson(ensure_ascii=true) }}\n{{ obj.nested | tojson(sort_keys=true) }}\n{{ 'x\"y' | tojson }} {{ nope | tojson }} {{ 1.5 | tojson }} {{ [] | tojson(indent=4) }}", { obj }],
  ["filter_int_float", "{{ '42' | int }} {{ '3.9' | int }} {{ ' 12abc' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ 3.7 | int }} {{ -3.7 | int }} {{ '2.5' | float }} {{ 'abc' | float }} {{ 3 | float }} {{ true | int }} {{ '1e3' | float }} {{ '-.5x' | float }}", {}],
  ["filter_abs_string", "{{ -5 | abs }} {{ -2.5 | abs }} {{ 5 | string }} {{ 2.0 | string }} {{ true | string }} {{ [1, 'a'] | string }}", {}],
  ["filter_indent", "{{ 'a\nb\n\nc' | indent }}|{{ 'a\nb' | indent(2, true) }}|{{ 'a\n\nb' | indent(width=1, blank=true) }}", {}],
  ["filter_join_string", "{{ 'abc' | join('-') }} {{ [1, none, true, 2.5] | join('/') }}", {}],
  // ---- methods and globals
  ["string_methods", "{{ s.upper() }} {{ s.lower() }} [{{ ' x '.strip() }}] {{ s.startswith('he') }} {{ s.endswith(('x', 'lo')) }} {{ 'a,b,,c'.split(',') }} {{ ' a  b c '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a  b c '.split(none, 1) }} {{ 'abab'.replace('a', 'x') }} {{ 'ab'.replace('', '-') }} {{ s.title() }} {{ s.capitalize() }} {{ s.length }} {{ [1, 2].length }} [{{ ' x '.lstrip() }}] [{{ ' x '.rstrip() }}]", { s: "hello" }],
  ["range", "{{ range(3) }} {{ range(1, 7, 2) }} {{ range(5, 0, -2) }} {% for i in range(2) %}{{ i }}{% endfor %} {{ range(0) }}", {}],
  ["special_tokens_and_context", "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}", { bos_token: "<s>", eos_token: "</s>", messages: [{ role: "user", content: "hi" }] }],
  ["qwen_reasoning_split", "{% set c = m.split('</think>')[-1].lstrip('\\n') %}{% set r = m.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}[{{ r }}][{{ c }}]", { m: "<think>\nplan\n</think>\n\nanswer" }],

  // ---- Python Jinja2 reference: constructs @huggingface/jinja lacks or renders differently
  ["py_strip_chars", "[{{ 'xxaxx'.strip('x') }}][{{ '\\n\\n a\\n'.strip('\\n') }}][{{ '--a--'.lstrip('-') }}][{{ '--a--'.rstrip('-') }}][{{ ' \\n x \\n'.lstrip('\\n') }}]", {}, "jinja2"],
  ["py_round", "{{ 3.14159 | round(2) }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 1.55 | round(1, 'floor') }} {{ 1.2 | round(0, 'ceil') }} {{ 7 | round }}", {}, "jinja2"],
  ["py_batch_sum_min_max", "{{ [1, 2, 3, 4, 5] | batch(2) | list }} {{ [1, 2, 3] | batch(2, 0) | list }} {{ [1, 2, 3] | sum }} {{ users | sum(attribute='age') }} {{ [3, 1, 2] | min }} {{ [3, 1, 2] | max }} {{ ['b', 'A', 'c'] | max }} {{ users | max(attribute='age') | attr('name') }}", { users }, "jinja2"],
  ["py_wordcount_select", "{{ 'one two  three' | wordcount }} {{ [1, 2, 3, 4] | select('odd') | join(',') }} {{ [1, 2, 3, 4] | reject('even') | join(',') }} {{ ['a', 'B'] | map('upper') | join }} {{ [1, 0, 2] | select | join }} {{ [1, 2, 3] | map('string') | join('-') }} {{ [5, 6] | select('divisibleby', 3) | join }}", {}, "jinja2"],
  ["py_d_escape", "{{ nope | d('dd') }} {{ '<a href=\"x\">&\\'</a>' | e }} {{ '<b>' | escape }}", {}, "jinja2"],
  ["py_string_methods", "{{ 'a,b,c'.rsplit(',', 1) | join('|') }} {{ 'hello'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.count('l') }} {{ '-'.join(['a', 'b']) }} {{ '{} and {}'.format('x', 'y') }} {{ '{b}{a}'.format(a=1, b=2) }} {{ 'abc'.removeprefix('a') }} {{ 'a\\nb\\r\\nc'.splitlines() | join('|') }} {{ 'ab12'.isalnum() | string | lower }}", {}, "jinja2"],
  ["py_tests_with_args", "{% if 10 is divisibleby 5 %}y{% else %}n{% endif %}{% if 10 is divisibleby(3) %}y{% else %}n{% endif %}{% if 2 is in [1, 2] %}y{% else %}n{% endif %}{% if 3 is gt 2 %}y{% else %}n{% endif %}{% if 'b' > 'a' %}y{% else %}n{% endif %}", {}, "jinja2"],
  ["py_loop_cycle", "{% for x in [1, 2, 3] %}{{ loop.cycle('a', 'b') }}{% endfor %}", {}, "jinja2"],
  ["py_undefined_lenient", "{% for x in nope %}x{% else %}empty{% endfor %} {{ nope | length }} [{{ nope | join }}] [{{ nope ~ 'x' }}] {{ nope | list | length }}", {}, "jinja2"],
  ["py_misc", "{{ 'abc' | reverse }} {{ 'abc' | first }} {{ 'abc' | last }} {{ 'x' ~ none }} {{ 'ab' * 3 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ d | attr('a') }} {{ '%s-%d' | format('a', 3) }} {{ range(3) | list | last }} {{ dict(a=1, b='x') | tojson }} {{ 'abc' | list | join('.') }}", { d: { a: 1 } }, "jinja2"],
  ["py_for_else_after_continue", "{% for x in [1, 2] %}{% continue %}{% else %}E{% endfor %}|{% for x in [1] %}{% break %}{% else %}E{% endfor %}|", {}, "jinja2"],
  ["py_selectattr_dotted", "{{ items | selectattr('a.b') | map(attribute='n') | join }}", { items: [{ n: 1, a: { b: true } }, { n: 2, a: { b: false } }] }, "jinja2"],
  ["py_filtered_block_set", "{% set x | upper %}abc{% endset %}{{ x }}", {}, "jinja2"],
];

const ERRORS = [
  ["err_unknown_filter", "line1\n{{ x | nope }}", { x: 1 }, "template:2: unknown filter 'nope'", "hf"],
  ["err_unknown_test", "{{ x is weird }}", { x: 1 }, "template:1: unknown test 'weird'", "hf"],
  ["err_unsupported_statement", "a\n\n{% include 'x.jinja' %}", {}, "template:3: unsupported statement 'include'", "hf"],
  ["err_unknown_statement", "{% frobnicate %}", {}, "template:1: unknown statement 'frobnicate'", "hf"],
  ["err_unclosed_if", "{% if x %}\nabc", { x: 1 }, "expected {% endif %} to close the 'if' opened on line 1", "hf"],
  ["err_raise_exception", "ok\n{{ raise_exception('boom: bad role') }}", {}, "template:2: raise_exception: boom: bad role", "hf"],
  ["err_unknown_method", "{{ 'x'.nope() }}", {}, "unknown method 'nope' for a string", "hf"],
  ["err_unknown_function", "{{ nope() }}", {}, "unknown function 'nope'", "hf"],
  ["err_unterminated_string", "{{ 'abc }}", {}, "unterminated string literal", "hf"],
  ["err_bad_escape", "{{ 'a\\qb' }}", {}, "unsupported escape sequence '\\q'", "hf"],
  ["err_set_attribute_on_dict", "{% set d = {} %}\n{% set d.x = 1 %}", {}, "template:2: cannot assign attribute 'x' on a dict", "hf"],
  ["err_recursive_loop", "{% for x in l recursive %}{% endfor %}", { l: [] }, "unsupported loop modifier 'recursive'", "hf"],
  ["err_none_arithmetic", "{{ 1 + none }}", {}, "unsupported operand types for '+': integer and none", "hf"],
  ["err_break_outside_loop", "{% break %}", {}, "'break' or 'continue' outside a loop", "hf"],
  ["err_line_inside_macro", "{% macro m() %}\n\n{{ x | bogus }}\n{% endmacro %}\n{{ m() }}", {}, "template:3: unknown filter 'bogus'", "hf"],
  ["err_unexpected_character", "{{ a ! b }}", {}, "unexpected character '!'", "hf"],
  ["err_odd_on_string", "{{ 'a' is odd }}", {}, "test 'odd': expected an integer, got a string", "hf"],
  ["err_iterate_number", "{% for x in 5 %}{% endfor %}", {}, "cannot iterate over a integer", "hf"],
  ["err_unpack_mismatch", "{% for a, b in [[1, 2, 3]] %}{% endfor %}", {}, "cannot unpack into the loop variables: expected 2 values, got 3", "hf"],
];

function renderHF(template, context) {
  try {
    return { output: new Template(template).render(context) };
  } catch (e) {
    return { error: String(e.message || e) };
  }
}

function renderJinja2(cases) {
  if (!cases.length) return [];
  const script = path.join(__dirname, "..", "data", "chat", "jinja2_render.py");
  const input = JSON.stringify(cases.map((c) => ({ template: c.template, context: c.context })));
  return JSON.parse(execFileSync("python3", [script], { input }).toString("utf8"));
}

const mode = process.argv.includes("--update") ? "update" : "check";
const recorded = fs.existsSync(out) ? JSON.parse(fs.readFileSync(out, "utf8")) : { cases: [] };
const byName = new Map(recorded.cases.map((c) => [c.name, c]));
let failures = 0;

const cases = [];
for (const [name, template, context, ref = "hf"] of CASES) cases.push({ name, ref, template, context });
for (const [name, template, context, error, ref] of ERRORS) cases.push({ name, ref, template, context, error });

let py = null;
const pyCases = cases.filter((c) => c.ref === "jinja2");
try {
  py = renderJinja2(pyCases);
} catch (e) {
  console.log(`note: python3 jinja2 unavailable (${e.message.split("\n")[0]}); keeping recorded jinja2 outputs`);
}

for (const c of cases) {
  let got;
  if (c.ref === "hf") got = renderHF(c.template, c.context);
  else if (py) got = py[pyCases.indexOf(c)];
  else got = byName.has(c.name) ? { output: byName.get(c.name).expected } : { error: "not recorded" };
  if (c.error !== undefined) {
    if (got.error === undefined) {
      console.log(`FAIL ${c.name}: the reference renders ${JSON.stringify(got.output)} but an error is expected`);
      failures++;
    }
    continue;
  }
  if (got.error !== undefined) {
    console.log(`FAIL ${c.name}: the reference (${c.ref}) fails: ${got.error}`);
    failures++;
    continue;
  }
  if (mode === "update") {
    c.expected = got.output;
  } else {
    const prev = byName.get(c.name);
    if (!prev || prev.expected !== got.output || prev.template !== c.template) {
      console.log(`FAIL ${c.name}: recorded ${JSON.stringify(prev && prev.expected)} != reference ${JSON.stringify(got.output)} (run --update)`);
      failures++;
    }
  }
}

if (mode === "update") {
  const header =
    "Generated by tests/npm/jinja_cases.js --update. ref: hf = @huggingface/jinja 0.5.11, jinja2 = Python Jinja2 " +
    "(tests/data/chat/jinja2_render.py); error cases give a substring of mere.run's message.";
  fs.writeFileSync(out, JSON.stringify({ comment: header, cases }, null, 1) + "\n");
  console.log(`wrote ${cases.length} cases to ${out}`);
} else if (recorded.cases.length !== cases.length) {
  console.log(`FAIL: ${recorded.cases.length} recorded cases, ${cases.length} defined (run --update)`);
  failures++;
}
console.log(failures ? `${failures} failures` : `ok: ${cases.length} cases`);
process.exit(failures ? 1 : 0);
