// `mere.run model verify-bench`: oracle-fed verification throughput by pass width and the MTP head's
// cost against a target step (src/runtime/verify_bench.h; issue 7's speed criterion).
#include <cstdio>
#include <sstream>

#include "cli/command.h"
#include "core/error.h"
#include "core/json.h"
#include "core/thread_pool.h"
#include "model/qwen35.h"
#include "runtime/verify_bench.h"

namespace mere::cli {
namespace {

std::vector<int64_t> parse_widths(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t pos = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &pos);
    } catch (const std::exception&) {
      pos = std::string::npos;
    }
    MERE_CHECK(pos == item.size() && !item.empty(), "verify-bench", "--widths: expected comma-separated integers, got \"",
               s, "\"");
    out.push_back(v);
  }
  return out;
}

int run(const Args& a) {
  VerifyBenchOptions o;
  o.widths = parse_widths(a.get("widths", "1,4,8,9"));
  o.prompt_tokens = a.get_int("prompt-tokens", 512);
  o.passes = a.get_int("passes", 16);
  o.reps = a.get_int("reps", 5);
  if (a.has("parity-depths")) o.parity_depths = parse_widths(a.get("parity-depths"));
  o.parity_tokens = a.get_int("parity-tokens", 64);
  for (int64_t d : o.parity_depths)
    MERE_CHECK(d >= 1 && d <= 15, "verify-bench", "--parity-depths: each depth must be in 1..15, got ", d);
  const int64_t threads = a.get_int("threads", 0);
  MERE_CHECK(threads >= 0 && threads <= 1024, "verify-bench", "--threads: expected 0..1024, got ", threads);
  if (threads > 0) set_default_threads(static_cast<int>(threads));
  const bool quiet = a.flag("quiet");
  auto model = Qwen35Model::load(a.require("model"), a.get("backend", "cpu"));
  Json doc = run_verify_bench(*model, o, [&](const std::string& line) {
    if (!quiet) std::fprintf(stderr, "[verify-bench] %s\n", line.c_str());
  });
  doc["model"] = a.require("model");
  doc["backend"] = model->backend().name();
  bool ok = true;
  for (const Json& w : doc.at("widths").as_array()) ok = ok && w.at("oracle_mismatches").as_int() == 0;
  if (const Json* par = doc.find("parity"))
    for (const Json& p : par->as_array()) ok = ok && p.at("equal").as_bool();
  if (a.flag("json")) {
    const JsonDumpOptions pretty{2, ",", ": "};  // aggregate init (GCC 12 -O3 misreads member-wise string assignment)
    std::printf("%s\n", doc.dump(pretty).c_str());
    return ok ? 0 : 1;
  }
  std::printf("width  tokens/s median [min-max]      pass ms   vs width 1  oracle mismatches\n");
  for (const Json& w : doc.at("widths").as_array()) {
    const Json& t = w.at("tokens_per_s");
    std::printf("%5lld  %10.1f [%.1f-%.1f]  %9.3f  %9.2fx  %lld\n", static_cast<long long>(w.at("width").as_int()),
                t.at("median").as_number(), t.at("min").as_number(), t.at("max").as_number(),
                w.at("pass_ms").at("median").as_number(),
                w.at("speedup_vs_width1").is_null() ? 0.0 : w.at("speedup_vs_width1").as_number(),
                static_cast<long long>(w.at("oracle_mismatches").as_int()));
  }
  std::printf("target step %.3f ms", doc.at("target_step_ms").at("median").as_number());
  if (doc.contains("head_cost_ratio"))
    std::printf("; MTP head step %.3f ms = %.3f of a target step", doc.at("head_step_ms").at("median").as_number(),
                doc.at("head_cost_ratio").as_number());
  std::printf("\n");
  if (const Json* par = doc.find("parity")) {
    for (const Json& p : par->as_array())
      std::printf("parity, forced depth %lld: %s (%lld rounds, %lld/%lld drafts accepted)\n",
                  static_cast<long long>(p.at("depth").as_int()),
                  p.at("equal").as_bool() ? "equal"
                                          : cat("DIVERGES at token ", p.at("first_divergence").as_int()).c_str(),
                  static_cast<long long>(p.at("rounds").as_int()), static_cast<long long>(p.at("accepted").as_int()),
                  static_cast<long long>(p.at("drafted").as_int()));
  }
  return ok ? 0 : 1;
}

}  // namespace

MERE_COMMAND(Command{
    "model verify-bench",
    "oracle-fed MTP verification throughput by pass width, and the head's cost vs a target step",
    "A greedy continuation is decoded serially first; every width then re-runs it from the same\n"
    "prefilled state in passes of that many rows (all drafts accepted), checking each row against\n"
    "the serial decode. Speedup = tokens/s of width w over width 1. --parity-depths adds greedy\n"
    "parity runs with MTP forced at each depth. Exit 1 when any row or parity run differs.\n"
    "See docs/speculation.md.",
    {
        {"model", "DIR", "model directory (required)", ""},
        {"widths", "LIST", "comma-separated pass widths (1..16)", "1,4,8,9"},
        {"prompt-tokens", "N", "context prefilled before the passes", "512"},
        {"passes", "N", "passes per repetition and width (>= 2; the first is not timed)", "16"},
        {"reps", "N", "measured repetitions (after one warm-up)", "5"},
        {"parity-depths", "LIST", "also check greedy parity with MTP forced at these depths (comma-separated)", ""},
        {"parity-tokens", "N", "greedy tokens per parity run (EOS ignored)", "64"},
        {"backend", "NAME", "compute backend: ref, cpu (or cuda where built)", "cpu"},
        {"threads", "N", "CPU worker threads (0: physical cores)", "0"},
        {"json", "", "print one JSON document on stdout", ""},
        {"quiet", "", "no progress on stderr", ""},
    },
    run,
});

}  // namespace mere::cli
