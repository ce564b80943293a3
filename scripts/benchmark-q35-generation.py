#!/usr/bin/env python3
# Generation benchmark collector (docs/benchmark.md; design: bench-receipts.md §3-6). Runs
# `mere.run model benchmark` once per workload with admission control before launch, machine
# monitoring while it runs and a JSON receipt after; `summarize DIR` turns a folder of receipts into
# Markdown tables. Python standard library only; every system probe is injectable so tests can mock it.
"""mere.run generation benchmark collector.

usage:
  benchmark-q35-generation.py [run] --binary PATH --model NAME|DIR --output DIR [flags]
  benchmark-q35-generation.py summarize DIR [--output FILE]
"""

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

SCHEMA = "mere.run/benchmark-receipt/1"

# Exit codes (docs/benchmark.md).
EXIT_OK = 0
EXIT_ERROR = 1          # bad flags, child failure, binary replaced during the measurement
EXIT_USAGE = 2          # argparse
EXIT_REFUSED = 3        # admission refused the launch (quiet window not available)
EXIT_CRITICAL = 4       # critical memory pressure: child terminated, no receipt
EXIT_CONTENDED = 5      # receipts written, but at least one run was contended
EXIT_PARITY = 6         # receipts written, but greedy outputs differ between variants

POLL_SECONDS = 2.0
QUIET_GPU_UTILIZATION_PERCENT = 10.0     # quiet window: every GPU at or below this before launch
QUIET_CPU_BUSY_PERCENT = 50.0            # quiet window: whole-machine CPU busy share (1 s sample) at or below this
CPU_SAMPLE_SECONDS = 1.0
FOREIGN_CPU_PERCENT = 15.0               # during the run: other processes' share of all CPUs above this = contended
PSI_SOME_ELEVATED = 10.0                 # /proc/pressure/memory "some" avg10 (%) that counts as elevated
PSI_FULL_ELEVATED = 1.0                  # "full" avg10 (%) that counts as elevated
PSI_FULL_CRITICAL = 10.0                 # "full" avg10 (%) that is a critical stall
MEM_AVAILABLE_ELEVATED_FRACTION = 0.10   # MemAvailable below this share of MemTotal is elevated
SWAP_GROWTH_CRITICAL_BYTES = 512 << 20   # swap growth since admission that is critical
TERMINATE_GRACE_SECONDS = 10.0
PRESSURE_LEVELS = ("normal", "elevated", "critical")
ENV_PREFIX = "MERERUN_Q35_"
VARIANTS = ("baseline", "adaptive", "forced")
STDERR_TAIL_LINES = 200

# The five fixed workloads (bench-receipts.md §6). Keep them fixed: receipts are only comparable with
# the same prompts. They equal `mere.run model benchmark --list-workloads` (checked by the smoke test).
SUMMARY_LOG = (
    "Incident log, checkout-service, Tuesday\n"
    "09:02 Deploy of checkout-service v2.14.0 started as a 10% canary.\n"
    "09:09 Canary dashboards green; rollout widened to 100% of traffic.\n"
    "09:17 p95 latency on /api/checkout climbs from 180 ms to 1.9 s; error rate rises from 0.4% to 3.1%.\n"
    "09:19 On-call engineer paged by the latency alert. Primary database CPU at 92%.\n"
    "09:24 Suspected cause: the new order-history query in v2.14.0 scans the orders table because the index "
    "on orders.customer_id was never created in production.\n"
    "09:27 Feature flag order_history_v2 disabled; no measurable effect.\n"
    "09:31 Rollback to v2.13.4 started.\n"
    "09:38 Rollback complete; p95 latency back to 210 ms, error rate 0.5%.\n"
    "09:55 Error rate back to its 0.1% baseline; incident downgraded to monitoring.\n"
    "Open questions: why the canary did not catch the slow query (canary traffic may have had few returning "
    "customers); whether the index migration can ship on its own before v2.14 is re-deployed; whether the "
    "roughly 340 failed checkouts need customer follow-up; who owns the missing load test for the "
    "order-history path."
)
WORKLOADS = {
    "code": (
        "Write a complete Python implementation of an LRU cache built on a dict plus a doubly linked list. Use "
        "type hints throughout, make get(key) and put(key, value) run in O(1) time with a fixed capacity that "
        "evicts the least recently used entry, and finish with a short usage example. Reply with code only, "
        "no explanation."
    ),
    "chat": (
        "Hi! I used to read every evening, but over the last year I have barely finished a single book and I "
        "miss it. Could you help me get back into the habit? A friendly, encouraging answer with a simple "
        "four-week plan would be great."
    ),
    "prose": (
        "Write about 400 words of connected prose, with no headings or lists, about a small community that "
        "turns its abandoned railway station into a public library: the people who led the effort, the work "
        "of restoring the building, and what the place means to the town once it opens."
    ),
    "math": (
        "Derive a closed formula for the sum of the first n squares, 1^2 + 2^2 + ... + n^2, and prove it by "
        "mathematical induction, stating the base case and the inductive step clearly. Then check the "
        "formula for n = 10 by computing the sum directly."
    ),
    "summary": (
        "Summarise the following incident log for a manager in one short paragraph, then give a bulleted list "
        "of actions with owners where the log suggests them.\n\n" + SUMMARY_LOG
    ),
}
WORKLOAD_ORDER = tuple(WORKLOADS)

# Invocations of the runtime that do not run a model (ignored when looking for competing processes).
METADATA_FLAGS = {"--help", "-h", "--version", "help"}
METADATA_COMMANDS = {("model", "list"), ("model", "info"), ("text", "tokenize"), ("text", "render-chat")}


class CollectorError(Exception):
    """A failure with an exit code and a message for stderr."""

    def __init__(self, message, code=EXIT_ERROR):
        super().__init__(message)
        self.code = code


# ---------------------------------------------------------------------------------------------------
# System probes (replace any of these in tests)
# ---------------------------------------------------------------------------------------------------

class Clock:
    def monotonic(self):
        return time.monotonic()

    def time(self):
        return time.time()


