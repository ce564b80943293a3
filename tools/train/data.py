#!/usr/bin/env python3
"""Training corpus from the machine's own disk + tokenizer + token streams.

Deterministic for a given disk image and seed:
  * code  = Python sources of the standard library and installed packages (*.py)
  * prose = docstrings extracted from those sources, package long descriptions
            (dist-info METADATA bodies) and *.md / *.rst / *.txt documentation files
  * chat  = synthetic ChatML samples built from (docstring -> function) pairs of the
            training files, rendered exactly as the chat template renders a
            non-thinking assistant turn
Held-out split by FILE (crc32 of the path), so no held-out file is seen in training.

Outputs (in --out): tokenizer.json, tokenizer_config.json, train.npy, heldout_code.npy,
heldout_prose.npy (uint16 token streams, documents separated by <|endoftext|>),
data_stats.json (sizes, token counts, per-distribution bytes and licences).
"""
from __future__ import annotations

import argparse
import ast
import glob
import hashlib
import json
import multiprocessing as mp
import os
import random
import re
import site
import sys
import sysconfig
import textwrap
import time
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tokenizer_build as TB  # noqa: E402

PROSE_EXT = (".md", ".rst", ".txt")
SKIP_TXT = {"RECORD", "top_level.txt", "entry_points.txt", "requirements.txt", "dependency_links.txt",
            "SOURCES.txt", "namespace_packages.txt", "INSTALLER", "REQUESTED", "WHEEL", "direct_url.json",
            "not-zip-safe", "api_tests.txt", "CMakeLists.txt"}


def crc(s: str) -> int:
    return zlib.crc32(s.encode("utf-8", "surrogatepass"))


