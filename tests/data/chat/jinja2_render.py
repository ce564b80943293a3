#!/usr/bin/env python3
"""Renders Jinja cases with Python Jinja2 configured like transformers' apply_chat_template
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, transformers' tojson,
raise_exception, strftime_now). Used by tests/npm/jinja_cases.js --update for the "jinja2" cases.
stdin: JSON list of {template, context}; stdout: JSON list of {output} or {error}."""
import json
import sys
from datetime import datetime

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    results = []
    for case in json.load(sys.stdin):
        try:
            results.append({"output": env.from_string(case["template"]).render(**case["context"])})
        except Exception as e:  # noqa: BLE001 - report every failure to the caller
            results.append({"error": f"{type(e).__name__}: {e}"})
    json.dump(results, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