def _read_text(path):
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def parse_psi(text):
    """/proc/pressure/memory -> {"some": {"avg10": .., "avg60": .., "avg300": .., "total": ..}, "full": {..}}."""
    if not text:
        return None
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts or parts[0] not in ("some", "full"):
            continue
        fields = {}
        for kv in parts[1:]:
            k, _, v = kv.partition("=")
            try:
                fields[k] = int(v) if k == "total" else float(v)
            except ValueError:
                continue
        out[parts[0]] = fields
    return out or None


def parse_meminfo(text):
    """/proc/meminfo -> bytes for MemTotal, MemAvailable, SwapTotal, SwapFree (those present)."""
    out = {}
    for line in (text or "").splitlines():
        m = re.match(r"^(\w+):\s+(\d+)\s*(kB)?", line)
        if m and m.group(1) in ("MemTotal", "MemAvailable", "SwapTotal", "SwapFree"):
            out[m.group(1)] = int(m.group(2)) * (1024 if m.group(3) else 1)
    return out


def parse_nvidia_smi(text):
    """CSV rows of index, name, driver_version, utilization.gpu, memory.used, memory.total (noheader, nounits)."""
    gpus = []
    for line in (text or "").splitlines():
        cols = [c.strip() for c in line.split(",")]
        if len(cols) < 6:
            continue

        def num(s):
            try:
                return float(s)
            except ValueError:
                return None
        gpus.append({
            "index": int(num(cols[0]) or 0),
            "name": cols[1],
            "driverVersion": cols[2],
            "utilizationPercent": num(cols[3]),
            "memoryUsedMiB": num(cols[4]),
            "memoryTotalMiB": num(cols[5]),
        })
    return gpus


def parse_proc_stat_cpu(text):
    """(busy, total) jiffies from the aggregate "cpu" line of /proc/stat (idle and iowait are not busy)."""
    for line in (text or "").splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            vals = [int(v) for v in parts[1:9]]
            total = sum(vals)
            idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
            return total - idle, total
    return None


def foreign_cpu_percent(before, after, jiffies_per_second, child_cpu_seconds):
    """Share (%) of all CPUs' time over a run that processes other than the benchmark kept busy:
    (busy jiffies gained - the child's CPU time) / total jiffies gained. None where unreadable."""
    if not before or not after or after[1] <= before[1] or not jiffies_per_second:
        return None
    busy = (after[0] - before[0]) / jiffies_per_second
    total = (after[1] - before[1]) / jiffies_per_second
    return round(max(0.0, 100.0 * (busy - max(0.0, child_cpu_seconds)) / total), 1)


def parse_proc_status_memory(text):
    out = {}
    for line in (text or "").splitlines():
        m = re.match(r"^(VmRSS|VmHWM):\s+(\d+)\s*kB", line)
        if m:
            out["residentBytes" if m.group(1) == "VmRSS" else "peakResidentBytes"] = int(m.group(2)) * 1024
    return out


class SystemProbes:
    """The machine as the collector sees it. Every method is a seam for tests."""

    def gpus(self):
        """List of GPU dicts (see parse_nvidia_smi), or None where no NVIDIA tooling is present."""
        exe = shutil.which("nvidia-smi")
        if not exe:
            return None
        try:
            r = subprocess.run(
                [exe, "--query-gpu=index,name,driver_version,utilization.gpu,memory.used,memory.total",
                 "--format=csv,noheader,nounits"],
                capture_output=True, text=True, timeout=15)
        except (OSError, subprocess.SubprocessError):
            return None
        if r.returncode != 0:
            return None
        return parse_nvidia_smi(r.stdout)

    def memory_pressure(self):
        return parse_psi(_read_text("/proc/pressure/memory"))

    def meminfo(self):
        return parse_meminfo(_read_text("/proc/meminfo"))

    def load_average(self):
        try:
            return [round(x, 2) for x in os.getloadavg()]
        except OSError:
            return None

    def cpu_busy_percent(self, seconds=CPU_SAMPLE_SECONDS):
        """Share of all CPUs busy over the next `seconds` (/proc/stat), or None where unreadable."""
        a = parse_proc_stat_cpu(_read_text("/proc/stat"))
        time.sleep(seconds)
        b = parse_proc_stat_cpu(_read_text("/proc/stat"))
        if not a or not b or b[1] <= a[1]:
            return None
        return round(100.0 * (b[0] - a[0]) / (b[1] - a[1]), 1)

    def cpu_jiffies(self):
        """(busy, total) jiffies of all CPUs since boot (/proc/stat), or None where unreadable."""
        return parse_proc_stat_cpu(_read_text("/proc/stat"))

    def jiffies_per_second(self):
        try:
            return os.sysconf("SC_CLK_TCK")
        except (ValueError, OSError):
            return 100

    def children_cpu_seconds(self):
        """User + system CPU seconds of this process's waited-for children (getrusage RUSAGE_CHILDREN)."""
        import resource
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    def processes(self):
        """[(pid, ppid, argv)] for every process whose command line is readable."""
        out = []
        try:
            names = os.listdir("/proc")
        except OSError:
            return out
        for name in names:
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    raw = f.read()
                with open(f"/proc/{name}/stat", "r", encoding="utf-8", errors="replace") as f:
                    stat = f.read()
            except OSError:
                continue
            if not raw:
                continue
            argv = [a.decode("utf-8", "replace") for a in raw.rstrip(b"\0").split(b"\0")]
            try:
                ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            except (ValueError, IndexError):
                ppid = 0
            out.append((int(name), ppid, argv))
        return out

    def process_memory(self, pid):
        return parse_proc_status_memory(_read_text(f"/proc/{pid}/status"))

    def file_sha256(self, path):
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()

    def git(self, root, *args):
        try:
            r = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    def source_head(self, root):
        return self.git(root, "rev-parse", "HEAD")

    def source_dirty(self, root):
        s = self.git(root, "status", "--porcelain", "--untracked-files=no")
        return None if s is None else bool(s)

    def hardware(self):
        cpuinfo = _read_text("/proc/cpuinfo") or ""
        cpu_model = None
        for key in ("model name", "Hardware", "Model", "cpu model"):
            m = re.search(r"^" + re.escape(key) + r"\s*:\s*(.+)$", cpuinfo, re.M)
            if m:
                cpu_model = m.group(1).strip()
                break
        mem = self.meminfo()
        gpus = self.gpus() or []
        return {
            "cpuModel": cpu_model or platform.processor() or None,
            "cpuCores": os.cpu_count(),
            "memoryBytes": mem.get("MemTotal"),
            "machine": platform.machine(),
            "system": platform.system(),
            "kernel": platform.release(),
            "gpus": [{"index": g["index"], "name": g["name"], "driverVersion": g["driverVersion"],
                      "memoryTotalMiB": g["memoryTotalMiB"]} for g in gpus],
        }

    def environment(self):
        return dict(os.environ)