def roots():
    rs = set()
    for k in ("stdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(k)
        if p and os.path.isdir(p):
            rs.add(os.path.realpath(p))
    try:
        for p in site.getsitepackages():
            if os.path.isdir(p):
                rs.add(os.path.realpath(p))
    except Exception:
        pass
    for p in glob.glob("/usr/lib/python3*/"):
        rs.add(os.path.realpath(p))
    # drop roots nested in other roots
    out = []
    for r in sorted(rs):
        if not any(r != o and r.startswith(o + os.sep) for o in rs):
            out.append(r)
    return out


def walk_files(rs):
    code, prose, meta = [], [], []
    seen = set()
    for r in rs:
        for dp, dns, fns in os.walk(r, followlinks=False):
            dns[:] = sorted(d for d in dns if d not in ("__pycache__",) and not d.startswith("."))
            for fn in sorted(fns):
                p = os.path.join(dp, fn)
                rp = os.path.realpath(p)
                if rp in seen or not os.path.isfile(rp):
                    continue
                seen.add(rp)
                if fn.endswith(".py"):
                    code.append(p)
                elif dp.endswith(".dist-info") and fn == "METADATA":
                    meta.append(p)
                elif fn.endswith(PROSE_EXT) and fn not in SKIP_TXT and ".dist-info" not in dp:
                    prose.append(p)
    return code, prose, meta


def read_text(p, lo=64, hi=300_000):
    try:
        n = os.path.getsize(p)
        if n < lo or n > hi:
            return None
        with open(p, "rb") as f:
            b = f.read()
        if b"\x00" in b:
            return None
        return b.decode("utf-8")
    except Exception:
        return None


def code_ok(t: str) -> bool:
    lines = t.split("\n")
    if not lines:
        return False
    mx = max(len(line) for line in lines)
    if mx > 1000 or len(t) / max(1, len(lines)) > 120:
        return False
    return True


def prose_ok(t: str) -> bool:
    if len(t) < 200:
        return False
    letters = sum(ch.isalpha() or ch == " " for ch in t)
    lines = t.count("\n") + 1
    return letters / len(t) > 0.6 and len(t) / lines > 15


def metadata_body(t: str) -> str | None:
    i = t.find("\n\n")
    if i < 0:
        return None
    body = t[i + 2:].strip()
    return body if prose_ok(body) else None


def _ast_job(args):
    """Worker: (path, text, want_chat) -> (docstrings, chat samples)."""
    path, text, want_chat = args
    docs, chats = [], []
    try:
        tree = ast.parse(text)
    except Exception:
        return docs, chats
    lines = text.split("\n")
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        ds = ast.get_docstring(node, clean=True)
        if not ds or len(ds) < 80:
            continue
        letters = sum(ch.isalpha() or ch == " " for ch in ds)
        if letters / len(ds) < 0.7:
            continue
        docs.append(ds)
        if want_chat and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
            end = getattr(node, "end_lineno", None)
            if end is None:
                continue
            start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            src = "\n".join(lines[start:end])
            if len(src) > 1500 or len(src) < 80:
                continue
            para = ds.split("\n\n")[0].strip().replace("\n", " ")
            if len(para) < 30 or len(para) > 400:
                continue
            src = textwrap.dedent(src)
            args_s = ast.unparse(node.args) if hasattr(ast, "unparse") else ""
            chats.append((node.name, args_s, para, src))
    return docs, chats


CHAT_USER = [
    "Write a Python function `{name}({args})`. {para}",
    "Implement `{name}` in Python. It should do the following: {para}",
    "{para}\n\nWrite this as a Python function named `{name}`.",
    "Can you write `def {name}({args})`? Docstring summary: {para}",
]
SYSTEMS = ["You are a helpful coding assistant.", "You write clear, idiomatic Python.", None, None, None]


def render_chat(rng, name, args, para, src):
    user = rng.choice(CHAT_USER).format(name=name, args=args, para=para)
    sysm = rng.choice(SYSTEMS)
    s = ""
    if sysm:
        s += f"<|im_start|>system\n{sysm}<|im_end|>\n"
    s += f"<|im_start|>user\n{user}<|im_end|>\n"
    s += f"<|im_start|>assistant\n<think>\n\n</think>\n\nHere is the function:\n\n```python\n{src}\n```<|im_end|>\n"
    return s


def dist_licences(rs):
    """top-level module name -> (distribution, licence)."""
    out = {}
    for r in rs:
        for md in sorted(glob.glob(os.path.join(r, "*.dist-info", "METADATA"))):
            d = os.path.dirname(md)
            try:
                head = open(md, encoding="utf-8", errors="replace").read().split("\n\n")[0]
            except Exception:
                continue
            name, lic, expr, cls = None, None, None, []
            for line in head.split("\n"):
                if line.startswith("Name:"):
                    name = line[5:].strip()
                elif line.startswith("License-Expression:"):
                    expr = line.split(":", 1)[1].strip()
                elif line.startswith("License:") and lic is None:
                    lic = line.split(":", 1)[1].strip()
                elif line.startswith("Classifier: License ::"):
                    cls.append(line.split("::")[-1].strip())
            licence = expr or (cls[0] if cls else None) or (lic if lic and len(lic) < 80 else None) or \
                ("see dist-info" if lic else "UNKNOWN")
            tops = set()
            tl = os.path.join(d, "top_level.txt")
            if os.path.exists(tl):
                tops |= {x.strip() for x in open(tl) if x.strip()}
            rec = os.path.join(d, "RECORD")
            if os.path.exists(rec):
                for line in open(rec, encoding="utf-8", errors="replace"):
                    first = line.split(",")[0].split("/")[0]
                    if first and not first.endswith((".dist-info", ".data")) and first != "..":
                        tops.add(first[:-3] if first.endswith(".py") else first)
            for t in tops:
                out.setdefault(t, (name, licence))
    return out


def owner_of(path, rs, lic):
    for r in rs:
        if path.startswith(r + os.sep):
            rel = path[len(r) + 1:]
            top = rel.split(os.sep)[0]
            if top.endswith(".py"):
                top = top[:-3]
            if "site-packages" in r or "dist-packages" in r:
                if top in lic:
                    return lic[top]
                if top.endswith(".dist-info"):
                    return (top.split("-")[0], "see dist-info")
                return (top, "UNKNOWN")
            return ("python-stdlib", "PSF-2.0")
    return ("other", "UNKNOWN")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--code-cap-mb", type=float, default=200)
    ap.add_argument("--tok-sample-mb", type=float, default=32)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--heldout-pct", type=int, default=2)
    ap.add_argument("--chat-frac", type=float, default=0.25, help="fraction of eligible functions turned into chat")
    ap.add_argument("--check-repro", action="store_true", help="train the tokenizer twice, compare bytes")
    ap.add_argument("--tokenizer-only", action="store_true")
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    rs = roots()
    code_p, prose_p, meta_p = walk_files(rs)
    print(f"[data] roots={rs} code_files={len(code_p)} prose_files={len(prose_p)} metadata={len(meta_p)} "
          f"({time.time() - t0:.1f}s)", flush=True)
    # deterministic pseudo-random order by crc of the path (stable across runs)
    code_p.sort(key=lambda p: (crc(p + "#o"), p))
    seen_hash = set()
    code_tr, code_ho = [], []
    cap = args.code_cap_mb * 1e6
    used = 0
    lic = dist_licences(rs)
    owners = {}
    for p in code_p:
        t = read_text(p)
        if t is None or not code_ok(t):
            continue
        h = hashlib.sha1(t.encode()).digest()
        if h in seen_hash:
            continue
        seen_hash.add(h)
        ho = crc(p) % 100 < args.heldout_pct
        if not ho and used >= cap:
            continue
        (code_ho if ho else code_tr).append((p, t))
        if not ho:
            used += len(t)
            o = owner_of(p, rs, lic)
            owners.setdefault(o, 0)
            owners[o] += len(t)
    print(f"[data] code train={len(code_tr)} files {used / 1e6:.1f}MB heldout={len(code_ho)} "
          f"({time.time() - t0:.1f}s)", flush=True)
    prose_tr, prose_ho = [], []
    for p in sorted(prose_p) + sorted(meta_p):
        t = read_text(p, hi=200_000)
        if t is None:
            continue
        if p.endswith("METADATA"):
            t = metadata_body(t)
            if t is None:
                continue
        elif not prose_ok(t):
            continue
        h = hashlib.sha1(t.encode()).digest()
        if h in seen_hash:
            continue
        seen_hash.add(h)
        ho = crc(p) % 100 < args.heldout_pct
        (prose_ho if ho else prose_tr).append((p, t))
        if not ho:
            o = owner_of(p, rs, lic)
            owners.setdefault(o, 0)
            owners[o] += len(t)
    # docstrings + chat pairs (parallel ast)
    jobs = [(p, t, True) for p, t in code_tr] + [(p, t, False) for p, t in code_ho]
    with mp.Pool(args.workers) as pool:
        res = pool.map(_ast_job, jobs, chunksize=64)
    rng = random.Random(args.seed)
    doc_tr, doc_ho, chats = [], [], []
    seen_doc = set()
    for (p, _, is_tr), (docs, ch) in zip(jobs, res):
        for d in docs:
            h = hashlib.sha1(d.encode()).digest()
            if h in seen_doc:
                continue
            seen_doc.add(h)
            (doc_tr if is_tr else doc_ho).append(d)
        if is_tr:
            for c in ch:
                if rng.random() < args.chat_frac:
                    chats.append(render_chat(rng, *c))
    print(f"[data] prose files train={len(prose_tr)} heldout={len(prose_ho)}; docstrings train={len(doc_tr)} "
          f"heldout={len(doc_ho)}; chat samples={len(chats)} ({time.time() - t0:.1f}s)", flush=True)

    # ---------------- tokenizer ----------------
    sample = []
    budget = args.tok_sample_mb * 1e6
    # sample: code 60%, prose 30%, chat 10% of the budget, deterministic
    def take(items, frac, key):
        b, out = 0, []
        for i, t in enumerate(items):
            if key(i) and b < frac * budget:
                out.append(t)
                b += len(t)
        return out
    sample += take([t for _, t in code_tr], 0.6, lambda i: i % 3 == 0)
    prose_all = [t for _, t in prose_tr] + doc_tr
    sample += take(prose_all, 0.3, lambda i: True)
    sample += take(chats, 0.1, lambda i: True)
    t1 = time.time()
    tok = TB.train_tokenizer(sample, vocab_size=args.vocab)
    TB.save(tok, args.out)
    h1 = hashlib.sha256(open(os.path.join(args.out, "tokenizer.json"), "rb").read()).hexdigest()
    t_tok = time.time() - t1
    repro = None
    if args.check_repro:
        tok2 = TB.train_tokenizer(sample, vocab_size=args.vocab)
        h2 = hashlib.sha256(tok2.to_str(pretty=True).encode()).hexdigest()
        h1s = hashlib.sha256(tok.to_str(pretty=True).encode()).hexdigest()
        repro = h1s == h2
    print(f"[data] tokenizer: sample {sum(map(len, sample)) / 1e6:.1f}MB trained in {t_tok:.1f}s "
          f"sha256={h1} reproducible={repro}", flush=True)
    if args.tokenizer_only:
        return
    # ---------------- tokenise streams ----------------
    eos = tok.token_to_id("<|endoftext|>")

    def encode_docs(texts):
        ids = []
        B = 1024
        fast = hasattr(tok, "encode_batch_fast")
        for i in range(0, len(texts), B):
            batch = texts[i:i + B]
            encs = tok.encode_batch_fast(batch, add_special_tokens=False) if fast else \
                tok.encode_batch(batch, add_special_tokens=False)
            for e in encs:
                ids.append(np.asarray(e.ids, dtype=np.uint16))
        return ids

    t2 = time.time()
    tr_docs = [("code", t) for _, t in code_tr] + [("prose", t) for _, t in prose_tr] + \
        [("prose", d) for d in doc_tr] + [("chat", c) for c in chats]
    order = list(range(len(tr_docs)))
    random.Random(args.seed + 1).shuffle(order)
    tr_docs = [tr_docs[i] for i in order]
    enc = encode_docs([t for _, t in tr_docs])
    kinds = {"code": 0, "prose": 0, "chat": 0}
    pieces = []
    sep = np.asarray([eos], dtype=np.uint16)
    for (k, _), e in zip(tr_docs, enc):
        kinds[k] += len(e) + 1
        pieces.append(e)
        pieces.append(sep)
    train = np.concatenate(pieces)
    np.save(os.path.join(args.out, "train.npy"), train)

    def stream(texts):
        e = encode_docs(texts)
        out = []
        for x in e:
            out.append(x)
            out.append(sep)
        return np.concatenate(out) if out else np.zeros(0, np.uint16)

    ho_code = stream([t for _, t in code_ho])
    ho_prose = stream([t for _, t in prose_ho] + doc_ho)
    np.save(os.path.join(args.out, "heldout_code.npy"), ho_code)
    np.save(os.path.join(args.out, "heldout_prose.npy"), ho_prose)
    t_enc = time.time() - t2
    nbytes_tr = sum(len(t) for _, t in tr_docs)
    print(f"[data] tokens train={len(train) / 1e6:.2f}M ({kinds}) heldout code={len(ho_code) / 1e6:.2f}M "
          f"prose={len(ho_prose) / 1e6:.2f}M; bytes/token={nbytes_tr / max(1, len(train)):.2f}; "
          f"encode {t_enc:.1f}s; total {time.time() - t0:.1f}s", flush=True)
    lic_rows = sorted(({"distribution": k[0], "licence": k[1], "bytes": v} for k, v in owners.items()),
                      key=lambda r: -r["bytes"])
    stats = {
        "roots": rs, "seed": args.seed,
        "files": {"code_train": len(code_tr), "code_heldout": len(code_ho), "prose_train": len(prose_tr),
                  "prose_heldout": len(prose_ho), "docstrings_train": len(doc_tr),
                  "docstrings_heldout": len(doc_ho), "chat_samples": len(chats)},
        "bytes": {"code_train": used, "prose_train": sum(len(t) for _, t in prose_tr),
                  "docstrings_train": sum(map(len, doc_tr)), "chat": sum(map(len, chats))},
        "tokens": {"train": int(len(train)), "train_by_kind": kinds, "heldout_code": int(len(ho_code)),
                   "heldout_prose": int(len(ho_prose))},
        "bytes_per_token": nbytes_tr / max(1, len(train)),
        "tokenizer": {"sha256": h1, "sample_mb": sum(map(len, sample)) / 1e6, "train_s": t_tok,
                      "reproducible_check": repro, "vocab": tok.get_vocab_size()},
        "heldout_rule": f"crc32(path) % 100 < {args.heldout_pct}",
        "code_cap_mb": args.code_cap_mb,
        "licences_by_bytes": lic_rows[:400],
        "timing_s": {"total": time.time() - t0, "encode": t_enc},
        "python": sys.version,
    }
    json.dump(stats, open(os.path.join(args.out, "data_stats.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
