"""Per-kernel time of one forward from `ncu --csv --metrics gpu__time_duration.sum` output, grouped by
kernel name, sorted by time (with `dram__bytes_read.sum` in the metrics also each group's DRAM
bytes and rate): the decode step of a 1-token bench run (second embedding .. argmax),
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
by_id = {}  # launch ID -> [name, us, DRAM bytes or None], in launch order
for r in csv.DictReader(lines):
    metric = r.get("Metric Name")
    if metric not in ("gpu__time_duration.sum", "dram__bytes_read.sum"):
        continue
    unit = r.get("Metric Unit", "ns")
    v = float(r["Metric Value"].replace(",", ""))
    key = r.get("ID", str(len(by_id)))
    if key not in by_id:
        m = re.search(r"(\w+_kernel)", r["Kernel Name"])
        name = m.group(1) if m else r["Kernel Name"][:40]
        if name == "src_prepare_kernel":  # one template a producer: name it by its source (SwiGlu, CombineGate, ...)
            inner = re.search(r"src_prepare_kernel<\d+,(.*)>\(", r["Kernel Name"])
            ids = [w for w in re.findall(r"\w+", inner.group(1)) if w not in ("k", "unnamed")] if inner else []
            name += "<" + (ids[-1] if ids else "?") + ">"
        by_id[key] = [name, 0.0, None]
    if metric == "gpu__time_duration.sum":
        by_id[key][1] = v * {"ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}.get(unit, 1e-3)
    else:
        by_id[key][2] = v * {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}.get(unit, 1.0)
rows = [(n, v) for n, v, _ in by_id.values()]
dram = [b for _, _, b in by_id.values()]
# the decode step: from the second embed_kernel (the first is the 1-token prefill) to the argmax
embeds = [i for i, (n, _) in enumerate(rows) if n.startswith("embed")]
start = embeds[0] if first and embeds else (embeds[1] if len(embeds) > 1 else 0)
end = next((i + 1 for i, (n, _) in enumerate(rows) if i >= start and n.startswith("argmax")), len(rows))
if every:  # whole passes only: from the first embedding to the last one (which starts the cut-off pass)
    whole = embeds[-1] if len(embeds) > 1 else len(rows)
    lo = embeds[0] if embeds else 0
    step, step_b = rows[lo:whole], dram[lo:whole]
    passes = max(1, len(embeds) - 1) if len(embeds) > 1 else 1
else:
    step, step_b = rows[start:end], dram[start:end]
    passes = 1
agg = collections.defaultdict(lambda: [0, 0.0, 0.0])
have_b = any(b is not None for b in step_b)
for (n, v), b in zip(step, step_b):
    agg[n][0] += 1
    agg[n][1] += v
    agg[n][2] += b or 0.0
total = sum(v for _, v in step)
what = "whole passes" if every else ("first forward" if first else "one decode step (T=1)")
print("%s (no graph): %d kernels, %.1f us of kernel time; %d passes, %.1f us a pass" % (what, len(step), total, passes, total / passes))
if have_b:
    tb = sum(b or 0.0 for b in step_b)
    print("  DRAM read %.1f MB a pass, %.0f GB/s over the kernel time" % (tb / passes / 1e6, tb / total / 1e3 if total else 0))
for n, (c, v, b) in sorted(agg.items(), key=lambda x: -x[1][1]):
    extra = "  %8.1f MB %6.0f GB/s" % (b / passes / 1e6, b / v / 1e3 if v else 0) if have_b else ""
    print("  %-40s %5d launches %9.1f us  %5.1f%%%s" % (n, c, v, 100 * v / total if total else 0, extra))
