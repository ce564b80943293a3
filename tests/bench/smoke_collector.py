# CPU smoke test of the benchmark pipeline end to end: a tiny model (the bundled trained one at
# models/qwen35-dense-tiny when present, else `mere.run model synth`), the real collector driving the
# real `mere.run model benchmark` (two workloads, 16 tokens, one repetition, baseline,adaptive, desktop
# load allowed, one thread), then valid receipts, greedy parity and a summary; and the collector's five
# workloads equal the binary's built-ins. Usage: smoke_collector.py MERE_RUN SOURCE_ROOT
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

WORKLOADS = ("code", "chat", "prose", "math", "summary")
MEASURED = ("code", "chat")  # the shortest prompts: CI time is mostly prefill on an unoptimised build


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def main():
    if len(sys.argv) != 3:
        fail("usage: smoke_collector.py MERE_RUN SOURCE_ROOT")
    binary, root = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    script = os.path.join(root, "scripts", "benchmark-q35-generation.py")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-smoke-") as tmp:
        model = os.path.join(root, "models", "qwen35-dense-tiny")
        if not os.path.isfile(os.path.join(model, "config.json")):
            model = os.path.join(tmp, "tiny")
            r = subprocess.run([binary, "model", "synth", "--geometry", "tiny-dense", "--dtype", "bf16", "--seed", "1",
                                "--out", model, "--quiet"], capture_output=True, text=True)
            if r.returncode != 0:
                fail(f"model synth exited with {r.returncode}: {r.stderr}")
        print(f"model: {model}")

        # the collector's workloads are the binary's built-ins
        r = subprocess.run([binary, "model", "benchmark", "--list-workloads"], capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"--list-workloads exited with {r.returncode}: {r.stderr}")
        builtin = {w["name"]: w["prompt"] for w in json.loads(r.stdout)}
        sys.path.insert(0, os.path.dirname(script))
        import importlib.util
        spec = importlib.util.spec_from_file_location("bench_collector", script)
        bc = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bc)
        if builtin != bc.WORKLOADS or list(builtin) != list(WORKLOADS):
            fail("the collector's WORKLOADS differ from `mere.run model benchmark --list-workloads`")

        out = os.path.join(tmp, "receipts")
        cmd = [sys.executable, script, "--binary", binary, "--model", model, "--output", out,
               "--workloads", *MEASURED, "--tokens", "16", "--warmups", "1", "--warmup-tokens", "1",
               "--repetitions", "1", "--variants", "baseline,adaptive", "--allow-desktop-load",
               "--poll-seconds", "0.5", "--threads", "1"]
        env = dict(os.environ, MERERUN_Q35_MTP_SPECULATION="0")  # must be stripped from the child
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        sys.stderr.write(r.stderr[-4000:])
        # desktop-load receipts are contended by definition: kept, exit 5
        if r.returncode != 5:
            fail(f"collector exited with {r.returncode}: expected 5 (receipts kept, desktop load)")

        with open(binary, "rb") as f:
            binary_sha = hashlib.sha256(f.read()).hexdigest()
        if sorted(os.listdir(out)) != sorted(f"{w}.json" for w in MEASURED):
            fail(f"expected exactly the receipts of {MEASURED} in {out}, got {os.listdir(out)}")
        for w in MEASURED:
            path = os.path.join(out, f"{w}.json")
            with open(path) as f:
                text = f.read()
            doc = json.loads(text)
            if text != json.dumps(doc, sort_keys=True, indent=2, ensure_ascii=False) + "\n":
                fail(f"{path}: not written with sorted keys and indentation")
            rc = doc["receipt"]
            checks = {
                "workload": rc["workload"] == w,
                "prompt": rc["prompt"] == bc.WORKLOADS[w],
                "mode": rc["measurementMode"] == "desktop-load" and rc["uncontended"] is False,
                "binary hash": rc["binarySHA256"] == binary_sha,
                "overrides": rc["runtimeOverrides"] == {},
                "child env": doc["receipt"]["benchmark"]["environment"] == {},
                "peak RSS": rc["peakResidentBytes"] > 0,
                "samples": len(rc["gpuSamples"]) >= 1,
                "hardware": rc["hardware"]["cpuCores"] >= 1,
                "parity": rc["greedyOutputParity"] is True,
            }
            bad = [k for k, ok in checks.items() if not ok]
            if bad:
                fail(f"{path}: failed checks {bad}")
            (sc,) = doc["scenarios"]
            if sc["name"] != w or [v["variant"] for v in sc["variants"]] != ["baseline", "adaptive"]:
                fail(f"{path}: unexpected scenario layout")
            if sc["greedyOutputParity"] is not True or "adaptive" not in sc["speedups"]:
                fail(f"{path}: missing parity or speedups")
            for v in sc["variants"]:
                (rep,) = v["repetitions"]
                if rep["generatedTokens"] != 16 or len(rep["outputSHA256"]) != 64 or len(rep["textSHA256"]) != 64:
                    fail(f"{path}: {v['variant']}: expected 16 tokens and SHA-256 hex digests, got {rep}")
                if not (rep["decodeTokensPerSecond"] > 0 and rep["ttftSeconds"] > 0 and rep["residentBytesAfter"] > 0):
                    fail(f"{path}: {v['variant']}: non-positive timings or memory: {rep}")
                if len(v["warmups"]) != 1 or v["warmups"][0]["generatedTokens"] != 1:
                    fail(f"{path}: {v['variant']}: expected one 1-token warm-up")
                if "route" not in rep["acceleration"]:
                    fail(f"{path}: {v['variant']}: no acceleration.route")

        r = subprocess.run([sys.executable, script, "summarize", out], capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"summarize exited with {r.returncode}: {r.stderr}")
        for w in MEASURED:
            if not any(line.startswith(f"| {w} | ") for line in r.stdout.splitlines()):
                fail(f"summary lacks a row for {w}:\n{r.stdout}")
        print(r.stdout)
    print(f"ok: bench smoke in {time.monotonic() - t0:.1f} s")


if __name__ == "__main__":
    main()