class ChildProcess:
    """A launched benchmark process (subprocess.Popen underneath)."""

    def __init__(self, popen, files):
        self._p = popen
        self._files = files
        self.pid = popen.pid

    def wait_for(self, seconds):
        """The exit code once the child has exited, or None after `seconds` without an exit."""
        try:
            rc = self._p.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return None
        self._close()
        return rc

    def terminate(self):
        self._p.terminate()

    def kill(self):
        self._p.kill()

    def _close(self):
        for f in self._files:
            f.close()
        self._files = []


class Launcher:
    def launch(self, argv, env, stdout_path, stderr_path):
        out = open(stdout_path, "wb")
        err = open(stderr_path, "wb")
        try:
            p = subprocess.Popen(argv, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        except OSError as e:
            out.close()
            err.close()
            raise CollectorError(f"[collector] could not start {argv[0]}: {e}")
        return ChildProcess(p, [out, err])


# ---------------------------------------------------------------------------------------------------
# Pure logic: classification, admission, environment
# ---------------------------------------------------------------------------------------------------

def is_runtime_process(argv):
    return bool(argv) and os.path.basename(argv[0]) == "mere.run"


def is_metadata_invocation(argv):
    if len(argv) < 3:  # bare `mere.run` or `mere.run group`: help
        return True
    if any(a in METADATA_FLAGS for a in argv[1:]):
        return True
    return (argv[1], argv[2]) in METADATA_COMMANDS


def competing_processes(processes, exclude_pids):
    """Runtime processes that run a model, other than ours: [{"pid", "command"}]."""
    out = []
    for pid, _ppid, argv in processes:
        if pid in exclude_pids or not is_runtime_process(argv) or is_metadata_invocation(argv):
            continue
        out.append({"pid": pid, "command": " ".join(argv)[:300]})
    return out


def descendants(processes, root):
    children = {}
    for pid, ppid, _argv in processes:
        children.setdefault(ppid, []).append(pid)
    seen, stack = set(), [root]
    while stack:
        p = stack.pop()
        for c in children.get(p, []):
            if c not in seen:
                seen.add(c)
                stack.append(c)
    return seen


def swap_used(mem):
    if "SwapTotal" in mem and "SwapFree" in mem:
        return mem["SwapTotal"] - mem["SwapFree"]
    return None


def pressure_level(psi, mem, swap_baseline):
    """("normal" | "elevated" | "critical", [reasons])."""
    reasons_crit, reasons_elev = [], []
    full10 = ((psi or {}).get("full") or {}).get("avg10")
    some10 = ((psi or {}).get("some") or {}).get("avg10")
    if full10 is not None and full10 >= PSI_FULL_CRITICAL:
        reasons_crit.append(f"PSI memory full avg10 {full10:.2f}% >= {PSI_FULL_CRITICAL}%")
    used = swap_used(mem or {})
    if used is not None and swap_baseline is not None and used - swap_baseline > SWAP_GROWTH_CRITICAL_BYTES:
        reasons_crit.append(f"swap grew by {(used - swap_baseline) >> 20} MiB (> {SWAP_GROWTH_CRITICAL_BYTES >> 20} MiB)")
    if reasons_crit:
        return "critical", reasons_crit
    if full10 is not None and full10 >= PSI_FULL_ELEVATED:
        reasons_elev.append(f"PSI memory full avg10 {full10:.2f}% >= {PSI_FULL_ELEVATED}%")
    if some10 is not None and some10 >= PSI_SOME_ELEVATED:
        reasons_elev.append(f"PSI memory some avg10 {some10:.2f}% >= {PSI_SOME_ELEVATED}%")
    total, avail = (mem or {}).get("MemTotal"), (mem or {}).get("MemAvailable")
    if total and avail is not None and avail < MEM_AVAILABLE_ELEVATED_FRACTION * total:
        reasons_elev.append(f"MemAvailable {avail >> 20} MiB < {int(MEM_AVAILABLE_ELEVATED_FRACTION * 100)}% of MemTotal")
    if reasons_elev:
        return "elevated", reasons_elev
    return "normal", []


def max_level(a, b):
    return a if PRESSURE_LEVELS.index(a) >= PRESSURE_LEVELS.index(b) else b


def admission_reasons(snapshot):
    """Why the machine is not quiet right now (empty: quiet)."""
    reasons = []
    for g in snapshot.get("gpus") or []:
        u = g.get("utilizationPercent")
        if u is not None and u > QUIET_GPU_UTILIZATION_PERCENT:
            reasons.append(f"GPU {g.get('index')} ({g.get('name')}) utilisation {u:g}% > {QUIET_GPU_UTILIZATION_PERCENT:g}%")
    busy = snapshot.get("cpuBusyPercent")
    if busy is not None and busy > QUIET_CPU_BUSY_PERCENT:
        reasons.append(f"CPUs {busy:g}% busy > {QUIET_CPU_BUSY_PERCENT:g}%")
    if snapshot["pressureLevel"] != "normal":
        reasons.append(f"memory pressure {snapshot['pressureLevel']}: " + "; ".join(snapshot["pressureReasons"]))
    for p in snapshot["competingProcesses"]:
        reasons.append(f"another mere.run inference process is active (pid {p['pid']}: {p['command']})")
    return reasons


def child_environment(caller_env, overrides):
    env = {k: v for k, v in caller_env.items() if not k.startswith(ENV_PREFIX)}
    env.update(overrides)
    return env


def runtime_overrides(args):
    """The MERERUN_Q35_* variables the explicit flags add back to the child's environment."""
    o = {}
    if args.block_size is not None:
        o["MERERUN_Q35_MTP_BLOCK_SIZE"] = str(args.block_size)
    if args.cost_ratio is not None:
        o["MERERUN_Q35_MTP_HEAD_COST_RATIO"] = repr(float(args.cost_ratio))
    if args.profile:
        o["MERERUN_Q35_MTP_PROFILE"] = "1"
    if args.async_blocks is not None:
        o["MERERUN_Q35_ASYNC_DECODE_BLOCKS"] = str(args.async_blocks)
    if args.pipelined_fallback is not None:
        o["MERERUN_Q35_MTP_PIPELINED_FALLBACK"] = str(args.pipelined_fallback)
    if args.scoped_compile is not None:
        o["MERERUN_Q35_SCOPED_COMPILE"] = str(args.scoped_compile)
    return o


def benchmark_argv(args, model_dir, workload):
    argv = [args.binary, "model", "benchmark", "--model", model_dir, "--scenario", workload,
            "--prompt", WORKLOADS[workload], "--tokens", str(args.tokens), "--warmups", str(args.warmups),
            "--warmup-tokens", str(args.warmup_tokens), "--repetitions", str(args.repetitions),
            "--variants", ",".join(args.variants), "--temperature", repr(float(args.temperature)),
            "--top-p", repr(float(args.top_p)), "--seed", str(args.seed), "--context", str(args.context)]
    if args.backend:
        argv += ["--backend", args.backend]
    if args.threads is not None:
        argv += ["--threads", str(args.threads)]
    if args.block_size is not None:
        argv += ["--block-size", str(args.block_size)]
    if args.cost_ratio is not None:
        argv += ["--cost-ratio", repr(float(args.cost_ratio))]
    if args.profile:
        argv += ["--profile"]
    return argv


def receipt_path(output_dir, workload):
    return os.path.join(output_dir, f"{workload}.json")


def write_json(path, obj):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, sort_keys=True, indent=2, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------------------
# The collector
# ---------------------------------------------------------------------------------------------------

class Collector:
    def __init__(self, args, probes=None, launcher=None, clock=None, log=None, collector_path=None):
        self.args = args
        self.probes = probes or SystemProbes()
        self.launcher = launcher or Launcher()
        self.clock = clock or Clock()
        self.log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.collector_path = collector_path or os.path.abspath(__file__)
        self.self_pid = os.getpid()

    # -- snapshots ----------------------------------------------------------------------------------
    def snapshot(self, swap_baseline=None, exclude=(), measure_cpu=False):
        cpu_busy = self.probes.cpu_busy_percent() if measure_cpu else None
        gpus = self.probes.gpus()
        psi = self.probes.memory_pressure()
        mem = self.probes.meminfo()
        procs = self.probes.processes()
        ours = {self.self_pid} | descendants(procs, self.self_pid) | set(exclude)
        used = swap_used(mem)
        level, reasons = pressure_level(psi, mem, swap_baseline if swap_baseline is not None else used)
        return {
            "unixSeconds": self.clock.time(),
            "gpus": gpus,
            "memoryPressure": psi,
            "pressureLevel": level,
            "pressureReasons": reasons,
            "memTotalBytes": mem.get("MemTotal"),
            "memAvailableBytes": mem.get("MemAvailable"),
            "swapUsedBytes": used,
            "loadAverage": self.probes.load_average(),
            "cpuBusyPercent": cpu_busy,
            "competingProcesses": competing_processes(procs, ours),
        }

    # -- one workload -------------------------------------------------------------------------------
    def run_workload(self, workload, model_dir, binary_sha, context):
        args = self.args
        before = self.snapshot(measure_cpu=True)
        reasons = admission_reasons(before)
        if before["pressureLevel"] == "critical":
            raise CollectorError(f"[collector] {workload}: refused to launch under critical memory pressure: "
                                 + "; ".join(before["pressureReasons"]), EXIT_REFUSED)
        mode = "desktop-load" if args.allow_desktop_load else "quiet-window"
        if reasons and mode == "quiet-window":
            raise CollectorError(f"[collector] {workload}: the machine is not quiet: " + "; ".join(reasons)
                                 + " (wait for a quiet window, or pass --allow-desktop-load to measure anyway"
                                 " with the receipt labelled desktop-load)", EXIT_REFUSED)
        contention = [f"before launch: {r}" for r in reasons]
        if mode == "desktop-load":
            contention.insert(0, "measured with --allow-desktop-load")

        overrides = runtime_overrides(args)
        env = child_environment(self.probes.environment(), overrides)
        argv = benchmark_argv(args, model_dir, workload)
        tmpdir = tempfile.mkdtemp(prefix=f"mere-bench-{workload}-")
        stdout_path = os.path.join(tmpdir, "stdout.json")
        stderr_path = os.path.join(tmpdir, "stderr.log")
        try:
            return self._measure(workload, argv, env, overrides, before, contention, mode, binary_sha, context,
                                 stdout_path, stderr_path)
        finally:
            shutil.rmtree(tmpdir, ignore_errors=True)

    def _measure(self, workload, argv, env, overrides, before, contention, mode, binary_sha, context,
                 stdout_path, stderr_path):
        args = self.args
        self.log(f"[collector] {workload}: launching ({mode})")
        started_unix = self.clock.time()
        t0 = self.clock.monotonic()
        # CPU time of everything but the benchmark: all CPUs' busy time minus the child's own
        cpu_before, children_before = self.probes.cpu_jiffies(), self.probes.children_cpu_seconds()
        child = self.launcher.launch(argv, env, stdout_path, stderr_path)
        swap_baseline = before["swapUsedBytes"]
        samples, peak_rss, max_pressure = [], 0, before["pressureLevel"]
        competing_max, competing_seen = 0, {}
        rc = None
        try:
            while True:
                snap = self.snapshot(swap_baseline=swap_baseline, exclude={child.pid})
                elapsed = self.clock.monotonic() - t0
                samples.append({
                    "elapsedSeconds": round(elapsed, 3),
                    "gpus": [{"index": g["index"], "utilizationPercent": g["utilizationPercent"],
                              "memoryUsedMiB": g["memoryUsedMiB"]} for g in (snap["gpus"] or [])],
                    "loadAverage": snap["loadAverage"],
                    "pressureLevel": snap["pressureLevel"],
                })
                mem = self.probes.process_memory(child.pid) or {}
                peak_rss = max(peak_rss, mem.get("peakResidentBytes") or 0, mem.get("residentBytes") or 0)
                competing_max = max(competing_max, len(snap["competingProcesses"]))
                for p in snap["competingProcesses"]:
                    competing_seen[p["pid"]] = p["command"]
                max_pressure = max_level(max_pressure, snap["pressureLevel"])
                if snap["pressureLevel"] == "critical":  # the handler below terminates the child
                    raise CollectorError(
                        f"[collector] {workload}: critical memory pressure ({'; '.join(snap['pressureReasons'])}): "
                        "terminated the benchmark; no receipt written", EXIT_CRITICAL)
                rc = child.wait_for(args.poll_seconds)
                if rc is not None:
                    break
        except BaseException:  # critical pressure, Ctrl-C or a probe failure: never leave the child running
            if rc is None:
                self._terminate(child)
            raise
        process_seconds = self.clock.monotonic() - t0
        foreign_cpu = foreign_cpu_percent(cpu_before, self.probes.cpu_jiffies(), self.probes.jiffies_per_second(),
                                          self.probes.children_cpu_seconds() - children_before)
        stderr_text = _read_text(stderr_path) or ""
        if rc != 0:
            saved = self._save_log(workload, stderr_path)
            raise CollectorError(f"[collector] {workload}: {os.path.basename(argv[0])} exited with {rc}: "
                                 f"expected 0; its stderr is saved at {saved}")
        binary_after = self.probes.file_sha256(args.binary)
        if binary_after != binary_sha:
            raise CollectorError(f"[collector] {workload}: the binary {args.binary} changed during the measurement "
                                 f"(SHA-256 {binary_sha[:12]}... before, {binary_after[:12]}... after): "
                                 "receipt refused; rebuild, then measure again")
        try:
            with open(stdout_path, "r", encoding="utf-8") as f:
                doc = json.load(f)
            scenarios = doc["scenarios"]
            model = doc["model"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            saved = self._save_log(workload, stderr_path)
            raise CollectorError(f"[collector] {workload}: the benchmark output is not the expected JSON document "
                                 f"({e}); its stderr is saved at {saved}")
        after = self.snapshot(swap_baseline=swap_baseline)
        child_peak = ((doc.get("process") or {}).get("peakResidentBytes")) or 0
        if competing_max:
            contention.append(f"during the run: up to {competing_max} other mere.run inference process(es)")
        if max_pressure != "normal":
            contention.append(f"during the run: memory pressure reached {max_pressure}")
        if foreign_cpu is not None and foreign_cpu > FOREIGN_CPU_PERCENT:
            contention.append(f"during the run: other processes kept {foreign_cpu:g}% of the CPUs busy "
                              f"(> {FOREIGN_CPU_PERCENT:g}%)")
        uncontended = mode == "quiet-window" and not contention
        parity_values = [s.get("greedyOutputParity") for s in scenarios]
        parity = None if all(p is None for p in parity_values) else all(p is not False for p in parity_values)
        receipt = {
            "schema": SCHEMA,
            "workload": workload,
            "prompt": WORKLOADS[workload],
            "command": argv,
            "binary": os.path.abspath(args.binary),
            "binarySHA256": binary_sha,
            "sourceRoot": context["sourceRoot"],
            "sourceHead": context["sourceHead"],
            "sourceDirty": context["sourceDirty"],
            "buildSourceRevision": args.build_source_revision,
            "collectorSHA256": context["collectorSHA256"],
            "runtimeOverrides": overrides,
            "profiled": bool(args.profile),
            "startedUnixSeconds": started_unix,
            "processSeconds": round(process_seconds, 3),
            "exitCode": rc,
            "peakResidentBytes": max(peak_rss, child_peak),
            "before": before,
            "after": after,
            "maxPressureLevel": max_pressure,
            "gpuSamples": samples,
            "foreignCpuPercent": foreign_cpu,
            "competingProcessesBefore": len(before["competingProcesses"]),
            "competingProcessesMaxDuring": competing_max,
            "competingProcessesSeen": [{"pid": p, "command": c} for p, c in sorted(competing_seen.items())],
            "measurementMode": mode,
            "uncontended": uncontended,
            "contentionReasons": contention,
            "greedyOutputParity": parity,
            "hardware": context["hardware"],
            "collectorSettings": {
                "tokens": args.tokens, "warmups": args.warmups, "warmupTokens": args.warmup_tokens,
                "repetitions": args.repetitions, "variants": list(args.variants),
                "temperature": float(args.temperature), "topP": float(args.top_p), "seed": args.seed,
                "context": args.context, "backend": args.backend, "threads": args.threads,
                "pollSeconds": args.poll_seconds,
            },
            "benchmark": {k: doc.get(k) for k in ("schema", "settings", "environment", "process")},
            "stderrTail": stderr_text.splitlines()[-STDERR_TAIL_LINES:],
        }
        return {"model": model, "scenarios": scenarios, "receipt": receipt}

    def _terminate(self, child):
        child.terminate()
        if child.wait_for(TERMINATE_GRACE_SECONDS) is None:
            child.kill()
            child.wait_for(TERMINATE_GRACE_SECONDS)

    def _save_log(self, workload, stderr_path):
        os.makedirs(self.args.output, exist_ok=True)
        dest = os.path.join(self.args.output, f"{workload}.stderr.log")
        try:
            shutil.copyfile(stderr_path, dest)
        except OSError:
            return stderr_path
        return dest

    # -- everything ---------------------------------------------------------------------------------
    def resolve_model(self):
        m = self.args.model
        if os.path.isdir(m):
            return os.path.abspath(m)
        candidate = os.path.join(self.args.source_root, "models", m)
        if os.sep not in m and os.path.isdir(candidate):
            return os.path.abspath(candidate)
        raise CollectorError(f"[collector] --model: expected a model directory or a name under "
                             f"{os.path.join(self.args.source_root, 'models')}, got \"{m}\"")

    def run(self):
        args = self.args
        if not (os.path.isfile(args.binary) and os.access(args.binary, os.X_OK)):
            raise CollectorError(f"[collector] --binary: expected an executable file, got \"{args.binary}\"")
        model_dir = self.resolve_model()
        existing = [receipt_path(args.output, w) for w in args.workloads if os.path.exists(receipt_path(args.output, w))]
        if existing:
            raise CollectorError(f"[collector] --output: expected no receipts there yet, found {', '.join(existing)} "
                                 "(choose a new folder)")
        binary_sha = self.probes.file_sha256(args.binary)
        context = {
            "sourceRoot": os.path.abspath(args.source_root),
            "sourceHead": self.probes.source_head(args.source_root),
            "sourceDirty": self.probes.source_dirty(args.source_root),
            "collectorSHA256": self.probes.file_sha256(self.collector_path),
            "hardware": self.probes.hardware(),
        }
        contended, mismatched = [], []
        for w in args.workloads:
            result = self.run_workload(w, model_dir, binary_sha, context)
            path = receipt_path(args.output, w)
            write_json(path, result)
            r = result["receipt"]
            self.log(f"[collector] {w}: receipt {path} ({r['measurementMode']}, "
                     f"{'uncontended' if r['uncontended'] else 'CONTENDED'})")
            if not r["uncontended"]:
                contended.append(w)
            if r["greedyOutputParity"] is False:
                mismatched.append(w)
        if mismatched:
            self.log(f"[collector] greedy output parity FAILED for {', '.join(mismatched)}: the variants produced "
                     "different tokens (see scenarios[].parityMismatches)")
        if contended:
            self.log(f"[collector] contended runs: {', '.join(contended)}; their receipts are kept but labelled: "
                     "exclude them from conclusions")
        if mismatched:
            return EXIT_PARITY
        if contended:
            return EXIT_CONTENDED
        return EXIT_OK


# ---------------------------------------------------------------------------------------------------
# summarize
# ---------------------------------------------------------------------------------------------------

def _median(xs):
    xs = sorted(xs)
    n = len(xs)
    if n == 0:
        return None
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def _fmt_range(xs, scale=1.0, digits=1):
    xs = [x * scale for x in xs if x is not None]
    if not xs:
        return "–"
    return f"{_median(xs):.{digits}f} ({min(xs):.{digits}f}–{max(xs):.{digits}f})"


def load_receipts(folder):
    """Every receipt under folder, subfolders included (one per model or order control), in path order."""
    receipts = []
    paths = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        paths += [os.path.join(root, name) for name in sorted(files) if name.endswith(".json")]
    for path in paths:
        try:
            with open(path, "r", encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and "receipt" in doc and "scenarios" in doc:
            receipts.append(doc)
    return receipts


def load_measurements(folder):
    """The other JSON documents of a receipts run, by shape: `mere.run bench --json` (prefill/decode
    throughput against the copy bandwidth) and `mere.run model verify-bench --json` (oracle-fed
    verification by width, head cost, greedy parity at forced depths); (path, doc) in path order."""
    bench, verify = [], []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            if not name.endswith(".json"):
                continue
            path = os.path.join(root, name)
            try:
                with open(path, "r", encoding="utf-8") as f:
                    doc = json.load(f)
            except (OSError, ValueError):
                continue
            if not isinstance(doc, dict):
                continue
            if "runs" in doc and "machine" in doc and "settings" in doc:
                bench.append((path, doc))
            elif "widths" in doc and "target_step_ms" in doc:
                verify.append((path, doc))
    return bench, verify


def _stat(d, digits=1):
    if not isinstance(d, dict) or d.get("median") is None:
        return "–"
    return f"{d['median']:.{digits}f} ({d.get('min', d['median']):.{digits}f}–{d.get('max', d['median']):.{digits}f})"


def summarize_measurements(bench, verify):
    """Markdown tables for `mere.run bench` and `verify-bench` documents (empty when there are none)."""
    out = []
    if bench:
        out += ["## Throughput (`mere.run bench`)", "",
                "| file | model | backend | depth | prefill tok/s | decode tok/s | decode GB/s | % of copy | copy GB/s | "
                "GPU memory over weights+KV+state |",
                "|---|---|---|---|---|---|---|---|---|---|"]
        for path, d in bench:
            model = d.get("model") or {}
            label = f"{model.get('layers', '?')} layers, hidden {model.get('hidden', '?')}" + (", MoE" if model.get("moe") else "")
            gpu = ((d.get("memory") or {}).get("gpu") or {}).get("over_weights_kv_state_gib")
            for r in d.get("runs", []):
                pct = r.get("decode_pct_of_copy_bw")
                out.append(f"| {os.path.basename(path)} | {label} | {(d.get('settings') or {}).get('backend', '?')} | "
                           f"{r.get('depth', 0)} | {_stat(r.get('prefill_tok_s'))} | {_stat(r.get('decode_tok_s'))} | "
                           f"{_stat(r.get('decode_weight_gb_s'), 0)} | {'–' if pct is None else f'{pct:.1f}%'} | "
                           f"{(d.get('machine') or {}).get('copy_bandwidth_gb_s', 0):.0f} | "
                           f"{'–' if gpu is None else f'{gpu:.2f} GiB'} |")
        out.append("")
    if verify:
        out += ["## Verification by width (`mere.run model verify-bench`, drafts from a known continuation)", "",
                "| file | width | tok/s | × width 1 | pass ms | oracle mismatches |", "|---|---|---|---|---|---|"]
        notes = []
        for path, d in verify:
            name = os.path.basename(path)
            for w in d.get("widths", []):
                sp = w.get("speedup_vs_width1")
                out.append(f"| {name} | {w.get('width')} | {_stat(w.get('tokens_per_s'))} | "
                           f"{'–' if sp is None else f'{sp:.2f}×'} | {_stat(w.get('pass_ms'), 2)} | "
                           f"{w.get('oracle_mismatches', '?')} |")
            ratio = d.get("head_cost_ratio")
            line = f"{name}: target step {_stat(d.get('target_step_ms'), 2)} ms"
            if ratio is not None:
                line += f", head step {_stat(d.get('head_step_ms'), 3)} ms = {ratio:.3f} of a target step"
            parity = d.get("parity") or []
            if parity:
                same = sum(1 for e in parity if e.get("equal"))
                line += (f"; greedy parity with MTP forced at depths "
                         f"{','.join(str(e.get('depth')) for e in parity)}: {same}/{len(parity)} equal"
                         + ("" if same == len(parity) else " **(DIFFERS)**"))
            notes.append(line)
        out += [""] + [f"* {n}" for n in notes] + [""]
    return "\n".join(out)


def _variant_values(variant, key):
    return [rep.get(key) for rep in variant.get("repetitions", [])]


def summarize(receipts):
    """Markdown tables from receipts, grouped by model."""
    if not receipts:
        return "No receipts found.\n"
    by_model = {}
    for doc in receipts:
        name = (doc.get("model") or {}).get("name") or "model"
        by_model.setdefault(name, []).append(doc)
    out = ["# Generation benchmark", ""]
    for model_name, docs in sorted(by_model.items()):
        rows = []
        for doc in docs:
            for sc in doc["scenarios"]:
                rows.append((doc, sc))
        order = {w: i for i, w in enumerate(WORKLOAD_ORDER)}
        rows.sort(key=lambda r: (order.get(r[1].get("name"), len(order)), r[1].get("name", "")))
        variants = []
        for _doc, sc in rows:
            for v in sc.get("variants", []):
                if v["variant"] not in variants:
                    variants.append(v["variant"])
        first = docs[0]
        settings = (first["receipt"].get("benchmark") or {}).get("settings") or {}
        hw = first["receipt"].get("hardware") or {}
        gpu_names = ", ".join(g.get("name", "?") for g in hw.get("gpus") or []) or "none"
        temp = settings.get("temperature", 0)
        out += [f"## {model_name}", "",
                f"{settings.get('tokens', '?')} tokens per request, "
                f"{'greedy' if not temp else f'temperature {temp}'}, {settings.get('repetitions', '?')} repetition(s); "
                f"backend {(first.get('model') or {}).get('backend', '?')}; CPU {hw.get('cpuModel') or '?'} "
                f"({hw.get('cpuCores') or '?'} cores); GPU {gpu_names}. Median of the repetitions (min–max).", ""]
        others = [v for v in variants if v != "baseline"]
        header = ["workload"]
        header += [f"{v} decode tok/s" for v in variants]
        header += [f"{v} request tok/s" for v in variants]
        header += [f"{v} TTFT ms" for v in variants]
        if "baseline" in variants:
            header += [f"{v}/baseline" for v in others]
        header += ["measurement"]
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "---|" * len(header))
        contended_any = False
        for doc, sc in rows:
            vmap = {v["variant"]: v for v in sc.get("variants", [])}
            run_order = [v["variant"] for v in sc.get("variants", [])]
            # an order control (baseline not first) is labelled with the order it ran in
            label = sc.get("name", "?") if not run_order or run_order[0] == "baseline" \
                else f"{sc.get('name', '?')} (order {' → '.join(run_order)})"
            cells = [label]
            cells += [_fmt_range(_variant_values(vmap[v], "decodeTokensPerSecond")) if v in vmap else "–" for v in variants]
            cells += [_fmt_range(_variant_values(vmap[v], "endToEndTokensPerSecond")) if v in vmap else "–" for v in variants]
            cells += [_fmt_range(_variant_values(vmap[v], "ttftSeconds"), scale=1e3) if v in vmap else "–" for v in variants]
            if "baseline" in variants:
                base = _median([x for x in _variant_values(vmap["baseline"], "decodeTokensPerSecond") if x is not None]) \
                    if "baseline" in vmap else None
                for v in others:
                    med = _median([x for x in _variant_values(vmap[v], "decodeTokensPerSecond") if x is not None]) \
                        if v in vmap else None
                    cells.append(f"{med / base:.2f}×" if med is not None and base else "–")
            r = doc["receipt"]
            if r.get("uncontended"):
                cells.append("quiet")
            else:
                contended_any = True
                cells.append(f"{r.get('measurementMode', '?')}, contended ⚠")
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
        out += ["### Acceleration and parity", "",
                "| workload | variant | route | acceptance | mean accepted length | rounds | drafted | accepted | "
                "replacement passes | greedy parity |",
                "|---|---|---|---|---|---|---|---|---|---|"]
        for _doc, sc in rows:
            parity = sc.get("greedyOutputParity")
            ptxt = "n/a" if parity is None else ("yes" if parity else "**NO**")
            for v in sc.get("variants", []):
                reps = v.get("repetitions", [])
                acc = [rep.get("acceleration") or {} for rep in reps]
                routes = sorted({a.get("route", "?") for a in acc})
                rounds = sum(a.get("rounds", 0) for a in acc)
                drafted = sum(a.get("draftedTokens", 0) for a in acc)
                accepted = sum(a.get("acceptedTokens", 0) for a in acc)
                rate = f"{accepted / drafted:.2f}" if drafted else "–"
                mal = f"{(accepted + rounds) / rounds:.2f}" if rounds else "–"
                replacement = sum(a.get("replacementPasses", 0) for a in acc)
                out.append(f"| {sc.get('name', '?')} | {v['variant']} | {', '.join(routes) or '–'} | {rate} | {mal} | "
                           f"{rounds} | {drafted} | {accepted} | {replacement} | {ptxt} |")
        out.append("")
        if contended_any:
            out += ["⚠ Contended receipts (desktop load, competing processes or memory pressure) are listed for "
                    "completeness: exclude them from conclusions.", ""]
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------------

def _list_arg(values, allowed, what):
    items = []
    for v in values:
        items += [x.strip() for x in v.split(",") if x.strip()]
    for x in items:
        if x not in allowed:
            raise argparse.ArgumentTypeError(f"{what}: expected one of {', '.join(allowed)}, got \"{x}\"")
    if len(set(items)) != len(items):
        raise argparse.ArgumentTypeError(f"{what}: expected each name once, got {' '.join(items)}")
    if not items:
        raise argparse.ArgumentTypeError(f"{what}: expected at least one name")
    return items


def _zero_one(s):
    if s not in ("0", "1"):
        raise argparse.ArgumentTypeError(f"expected 0 or 1, got \"{s}\"")
    return int(s)


def _positive_int(s):
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got \"{s}\"")
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected >= 1, got {v}")
    return v


def _non_negative_int(s):
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got \"{s}\"")
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected >= 0, got {v}")
    return v


