# Unit tests of scripts/benchmark-q35-generation.py with every system probe mocked (no binary, no
# GPU, no /proc needed): admission (quiet vs desktop load), critical-pressure termination, replaced
# binaries, contention labelling, environment hygiene, parity flagging and `summarize` on fixture
# receipts. Run: python3 -m unittest discover -s tests/bench -v
import copy
import importlib.util
import io
import json
import os
import shutil
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "benchmark-q35-generation.py")
FIXTURES = os.path.join(HERE, "fixtures", "receipts")


def load_collector():
    spec = importlib.util.spec_from_file_location("bench_collector", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


bc = load_collector()

QUIET_PSI = {"some": {"avg10": 0.0, "avg60": 0.0, "avg300": 0.0, "total": 0},
             "full": {"avg10": 0.0, "avg60": 0.0, "avg300": 0.0, "total": 0}}
CRITICAL_PSI = {"some": {"avg10": 60.0, "avg60": 20.0, "avg300": 5.0, "total": 10**7},
                "full": {"avg10": 40.0, "avg60": 10.0, "avg300": 2.0, "total": 10**7}}
GiB = 1 << 30


def benchmark_doc(workload, parity=True):
    def rep(dec):
        return {"decodeTokensPerSecond": dec, "endToEndTokensPerSecond": dec * 0.9, "ttftSeconds": 0.05,
                "generatedTokens": 16, "outputSHA256": "00" * 32,
                "acceleration": {"route": "serial", "rounds": 0, "draftedTokens": 0, "acceptedTokens": 0,
                                 "replacementPasses": 0}}
    return {
        "schema": "mere.run/model-benchmark/1",
        "model": {"name": "tiny", "backend": "cpu-ref"},
        "settings": {"tokens": 16, "temperature": 0.0, "repetitions": 1},
        "environment": {},
        "process": {"peakResidentBytes": 123 << 20},
        "scenarios": [{"name": workload, "greedyOutputParity": parity,
                       "variants": [{"variant": "baseline", "repetitions": [rep(100.0)]},
                                    {"variant": "adaptive", "repetitions": [rep(120.0)]}]}],
    }


class FakeClock:
    def __init__(self):
        self.t = 1000.0

    def monotonic(self):
        return self.t

    def time(self):
        return 1.7e9 + self.t


class FakeProbes:
    """A machine whose every reading the test sets. psi/meminfo/processes may be lists: one entry per
    call, the last one repeated."""

    def __init__(self):
        self.gpu_list = None
        self.psi = [QUIET_PSI]
        self.mem = [{"MemTotal": 64 * GiB, "MemAvailable": 48 * GiB, "SwapTotal": 8 * GiB, "SwapFree": 8 * GiB}]
        self.procs = [[]]
        self.hashes = {}
        self.cpu_busy = 2.0
        self.env = {"PATH": "/usr/bin", "HOME": "/home/bench"}
        self.calls = {"psi": 0, "mem": 0, "procs": 0}

    @staticmethod
    def _next(seq, i):
        return seq[min(i, len(seq) - 1)]

    def gpus(self):
        return copy.deepcopy(self.gpu_list)

    def memory_pressure(self):
        self.calls["psi"] += 1
        return self._next(self.psi, self.calls["psi"] - 1)

    def meminfo(self):
        self.calls["mem"] += 1
        return dict(self._next(self.mem, self.calls["mem"] - 1))

    def load_average(self):
        return [0.5, 0.4, 0.3]

    def cpu_busy_percent(self):
        return self.cpu_busy

    # CPU accounting over a run: the machine's busy jiffies grow by foreign_cpu_seconds more than
    # the child's own CPU time (child_cpu_seconds); 4 CPUs, 100 jiffies a second, 10 s per run.
    foreign_cpu_seconds = 0.5
    child_cpu_seconds = 20.0

    def cpu_jiffies(self):
        n = getattr(self, "_jiffy_calls", 0)
        self._jiffy_calls = n + 1
        if n % 2 == 0:
            return (1000, 10000)
        return (1000 + int(100 * (self.child_cpu_seconds + self.foreign_cpu_seconds)), 10000 + 100 * 4 * 10)

    def jiffies_per_second(self):
        return 100

    def children_cpu_seconds(self):
        n = getattr(self, "_rusage_calls", 0)
        self._rusage_calls = n + 1
        return 3.0 + (self.child_cpu_seconds if n % 2 else 0.0)

    def processes(self):
        self.calls["procs"] += 1
        return list(self._next(self.procs, self.calls["procs"] - 1))

    def process_memory(self, pid):
        return {"residentBytes": 100 << 20, "peakResidentBytes": 110 << 20}

    def file_sha256(self, path):
        h = self.hashes.get(os.path.basename(path), "c0" * 32)
        return h() if callable(h) else h

    def source_head(self, root):
        return "deadbeef" * 5

    def source_dirty(self, root):
        return False

    def hardware(self):
        return {"cpuModel": "Fake CPU", "cpuCores": 4, "memoryBytes": 64 * GiB, "gpus": []}

    def environment(self):
        return dict(self.env)


class FakeChild:
    pid = 4242

    def __init__(self, clock, stdout_path, stderr_path, doc, rc, polls):
        self.clock, self.stdout_path, self.stderr_path = clock, stdout_path, stderr_path
        self.doc, self.rc, self.polls = doc, rc, polls
        self.terminated = self.killed = False

    def wait_for(self, seconds):
        if self.terminated:
            return -15
        self.clock.t += seconds
        self.polls -= 1
        if self.polls > 0:
            return None
        with open(self.stdout_path, "w") as f:
            json.dump(self.doc, f)
        with open(self.stderr_path, "w") as f:
            f.write("[benchmark] progress line\n" + ("boom: something failed\n" if self.rc else ""))
        return self.rc

    def terminate(self):
        self.terminated = True

    def kill(self):
        self.killed = True


class FakeLauncher:
    def __init__(self, clock, doc_for=None, rc=0, polls=3, on_launch=None):
        self.clock, self.rc, self.polls, self.on_launch = clock, rc, polls, on_launch
        self.doc_for = doc_for or (lambda workload: benchmark_doc(workload))
        self.launches = []
        self.children = []

    def launch(self, argv, env, stdout_path, stderr_path):
        self.launches.append((argv, env))
        workload = argv[argv.index("--scenario") + 1]
        child = FakeChild(self.clock, stdout_path, stderr_path, self.doc_for(workload), self.rc, self.polls)
        self.children.append(child)
        if self.on_launch:
            self.on_launch(child)
        return child


class CollectorTestCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="bench-collector-test-")
        self.binary = os.path.join(self.tmp, "mere.run")
        with open(self.binary, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(self.binary, 0o755)
        self.model = os.path.join(self.tmp, "model")
        os.makedirs(self.model)
        self.out = os.path.join(self.tmp, "receipts")
        self.clock = FakeClock()
        self.probes = FakeProbes()
        self.messages = []

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_collector(self, *extra, launcher=None, workloads=("code",)):
        self.launcher = launcher or FakeLauncher(self.clock)
        argv = ["--binary", self.binary, "--model", self.model, "--output", self.out, "--source-root", self.tmp,
                "--workloads", *workloads, "--tokens", "16", "--repetitions", "1", *extra]
        return bc.main(argv, probes=self.probes, launcher=self.launcher, clock=self.clock, log=self.messages.append)

    def receipt(self, workload="code"):
        with open(os.path.join(self.out, f"{workload}.json")) as f:
            return json.load(f)

    def output_files(self):
        return sorted(os.listdir(self.out)) if os.path.isdir(self.out) else []


class AdmissionTest(CollectorTestCase):
    def test_quiet_run_is_labelled_uncontended(self):
        rc = self.run_collector()
        self.assertEqual(rc, bc.EXIT_OK, self.messages)
        doc = self.receipt()
        self.assertEqual(sorted(doc), ["model", "receipt", "scenarios"])
        r = doc["receipt"]
        self.assertEqual(r["measurementMode"], "quiet-window")
        self.assertTrue(r["uncontended"])
        self.assertEqual(r["contentionReasons"], [])
        self.assertEqual(r["workload"], "code")
        self.assertEqual(r["prompt"], bc.WORKLOADS["code"])
        self.assertEqual(r["binarySHA256"], "c0" * 32)
        self.assertEqual(r["sourceHead"], "deadbeef" * 5)
        self.assertEqual(r["maxPressureLevel"], "normal")
        self.assertEqual(r["peakResidentBytes"], 123 << 20)
        self.assertTrue(r["greedyOutputParity"])
        self.assertGreaterEqual(len(r["gpuSamples"]), 3)
        self.assertEqual(r["gpuSamples"][1]["elapsedSeconds"], 2.0)
        self.assertEqual(r["gpuSamples"][0]["loadAverage"], [0.5, 0.4, 0.3])
        for key in ("command", "collectorSHA256", "runtimeOverrides", "profiled", "startedUnixSeconds",
                    "processSeconds", "before", "after", "competingProcessesBefore", "competingProcessesMaxDuring",
                    "hardware", "buildSourceRevision"):
            self.assertIn(key, r)
        # the child got the workload's prompt and the measurement flags
        argv, _env = self.launcher.launches[0]
        self.assertEqual(argv[1:3], ["model", "benchmark"])
        self.assertEqual(argv[argv.index("--prompt") + 1], bc.WORKLOADS["code"])
        self.assertEqual(argv[argv.index("--variants") + 1], "baseline,adaptive")
        self.assertEqual(argv[argv.index("--warmup-tokens") + 1], "16")
        self.assertEqual(r["command"], argv)
        # sorted keys, indented
        with open(os.path.join(self.out, "code.json")) as f:
            text = f.read()
        self.assertEqual(text, json.dumps(doc, sort_keys=True, indent=2, ensure_ascii=False) + "\n")

    def test_busy_gpu_refused_in_quiet_mode(self):
        self.probes.gpu_list = [{"index": 0, "name": "NVIDIA H200", "driverVersion": "570", "utilizationPercent": 55.0,
                                 "memoryUsedMiB": 9000.0, "memoryTotalMiB": 143771.0}]
        rc = self.run_collector()
        self.assertEqual(rc, bc.EXIT_REFUSED)
        self.assertEqual(self.launcher.launches, [])
        self.assertEqual(self.output_files(), [])
        self.assertTrue(any("utilisation 55%" in m for m in self.messages), self.messages)

    def test_idle_gpu_admitted_in_quiet_mode(self):
        self.probes.gpu_list = [{"index": 0, "name": "NVIDIA H200", "driverVersion": "570", "utilizationPercent": 3.0,
                                 "memoryUsedMiB": 500.0, "memoryTotalMiB": 143771.0}]
        self.assertEqual(self.run_collector(), bc.EXIT_OK, self.messages)
        self.assertEqual(self.receipt()["receipt"]["gpuSamples"][0]["gpus"][0]["utilizationPercent"], 3.0)

    def test_busy_cpus_refused_in_quiet_mode_and_labelled_in_desktop_mode(self):
        self.probes.cpu_busy = 93.5
        self.assertEqual(self.run_collector(), bc.EXIT_REFUSED)
        self.assertEqual(self.launcher.launches, [])
        self.assertTrue(any("CPUs 93.5% busy" in m for m in self.messages), self.messages)
        self.assertEqual(self.run_collector("--allow-desktop-load"), bc.EXIT_CONTENDED)
        r = self.receipt()["receipt"]
        self.assertEqual(r["before"]["cpuBusyPercent"], 93.5)
        self.assertTrue(any("CPUs 93.5% busy" in c for c in r["contentionReasons"]))

    def test_competing_runtime_process_refused_in_quiet_mode(self):
        self.probes.procs = [[(77, 1, ["/opt/bin/mere.run", "text", "generate", "--model", "m", "--prompt", "x"])]]
        self.assertEqual(self.run_collector(), bc.EXIT_REFUSED)
        self.assertEqual(self.launcher.launches, [])

    def test_elevated_pressure_refused_in_quiet_mode(self):
        self.probes.psi = [{"some": {"avg10": 25.0}, "full": {"avg10": 0.0}}]
        self.assertEqual(self.run_collector(), bc.EXIT_REFUSED)
        self.assertEqual(self.launcher.launches, [])

    def test_desktop_load_is_labelled_and_exits_nonzero(self):
        self.probes.gpu_list = [{"index": 0, "name": "NVIDIA H200", "driverVersion": "570", "utilizationPercent": 55.0,
                                 "memoryUsedMiB": 9000.0, "memoryTotalMiB": 143771.0}]
        rc = self.run_collector("--allow-desktop-load")
        self.assertEqual(rc, bc.EXIT_CONTENDED)
        self.assertEqual(len(self.launcher.launches), 1)
        r = self.receipt()["receipt"]
        self.assertEqual(r["measurementMode"], "desktop-load")
        self.assertFalse(r["uncontended"])
        self.assertTrue(any("utilisation 55%" in c for c in r["contentionReasons"]))
        self.assertTrue(any("exclude" in m for m in self.messages))

    def test_desktop_load_on_a_quiet_machine_is_still_labelled(self):
        self.assertEqual(self.run_collector("--allow-desktop-load"), bc.EXIT_CONTENDED)
        r = self.receipt()["receipt"]
        self.assertEqual(r["measurementMode"], "desktop-load")
        self.assertFalse(r["uncontended"])

    def test_critical_pressure_at_admission_refused_even_with_desktop_load(self):
        self.probes.psi = [CRITICAL_PSI]
        self.assertEqual(self.run_collector("--allow-desktop-load"), bc.EXIT_REFUSED)
        self.assertEqual(self.launcher.launches, [])

    def test_metadata_invocations_are_not_competing(self):
        procs = [
            (10, 1, ["/x/mere.run", "--help"]),
            (11, 1, ["mere.run", "--version"]),
            (12, 1, ["mere.run", "model", "info", "--model", "m"]),
            (13, 1, ["mere.run", "model", "list"]),
            (14, 1, ["mere.run", "text", "chat", "--help"]),
            (15, 1, ["mere.run"]),
            (16, 1, ["vim", "mere.run"]),
            (17, 1, ["/build/mere.run", "text", "chat", "--model", "m"]),
            (18, 1, ["mere.run", "model", "benchmark", "--model", "m"]),
        ]
        got = bc.competing_processes(procs, exclude_pids={18})
        self.assertEqual([p["pid"] for p in got], [17])

    def test_own_descendants_are_not_competing(self):
        procs = [(500, 1, ["python3"]), (501, 500, ["mere.run", "text", "chat", "--model", "m"]),
                 (502, 501, ["mere.run", "text", "chat", "--model", "m"])]
        self.assertEqual(bc.descendants(procs, 500), {501, 502})


class MonitoringTest(CollectorTestCase):
    def check_critical(self, *extra):
        self.probes.psi = [QUIET_PSI, QUIET_PSI, CRITICAL_PSI]  # admission, first poll, then a full stall
        rc = self.run_collector(*extra)
        self.assertEqual(rc, bc.EXIT_CRITICAL)
        self.assertEqual(len(self.launcher.children), 1)
        self.assertTrue(self.launcher.children[0].terminated)
        self.assertEqual(self.output_files(), [])  # no receipt, no logs
        self.assertTrue(any("critical memory pressure" in m for m in self.messages), self.messages)

    def test_critical_pressure_terminates_and_writes_nothing_quiet(self):
        self.check_critical()

    def test_critical_pressure_terminates_and_writes_nothing_desktop(self):
        self.check_critical("--allow-desktop-load")

    def test_swap_growth_is_critical(self):
        base = {"MemTotal": 64 * GiB, "MemAvailable": 48 * GiB, "SwapTotal": 8 * GiB, "SwapFree": 8 * GiB}
        grown = dict(base, SwapFree=8 * GiB - (600 << 20))
        self.probes.mem = [base, base, grown]
        rc = self.run_collector("--allow-desktop-load")
        self.assertEqual(rc, bc.EXIT_CRITICAL)
        self.assertTrue(self.launcher.children[0].terminated)
        self.assertEqual(self.output_files(), [])

    def test_interrupted_monitoring_terminates_the_child(self):
        def interrupted(pid):
            raise KeyboardInterrupt
        self.probes.process_memory = interrupted
        with self.assertRaises(KeyboardInterrupt):
            self.run_collector()
        self.assertTrue(self.launcher.children[0].terminated)
        self.assertEqual(self.output_files(), [])

    def test_replaced_binary_is_rejected(self):
        state = {"replaced": False}
        self.probes.hashes["mere.run"] = lambda: "ff" * 32 if state["replaced"] else "c0" * 32
        launcher = FakeLauncher(self.clock, on_launch=lambda child: state.update(replaced=True))
        rc = self.run_collector(launcher=launcher)
        self.assertEqual(rc, bc.EXIT_ERROR)
        self.assertEqual(self.output_files(), [])
        self.assertTrue(any("changed during the measurement" in m for m in self.messages), self.messages)

    def test_contended_run_keeps_receipt_but_exits_nonzero(self):
        rival = (99, 1, ["/usr/local/bin/mere.run", "text", "generate", "--model", "m", "--prompt", "hi"])
        self.probes.procs = [[], [], [rival]]  # quiet at admission, a rival appears during the run
        rc = self.run_collector()
        self.assertEqual(rc, bc.EXIT_CONTENDED)
        r = self.receipt()["receipt"]
        self.assertEqual(r["measurementMode"], "quiet-window")
        self.assertFalse(r["uncontended"])
        self.assertEqual(r["competingProcessesBefore"], 0)
        self.assertEqual(r["competingProcessesMaxDuring"], 1)
        self.assertEqual(r["competingProcessesSeen"][0]["pid"], 99)
        self.assertTrue(any("exclude them from conclusions" in m for m in self.messages))

    def test_foreign_cpu_during_run_is_contention(self):
        self.probes.foreign_cpu_seconds = 16.0  # 40% of 4 CPUs x 10 s
        self.assertEqual(self.run_collector(), bc.EXIT_CONTENDED)
        r = self.receipt()["receipt"]
        self.assertEqual(r["foreignCpuPercent"], 40.0)
        self.assertFalse(r["uncontended"])
        self.assertTrue(any("other processes kept 40% of the CPUs busy" in c for c in r["contentionReasons"]))

    def test_quiet_run_records_small_foreign_cpu(self):
        self.assertEqual(self.run_collector(), 0)
        self.assertEqual(self.receipt()["receipt"]["foreignCpuPercent"], 1.2)

    def test_foreign_cpu_percent(self):
        self.assertEqual(bc.foreign_cpu_percent((0, 0), (300, 400), 100, 1.0), 50.0)
        self.assertEqual(bc.foreign_cpu_percent((0, 0), (100, 400), 100, 5.0), 0.0)  # never negative
        self.assertIsNone(bc.foreign_cpu_percent(None, (1, 2), 100, 0.0))
        self.assertIsNone(bc.foreign_cpu_percent((5, 10), (5, 10), 100, 0.0))

    def test_elevated_pressure_during_run_is_contention(self):
        self.probes.psi = [QUIET_PSI, {"some": {"avg10": 30.0}, "full": {"avg10": 2.0}}]
        self.assertEqual(self.run_collector(), bc.EXIT_CONTENDED)
        r = self.receipt()["receipt"]
        self.assertEqual(r["maxPressureLevel"], "elevated")
        self.assertFalse(r["uncontended"])

    def test_child_failure_points_at_saved_stderr(self):
        rc = self.run_collector(launcher=FakeLauncher(self.clock, rc=1))
        self.assertEqual(rc, bc.EXIT_ERROR)
        self.assertEqual(self.output_files(), ["code.stderr.log"])
        msg = next(m for m in self.messages if "exited with 1" in m)
        self.assertIn(os.path.join(self.out, "code.stderr.log"), msg)
        with open(os.path.join(self.out, "code.stderr.log")) as f:
            self.assertIn("boom", f.read())

    def test_existing_receipt_is_an_error(self):
        os.makedirs(self.out)
        with open(os.path.join(self.out, "chat.json"), "w") as f:
            f.write("{}")
        rc = self.run_collector(workloads=("code", "chat"))
        self.assertEqual(rc, bc.EXIT_ERROR)
        self.assertEqual(self.launcher.launches, [])

    def test_one_process_per_workload(self):
        rc = self.run_collector(workloads=("code", "math", "summary"))
        self.assertEqual(rc, bc.EXIT_OK, self.messages)
        self.assertEqual(len(self.launcher.launches), 3)
        self.assertEqual(self.output_files(), ["code.json", "math.json", "summary.json"])
        self.assertEqual(self.receipt("math")["receipt"]["prompt"], bc.WORKLOADS["math"])


class EnvironmentTest(CollectorTestCase):
    def test_runtime_variables_stripped_and_flags_added_back(self):
        self.probes.env.update({"MERERUN_Q35_MTP_SPECULATION": "0", "MERERUN_Q35_MTP_BLOCK_SIZE": "3",
                                "MERERUN_Q35_SCOPED_COMPILE": "1", "MERERUN_OTHER": "kept"})
        rc = self.run_collector("--block-size", "6", "--async-blocks", "1", "--pipelined-fallback", "0",
                                "--cost-ratio", "0.25", "--profile")
        self.assertEqual(rc, bc.EXIT_OK, self.messages)
        argv, env = self.launcher.launches[0]
        want = {"MERERUN_Q35_MTP_BLOCK_SIZE": "6", "MERERUN_Q35_ASYNC_DECODE_BLOCKS": "1",
                "MERERUN_Q35_MTP_PIPELINED_FALLBACK": "0", "MERERUN_Q35_MTP_HEAD_COST_RATIO": "0.25",
                "MERERUN_Q35_MTP_PROFILE": "1"}
        self.assertEqual({k: v for k, v in env.items() if k.startswith("MERERUN_Q35_")}, want)
        self.assertEqual(env["PATH"], "/usr/bin")
        self.assertEqual(env["MERERUN_OTHER"], "kept")
        r = self.receipt()["receipt"]
        self.assertEqual(r["runtimeOverrides"], want)
        self.assertTrue(r["profiled"])
        self.assertIn("--profile", argv)
        self.assertEqual(argv[argv.index("--block-size") + 1], "6")

    def test_no_flags_means_no_runtime_variables(self):
        self.probes.env.update({"MERERUN_Q35_MTP_SPECULATION": "1"})
        self.assertEqual(self.run_collector(), bc.EXIT_OK)
        _argv, env = self.launcher.launches[0]
        self.assertFalse([k for k in env if k.startswith("MERERUN_Q35_")])
        self.assertEqual(self.receipt()["receipt"]["runtimeOverrides"], {})
        self.assertFalse(self.receipt()["receipt"]["profiled"])

    def test_variant_order_is_passed_through(self):
        self.assertEqual(self.run_collector("--variants", "adaptive,baseline,forced"), bc.EXIT_OK)
        argv, _env = self.launcher.launches[0]
        self.assertEqual(argv[argv.index("--variants") + 1], "adaptive,baseline,forced")

    def test_unknown_variant_is_a_usage_error(self):
        with self.assertRaises(SystemExit) as cm, open(os.devnull, "w") as devnull:
            import contextlib
            with contextlib.redirect_stderr(devnull):
                self.run_collector("--variants", "baseline,turbo")
        self.assertEqual(cm.exception.code, 2)

    def test_model_name_resolves_under_source_root(self):
        os.makedirs(os.path.join(self.tmp, "models", "qwen35-dense-tiny"))
        launcher = FakeLauncher(self.clock)
        argv = ["--binary", self.binary, "--model", "qwen35-dense-tiny", "--output", self.out, "--source-root",
                self.tmp, "--workloads", "code", "--tokens", "16"]
        rc = bc.main(argv, probes=self.probes, launcher=launcher, clock=self.clock, log=self.messages.append)
        self.assertEqual(rc, bc.EXIT_OK, self.messages)
        got = launcher.launches[0][0]
        self.assertEqual(got[got.index("--model") + 1], os.path.join(self.tmp, "models", "qwen35-dense-tiny"))


class ParityTest(CollectorTestCase):
    def test_parity_mismatch_is_flagged(self):
        launcher = FakeLauncher(self.clock, doc_for=lambda w: benchmark_doc(w, parity=False))
        rc = self.run_collector(launcher=launcher)
        self.assertEqual(rc, bc.EXIT_PARITY)
        r = self.receipt()["receipt"]
        self.assertIs(r["greedyOutputParity"], False)
        self.assertTrue(any("parity FAILED" in m for m in self.messages), self.messages)
        text = bc.summarize(bc.load_receipts(self.out))
        self.assertIn("**NO**", text)

    def test_sampled_runs_have_no_parity(self):
        launcher = FakeLauncher(self.clock, doc_for=lambda w: benchmark_doc(w, parity=None))
        self.assertEqual(self.run_collector("--temperature", "0.7", launcher=launcher), bc.EXIT_OK)
        self.assertIsNone(self.receipt()["receipt"]["greedyOutputParity"])


class ParsingTest(unittest.TestCase):
    def test_psi(self):
        psi = bc.parse_psi("some avg10=1.50 avg60=0.20 avg300=0.00 total=1234\n"
                           "full avg10=0.25 avg60=0.00 avg300=0.00 total=99\n")
        self.assertEqual(psi["some"]["avg10"], 1.5)
        self.assertEqual(psi["full"]["total"], 99)
        self.assertIsNone(bc.parse_psi(None))

    def test_meminfo(self):
        m = bc.parse_meminfo("MemTotal:       16384 kB\nMemFree: 1 kB\nMemAvailable:    8192 kB\n"
                             "SwapTotal:  1024 kB\nSwapFree:  512 kB\n")
        self.assertEqual(m, {"MemTotal": 16384 * 1024, "MemAvailable": 8192 * 1024, "SwapTotal": 1024 * 1024,
                             "SwapFree": 512 * 1024})
        self.assertEqual(bc.swap_used(m), 512 * 1024)

    def test_nvidia_smi(self):
        g = bc.parse_nvidia_smi("0, NVIDIA H200, 570.86.15, 7, 1024, 143771\n1, NVIDIA H200, 570.86.15, [N/A], 0, 143771\n")
        self.assertEqual(g[0]["name"], "NVIDIA H200")
        self.assertEqual(g[0]["utilizationPercent"], 7.0)
        self.assertIsNone(g[1]["utilizationPercent"])
        self.assertEqual(g[1]["index"], 1)

    def test_proc_stat(self):
        self.assertEqual(bc.parse_proc_stat_cpu("cpu  10 0 5 80 5 0 0 0 0 0\ncpu0 1 2 3 4\n"), (15, 100))
        self.assertIsNone(bc.parse_proc_stat_cpu(""))

    def test_proc_status(self):
        m = bc.parse_proc_status_memory("Name:\tmere.run\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n")
        self.assertEqual(m, {"residentBytes": 1 << 20, "peakResidentBytes": 2 << 20})

    def test_pressure_levels(self):
        mem = {"MemTotal": 100 * GiB, "MemAvailable": 50 * GiB, "SwapTotal": 0, "SwapFree": 0}
        self.assertEqual(bc.pressure_level(QUIET_PSI, mem, 0)[0], "normal")
        self.assertEqual(bc.pressure_level(None, mem, None)[0], "normal")  # no PSI on this kernel
        self.assertEqual(bc.pressure_level({"some": {"avg10": 12.0}}, mem, 0)[0], "elevated")
        self.assertEqual(bc.pressure_level(QUIET_PSI, dict(mem, MemAvailable=5 * GiB), 0)[0], "elevated")
        self.assertEqual(bc.pressure_level(CRITICAL_PSI, mem, 0)[0], "critical")
        self.assertEqual(bc.max_level("elevated", "normal"), "elevated")
        self.assertEqual(bc.max_level("elevated", "critical"), "critical")


class SummarizeTest(unittest.TestCase):
    def summary(self):
        return bc.summarize(bc.load_receipts(FIXTURES))

    def test_tables_from_fixture_receipts(self):
        text = self.summary()
        lines = text.splitlines()
        self.assertIn("## qwen35-dense-tiny", lines)
        header = next(l for l in lines if l.startswith("| workload | baseline decode"))
        self.assertEqual(header, "| workload | baseline decode tok/s | adaptive decode tok/s | baseline request tok/s | "
                                 "adaptive request tok/s | baseline TTFT ms | adaptive TTFT ms | adaptive/baseline | "
                                 "measurement |")
        code = next(l for l in lines if l.startswith("| code | 12.1"))
        self.assertEqual(code, "| code | 12.1 (11.8–12.4) | 28.8 (28.1–29.5) | 11.0 (10.8–11.2) | 25.0 (24.0–26.0) | "
                               "50.0 (49.0–52.0) | 60.0 (59.0–61.0) | 2.38× | quiet |")
        math = next(l for l in lines if l.startswith("| math | 11.2"))
        self.assertTrue(math.endswith("| 2.12× | desktop-load, contended ⚠ |"), math)
        self.assertLess(lines.index(code), lines.index(math))  # canonical workload order
        self.assertIn("| code | adaptive | mtp | 0.67 | 3.00 | 300 | 900 | 600 | 0 | yes |", lines)
        self.assertIn("| math | adaptive | mtp, pipelined-fallback | 0.54 | 2.58 | 190 | 560 | 300 | 1 | **NO** |", lines)
        self.assertIn("| code | baseline | serial | – | – | 0 | 0 | 0 | 0 | yes |", lines)
        self.assertIn("exclude them from conclusions", text)

    def test_summarize_command(self):
        out = io.StringIO()
        rc = bc.main(["summarize", FIXTURES], stdout=out)
        self.assertEqual(rc, 0)
        self.assertEqual(out.getvalue(), self.summary())

    def test_subfolders_and_order_controls(self):
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "m", "reversed"))
            with open(os.path.join(FIXTURES, "code.json"), encoding="utf-8") as f:
                doc = json.load(f)
            with open(os.path.join(d, "m", "code.json"), "w", encoding="utf-8") as f:
                json.dump(doc, f)
            doc["scenarios"][0]["variants"].reverse()  # the order control: adaptive ran first
            with open(os.path.join(d, "m", "reversed", "code.json"), "w", encoding="utf-8") as f:
                json.dump(doc, f)
            lines = bc.summarize(bc.load_receipts(d)).splitlines()
            self.assertEqual(len([l for l in lines if l.startswith("| code | 12.1")]), 1)
            reversed_row = next(l for l in lines if l.startswith("| code (order adaptive → baseline) |"))
            self.assertIn("2.38×", reversed_row)

    def test_empty_folder(self):
        with tempfile.TemporaryDirectory() as d:
            self.assertIn("No receipts", bc.summarize(bc.load_receipts(d)))

    def test_bench_and_verify_bench_tables(self):
        bench = {"model": {"layers": 64, "hidden": 5120, "moe": False}, "settings": {"backend": "cuda"},
                 "machine": {"copy_bandwidth_gb_s": 4200.0},
                 "runs": [{"depth": 0, "prefill_tok_s": {"median": 4100.0, "min": 4090.0, "max": 4110.0},
                           "decode_tok_s": {"median": 95.1, "min": 95.0, "max": 95.2},
                           "decode_weight_gb_s": {"median": 1370.0, "min": 1369.0, "max": 1371.0},
                           "decode_pct_of_copy_bw": 32.6}],
                 "memory": {"gpu": {"over_weights_kv_state_gib": 0.8}}}
        verify = {"target_step_ms": {"median": 10.0, "min": 9.9, "max": 10.1},
                  "head_step_ms": {"median": 0.6, "min": 0.6, "max": 0.7}, "head_cost_ratio": 0.06,
                  "widths": [{"width": 1, "tokens_per_s": {"median": 80.0, "min": 79.0, "max": 81.0},
                              "pass_ms": {"median": 12.5, "min": 12.4, "max": 12.6}, "oracle_mismatches": 0,
                              "speedup_vs_width1": 1.0},
                             {"width": 8, "tokens_per_s": {"median": 480.0, "min": 470.0, "max": 490.0},
                              "pass_ms": {"median": 16.7, "min": 16.6, "max": 16.8}, "oracle_mismatches": 0,
                              "speedup_vs_width1": 6.0}],
                  "parity": [{"depth": 1, "equal": True}, {"depth": 2, "equal": False}]}
        with tempfile.TemporaryDirectory() as d:
            shutil.copy(os.path.join(FIXTURES, "code.json"), os.path.join(d, "code.json"))
            for name, doc in (("bench-synth-27b.json", bench), ("verify-bench-synth-27b.json", verify)):
                with open(os.path.join(d, name), "w", encoding="utf-8") as f:
                    json.dump(doc, f)
            with open(os.path.join(d, "broken.json"), "w", encoding="utf-8") as f:
                f.write("{not json")
            out = io.StringIO()
            self.assertEqual(bc.main(["summarize", d], stdout=out), 0)
            lines = out.getvalue().splitlines()
            self.assertIn("## qwen35-dense-tiny", lines)  # the receipts' tables come first
            self.assertIn("| bench-synth-27b.json | 64 layers, hidden 5120 | cuda | 0 | 4100.0 (4090.0–4110.0) | "
                          "95.1 (95.0–95.2) | 1370 (1369–1371) | 32.6% | 4200 | 0.80 GiB |", lines)
            self.assertIn("| verify-bench-synth-27b.json | 8 | 480.0 (470.0–490.0) | 6.00× | 16.70 (16.60–16.80) | 0 |",
                          lines)
            note = next(l for l in lines if l.startswith("* verify-bench-synth-27b.json"))
            self.assertIn("= 0.060 of a target step", note)
            self.assertIn("depths 1,2: 1/2 equal **(DIFFERS)**", note)


if __name__ == "__main__":
    unittest.main()
