"""Per-kernel time of one forward from `ncu --csv --metrics gpu__time_duration.sum` output, grouped by
kernel name, sorted by time: the decode step of a 1-token bench run (second embedding .. argmax),
with --first the first forward (a bench run's prefill: first embedding .. argmax), or with --all the
passes between the first and the last embedding launch, per pass (the pass the last embedding starts
is left out, as the launch count may have cut it: session 18 divided every captured launch by the
embedding count, and a capture of 2.28 passes read as 3, docs/speculation.md)."""
import collections, csv, re, sys

rows = []
first = "--first" in sys.argv[2:]
every = "--all" in sys.argv[2:]
with open(sys.argv[1]) as f:
    lines = [l for l in f if l.startswith('"')]
for r in csv.DictReader(lines):
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    unit = r.get("Metric Unit", "ns")
    v = float(r["Metric Value"].replace(",", ""))
    v *= {"ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}.get(unit, 1e-3)
    m = re.search(r"(\w+_kernel)", r["Kernel Name"])
    name = m.group(1) if m else r["Kernel Name"][:40]
    if name == "src_prepare_kernel":  # one template a producer: name it by its source (SwiGlu, CombineGate, ...)
        inner = re.search(r"src_prepare_kernel<\d+,(.*)>\(", r["Kernel Name"])
        ids = [w for w in re.findall(r"\w+", inner.group(1)) if w not in ("k", "unnamed")] if inner else []
        name += "<" + (ids[-1] if ids else "?") + ">"
    rows.append((name, v))
# the decode step: from the second embed_kernel (the first is the 1-token prefill) to the argmax
embeds = [i for i, (n, _) in enumerate(rows) if n.startswith("embed")]
start = embeds[0] if first and embeds else (embeds[1] if len(embeds) > 1 else 0)
end = next((i + 1 for i, (n, _) in enumerate(rows) if i >= start and n.startswith("argmax")), len(rows))
if every:  # whole passes only: from the first embedding to the last one (which starts the cut-off pass)
    whole = embeds[-1] if len(embeds) > 1 else len(rows)
    step = rows[embeds[0] if embeds else 0:whole]
    passes = max(1, len(embeds) - 1) if len(embeds) > 1 else 1
else:
    step = rows[start:end]
    passes = 1
agg = collections.defaultdict(lambda: [0, 0.0])
for n, v in step:
    agg[n][0] += 1
    agg[n][1] += v
total = sum(v for _, v in step)
what = "whole passes" if every else ("first forward" if first else "one decode step (T=1)")
print("%s (no graph): %d kernels, %.1f us of kernel time; %d passes, %.1f us a pass" % (what, len(step), total, passes, total / passes))
for n, (c, v) in sorted(agg.items(), key=lambda x: -x[1][1]):
    print("  %-40s %5d launches %9.1f us  %5.1f%%" % (n, c, v, 100 * v / total if total else 0))
