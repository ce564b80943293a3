#!/usr/bin/env python3
"""A static estimate of one loop iteration's cycles from a kernel's SASS (cuobjdump -sass output).

Model: one warp alone on its scheduler issues in order, one instruction a cycle at most, and an
instruction waits until every register it reads is ready; a result is ready `latency` cycles after
its producer issued (fixed per opcode class, the HMMA latencies given on the command line). The loop
body [--start, --end] (hex SASS addresses, the back branch included) runs --iters times and the
steady-state difference between iteration starts is printed for each HMMA latency pair. Ranges in
--skip (a rarely taken branch's body, e.g. a renormalisation) are left out.

What it leaves out: the pipes' throughput (a warp alone rarely fills one), bank conflicts, register
bank conflicts, barriers and the memory system beyond a fixed shared-memory latency. It explains a
latency-bound loop's cycles from its dependency chains (docs/cuda-kernels.md "GDN prefill v5"), and
shows which chains a change would shorten.

Usage: sass_chain.py SASS[.gz] --function REGEX --start 0x53f0 --end 0x79e0 [--skip 0x69f0-0x6df0]
       [--hmma 16/12,32/24,64/56]
"""
import argparse
import gzip
import re
import sys

FIXED = {"LDS": 30, "LDG": 400, "SHFL": 25, "MUFU": 18}
NO_DST = ("STS", "STG", "BRA", "BAR", "BSYNC", "BSSY", "NOP", "ISETP", "PLOP3", "FSETP", "DEPBAR", "EXIT")


def read_function(path, pattern):
    opener = gzip.open if path.endswith(".gz") else open
    body, inside = [], False
    with opener(path, "rt") as f:
        for line in f:
            if "Function : " in line:
                inside = re.search(pattern, line) is not None
                continue
            m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
            if inside and m:
                body.append((int(m.group(1), 16), m.group(2)))
    return body


def regs(tok, n):
    m = re.match(r"-?\|?R(\d+)", tok.strip().strip("[]").split("+")[0])
    return [int(m.group(1)) + i for i in range(n)] if m else []


def parse(ins):
    """(opcode, destination registers, source registers) of one SASS instruction."""
    ins = re.sub(r"^@!?U?P[T\d]+\s+", "", ins)
    op, _, rest = ins.partition(" ")
    ops = [o.strip().replace(".reuse", "") for o in rest.split(",")] if rest else []
    if op.startswith("HMMA.1688"):
        return op, regs(ops[0], 4), regs(ops[1], 4) + regs(ops[2], 2) + regs(ops[3], 4)
    if op.startswith("HMMA.1684"):
        return op, regs(ops[0], 4), regs(ops[1], 2) + regs(ops[2], 1) + regs(ops[3], 4)
    if op.startswith("LDS") or op.startswith("LDG"):
        width = 4 if ".128" in op else 2 if ".64" in op else 1
        return op, regs(ops[0], width), [r for o in ops[1:] for r in regs(o, 1)]
    if op.startswith(NO_DST) or op.startswith("U"):
        return op, [], [r for o in ops for r in regs(o, 1)]
    width = 2 if (".64" in op or "WIDE" in op) else 1
    return op, (regs(ops[0], width) if ops else []), [r for o in ops[1:] for r in regs(o, 1)]


def latency(op, l8, l4):
    if op.startswith("HMMA.1688"):
        return l8
    if op.startswith("HMMA.1684"):
        return l4
    for k, v in FIXED.items():
        if op.startswith(k):
            return v
    return 1 if op.startswith(NO_DST) else 5


def iteration_cycles(prog, l8, l4, iters):
    ready, t, starts = {}, 0, []
    for _ in range(iters):
        starts.append(t)
        for op, dst, srcs in prog:
            t = max([t + 1] + [ready.get(r, 0) for r in srcs])
            for r in dst:
                ready[r] = t + latency(op, l8, l4)
    return starts[-1] - starts[-2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sass")
    ap.add_argument("--function", required=True, help="regex of the kernel's (mangled) name")
    ap.add_argument("--start", required=True, help="the loop body's first address (hex)")
    ap.add_argument("--end", required=True, help="the loop body's last address, the back branch (hex)")
    ap.add_argument("--skip", action="append", default=[], help="an address range A-B (hex) to leave out")
    ap.add_argument("--hmma", default="16/12,24/16,32/24,48/40,64/56", help="m16n8k8/m16n8k4 latencies to try")
    ap.add_argument("--iters", type=int, default=4)
    a = ap.parse_args()
    lo, hi = int(a.start, 16), int(a.end, 16)
    skips = [tuple(int(x, 16) for x in s.split("-")) for s in a.skip]
    body = [(ad, ins) for ad, ins in read_function(a.sass, a.function)
            if lo <= ad <= hi and not any(s <= ad < e for s, e in skips)]
    if not body:
        sys.exit("no instructions in that range of a function matching %r" % a.function)
    prog = [parse(ins) for _, ins in body]
    print("%d instructions in the loop body (%d HMMA)" % (len(prog), sum(p[0].startswith("HMMA") for p in prog)))
    for pair in a.hmma.split(","):
        l8, l4 = (int(x) for x in pair.split("/"))
        print("HMMA latency %3d / %3d cycles: %5d cycles an iteration" % (l8, l4, iteration_cycles(prog, l8, l4, a.iters)))


if __name__ == "__main__":
    main()