def run_parser():
    default_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = argparse.ArgumentParser(
        prog="benchmark-q35-generation.py",
        description="Run `mere.run model benchmark` once per workload with admission control and monitoring, "
                    "and write one JSON receipt per workload. `summarize DIR` prints Markdown tables.")
    p.add_argument("--binary", required=True, help="the mere.run executable to measure")
    p.add_argument("--source-root", default=default_root, help="source checkout whose git HEAD is recorded")
    p.add_argument("--build-source-revision", default=None, metavar="REV",
                   help="the source revision the binary was built from (recorded as given)")
    p.add_argument("--model", required=True, metavar="NAME|DIR", help="model directory, or a name under SOURCE_ROOT/models")
    p.add_argument("--output", required=True, metavar="DIR", help="receipt folder (an existing receipt there is an error)")
    p.add_argument("--workloads", nargs="+", default=list(WORKLOAD_ORDER), metavar="NAME",
                   help="workloads in run order (space- or comma-separated): " + " ".join(WORKLOAD_ORDER))
    p.add_argument("--tokens", type=_positive_int, default=256, help="generated tokens per request (default 256)")
    p.add_argument("--temperature", type=float, default=0.0, help="sampling temperature; 0 = greedy (default)")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus mass (default 1)")
    p.add_argument("--seed", type=_non_negative_int, default=0, help="request RNG seed (default 0)")
    p.add_argument("--warmups", type=_non_negative_int, default=1, help="warm-ups per variant (default 1)")
    p.add_argument("--warmup-tokens", type=_positive_int, default=None,
                   help="tokens per warm-up (default: --tokens, 256)")
    p.add_argument("--repetitions", type=_positive_int, default=3, help="measured repetitions per variant (default 3)")
    p.add_argument("--variants", nargs="+", default=["baseline,adaptive"], metavar="LIST",
                   help="variants in run order, e.g. baseline,adaptive (reverse it for an order control)")
    p.add_argument("--context", type=_positive_int, default=8192, help="context limit (default 8192)")
    p.add_argument("--backend", default=None, help="runtime backend (default: the runtime's)")
    p.add_argument("--threads", type=_non_negative_int, default=None, metavar="N",
                   help="CPU worker threads for the runtime (default: the runtime's, its physical cores)")
    p.add_argument("--block-size", type=_positive_int, default=None, metavar="N", help="MERERUN_Q35_MTP_BLOCK_SIZE")
    p.add_argument("--cost-ratio", type=float, default=None, metavar="X", help="MERERUN_Q35_MTP_HEAD_COST_RATIO")
    p.add_argument("--profile", action="store_true", help="MERERUN_Q35_MTP_PROFILE=1 (not for throughput)")
    p.add_argument("--async-blocks", type=_zero_one, default=None, metavar="0|1", help="MERERUN_Q35_ASYNC_DECODE_BLOCKS")
    p.add_argument("--pipelined-fallback", type=_zero_one, default=None, metavar="0|1",
                   help="MERERUN_Q35_MTP_PIPELINED_FALLBACK")
    p.add_argument("--scoped-compile", type=_zero_one, default=None, metavar="0|1", help="MERERUN_Q35_SCOPED_COMPILE")
    p.add_argument("--allow-desktop-load", action="store_true",
                   help="launch even when the machine is not quiet; receipts are labelled desktop-load/contended")
    p.add_argument("--poll-seconds", type=float, default=POLL_SECONDS, help=argparse.SUPPRESS)
    return p


def parse_run_args(argv):
    p = run_parser()
    args = p.parse_args(argv)
    try:
        args.workloads = _list_arg(args.workloads, WORKLOAD_ORDER, "--workloads")
        args.variants = _list_arg(args.variants, VARIANTS, "--variants")
    except argparse.ArgumentTypeError as e:
        p.error(str(e))
    if args.warmup_tokens is None:
        args.warmup_tokens = args.tokens
    if args.block_size is not None and args.block_size < 2:
        p.error(f"--block-size: expected >= 2, got {args.block_size}")
    if args.cost_ratio is not None and not (0 < args.cost_ratio <= 5):
        p.error(f"--cost-ratio: expected 0 < X <= 5, got {args.cost_ratio}")
    if args.temperature < 0:
        p.error(f"--temperature: expected >= 0, got {args.temperature}")
    if not (0 < args.top_p <= 1):
        p.error(f"--top-p: expected 0 < P <= 1, got {args.top_p}")
    if not args.poll_seconds > 0:
        p.error(f"--poll-seconds: expected > 0, got {args.poll_seconds}")
    return args


def main(argv=None, probes=None, launcher=None, clock=None, log=None, stdout=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    stdout = stdout or sys.stdout
    err = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    if argv and argv[0] == "summarize":
        p = argparse.ArgumentParser(prog="benchmark-q35-generation.py summarize",
                                    description="Markdown tables from a folder of receipts.")
        p.add_argument("folder", metavar="DIR")
        p.add_argument("--output", default=None, metavar="FILE", help="also write the Markdown here")
        a = p.parse_args(argv[1:])
        if not os.path.isdir(a.folder):
            err(f"[summarize] DIR: expected a folder of receipts, got \"{a.folder}\"")
            return EXIT_ERROR
        text = summarize(load_receipts(a.folder))
        extra = summarize_measurements(*load_measurements(a.folder))
        if extra:
            text = text.rstrip("\n") + "\n\n" + extra
        stdout.write(text)
        if a.output:
            with open(a.output, "w", encoding="utf-8") as f:
                f.write(text)
        return EXIT_OK
    if argv and argv[0] == "run":
        argv = argv[1:]
    args = parse_run_args(argv)
    try:
        return Collector(args, probes=probes, launcher=launcher, clock=clock, log=log).run()
    except CollectorError as e:
        err(f"error: {e}")
        return e.code


if __name__ == "__main__":
    sys.exit(main())
