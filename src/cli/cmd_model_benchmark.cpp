// `mere.run model benchmark`: loads one model and runs fixed-length generation scenarios x variants
// (baseline / adaptive / forced MTP) x warm-ups + repetitions, printing one JSON document on stdout
// (progress on stderr). The collector scripts/benchmark-q35-generation.py wraps it into receipts.
// Flags and the JSON schema: docs/benchmark.md.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "core/error.h"
#include "core/string_list.h"
#include "core/thread_pool.h"
#include "model/generation_config.h"
#include "runtime/benchmark.h"

namespace mere::cli {
namespace {

std::string model_name(const std::string& dir) {
  std::filesystem::path p = std::filesystem::path(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

Json workloads_json() {
  Json j = Json::array();
  for (const auto& w : builtin_workloads()) {
    Json o = Json::object();
    o["name"] = w.name;
    o["prompt"] = w.prompt;
    j.push_back(std::move(o));
  }
  return j;
}

BenchmarkOptions parse_options(const Args& a) {
  BenchmarkOptions o;
  MERE_CHECK(!(a.has("prompt") && a.has("workloads")), "model benchmark",
             "--prompt and --workloads: expected one of them, got both");
  if (a.has("prompt")) {
    MERE_CHECK(!a.get("prompt").empty(), "model benchmark", "--prompt: expected some text, got an empty string");
    o.scenarios.push_back({a.get("scenario", "prompt"), a.get("prompt")});
  } else {
    MERE_CHECK(!a.has("scenario"), "model benchmark", "--scenario names a --prompt scenario: expected --prompt with it");
    const std::vector<std::string> names = split_list(a.get("workloads", "code,chat,prose,math,summary"));
    MERE_CHECK(!names.empty(), "model benchmark", "--workloads: expected a comma-separated list, got an empty one");
    for (const auto& n : names) o.scenarios.push_back(builtin_workload(n));
  }
  o.chat_template = !a.flag("no-chat-template");
  o.variants.clear();
  for (const auto& v : split_list(a.get("variants", "baseline,adaptive"))) {
    const BenchmarkVariant bv = parse_variant(v);
    for (BenchmarkVariant seen : o.variants)
      MERE_CHECK(seen != bv, "model benchmark", "--variants: expected each variant once, got \"", v, "\" twice");
    o.variants.push_back(bv);
  }
  MERE_CHECK(!o.variants.empty(), "model benchmark", "--variants: expected at least one of baseline, adaptive, forced");
  o.tokens = a.get_int("tokens", 256);
  o.warmups = a.get_int("warmups", 1);
  o.warmup_tokens = a.get_int("warmup-tokens", o.tokens);
  o.repetitions = a.get_int("repetitions", 3);
  const std::string order = a.get("order", "interleaved");
  MERE_CHECK(order == "interleaved" || order == "grouped", "model benchmark",
             "--order: expected interleaved or grouped, got \"", order, "\"");
  o.interleave = order == "interleaved";
  o.temperature = static_cast<float>(a.get_double("temperature", 0.0));
  o.top_p = static_cast<float>(a.get_double("top-p", 1.0));
  const int64_t seed = a.get_int("seed", 0);
  MERE_CHECK(seed >= 0, "model benchmark", "--seed: expected >= 0, got ", seed);
  o.seed = static_cast<uint64_t>(seed);
  o.context = a.get_int("context", 8192);
  if (a.has("block-size")) {
    const int64_t b = a.get_int("block-size", 0);
    MERE_CHECK(b >= 2 && b <= 64, "model benchmark", "--block-size: expected an integer in 2..64, got ", b);
    o.block_size = static_cast<int>(b);
  }
  if (a.has("cost-ratio")) {
    const double c = a.get_double("cost-ratio", 0.18);
    MERE_CHECK(std::isfinite(c) && c > 0 && c <= 5, "model benchmark", "--cost-ratio: expected 0 < X <= 5, got ", c);
    o.cost_ratio = c;
  }
  o.profile = a.flag("profile");
  return o;
}

void print_table(const Json& doc) {
  const Json& m = doc.at("model");
  std::printf("model %s (%s backend), %lld tokens per request, %lld repetitions\n", m.at("name").as_string().c_str(),
              m.at("backend").as_string().c_str(), (long long)doc.at("settings").at("tokens").as_int(),
              (long long)doc.at("settings").at("repetitions").as_int());
  for (const Json& sc : doc.at("scenarios").as_array()) {
    std::printf("\n%s\n  %-10s %-26s %-26s %-12s %-20s %s\n", sc.at("name").as_string().c_str(), "variant",
                "decode tok/s (min-max)", "request tok/s (min-max)", "TTFT ms", "route", "acceptance");
    for (const Json& v : sc.at("variants").as_array()) {
      const Json& s = v.at("summary");
      auto range = [](const Json& x) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.1f (%.1f-%.1f)", x.at("median").as_number(), x.at("min").as_number(),
                      x.at("max").as_number());
        return std::string(buf);
      };
      std::string routes;
      for (const auto& [route, n] : s.at("acceleration").at("routes").as_object())
        routes += (routes.empty() ? "" : ",") + route;
      std::printf("  %-10s %-26s %-26s %-12.1f %-20s %.2f\n", v.at("variant").as_string().c_str(),
                  range(s.at("decodeTokensPerSecond")).c_str(), range(s.at("endToEndTokensPerSecond")).c_str(),
                  s.at("ttftSeconds").at("median").as_number() * 1e3, routes.c_str(),
                  s.at("acceleration").at("acceptanceRate").as_number());
    }
    for (const auto& [name, sp] : sc.at("speedups").as_object())
      std::printf("  %s/baseline: decode %.2fx, request %.2fx\n", name.c_str(), sp.at("decode").as_number(),
                  sp.at("endToEnd").as_number());
    const Json& parity = sc.at("greedyOutputParity");
    std::printf("  greedy output parity: %s\n", parity.is_null() ? "n/a (sampled)" : parity.as_bool() ? "yes" : "NO");
  }
}

int run_model_benchmark(const Args& a) {
  if (a.flag("list-workloads")) {
    std::printf("%s\n", workloads_json().dump(JsonDumpOptions{2}).c_str());
    return 0;
  }
  const std::string dir = a.require("model");
  MERE_CHECK(!(a.flag("json") && a.flag("no-json")), "model benchmark", "--json and --no-json contradict each other");
  const BenchmarkOptions opt = parse_options(a);
  const bool quiet = a.flag("quiet");
  const std::string backend = a.get("backend", "cpu");
  const int64_t threads = a.get_int("threads", 0);
  MERE_CHECK(threads >= 0 && threads <= 1024, "model benchmark", "--threads: expected 0..1024 (0: physical cores), got ",
             threads);
  if (threads > 0) set_default_threads(static_cast<int>(threads));

  const ResidentMemory at_start = read_resident_memory();
  const auto t0 = std::chrono::steady_clock::now();
  const Tokenizer tok = Tokenizer::from_dir(dir);
  std::optional<ChatTemplate> tmpl;
  if (opt.chat_template) tmpl.emplace(ChatTemplate::from_model_dir(dir));
  const GenerationConfig gc = GenerationConfig::load(dir);
  auto model = Qwen35Model::load(dir, backend);
  const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const ResidentMemory after_load = read_resident_memory();
  if (!quiet)
    std::fprintf(stderr, "[benchmark] loaded %s (%s backend) in %.2f s\n", dir.c_str(), model->backend().name().c_str(),
                 load_seconds);

  auto progress = [&](const std::string& line) {
    if (quiet) return;
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  };
  Json doc = run_benchmark(*model, tok, tmpl ? &*tmpl : nullptr, gc.eos_token_ids, opt, progress);
  const ResidentMemory at_end = read_resident_memory();

  const ModelConfig& c = model->config();
  Json mj = Json::object();
  mj["name"] = model_name(dir);
  mj["path"] = std::filesystem::absolute(dir).lexically_normal().string();
  mj["architecture"] = c.architecture;
  mj["modelType"] = c.model_type;
  mj["isMoe"] = c.is_moe;
  mj["hasMtp"] = model->has_mtp();
  mj["layers"] = c.num_layers;
  mj["hiddenSize"] = c.hidden_size;
  mj["vocabSize"] = c.vocab_size;
  mj["quantBits"] = c.quant.bits;
  mj["backend"] = model->backend().name();
  mj["threads"] = default_threads();
  mj["loadSeconds"] = load_seconds;
  Json pj = Json::object();
  pj["residentBytesAtStart"] = at_start.resident_bytes;
  pj["residentBytesAfterLoad"] = after_load.resident_bytes;
  pj["residentBytesAtEnd"] = at_end.resident_bytes;
  pj["peakResidentBytes"] = at_end.peak_resident_bytes;

  Json out = Json::object();
  out["schema"] = "mere.run/model-benchmark/1";
  out["model"] = std::move(mj);
  out["settings"] = doc.at("settings");
  out["environment"] = runtime_environment_json();
  out["process"] = std::move(pj);
  out["scenarios"] = doc.at("scenarios");
  if (a.flag("no-json")) {
    print_table(out);
  } else {
    JsonDumpOptions d;
    d.indent = 2;
    std::printf("%s\n", out.dump(d).c_str());
  }
  std::fflush(stdout);
  return 0;
}

Command make() {
  return Command{
      "model benchmark",
      "measure generation speed: scenarios x variants (baseline/adaptive/forced MTP) x repetitions, as JSON",
      "Requests are fixed-length (EOS ignored), sent through the model's chat template with thinking off,\n"
      "with no prefix cache and no batching. Every variant runs its warm-ups, then the measured repetitions\n"
      "run in rounds of one request per variant, in --variants order (--order grouped: each variant's\n"
      "warm-ups and repetitions before the next variant's). baseline = MTP off;\n"
      "adaptive = model defaults (MERERUN_Q35_* honoured); forced = MTP admitted where the defaults would\n"
      "not. Progress goes to stderr. See docs/benchmark.md.",
      {{"model", "DIR", "model directory", ""},
       {"workloads", "LIST", "comma-separated built-in workloads: code, chat, prose, math, summary", "all five"},
       {"prompt", "TEXT", "benchmark this user message instead of the built-in workloads", ""},
       {"scenario", "NAME", "scenario name for --prompt", "prompt"},
       {"no-chat-template", "", "tokenise the prompt as is (no chat template)", ""},
       {"list-workloads", "", "print the built-in workloads as JSON and exit", ""},
       {"tokens", "N", "generated tokens per measured request", "256"},
       {"warmups", "N", "warm-up requests per scenario and variant", "1"},
       {"warmup-tokens", "N", "generated tokens per warm-up request", "--tokens"},
       {"repetitions", "N", "measured requests per scenario and variant", "3"},
       {"variants", "LIST", "comma-separated variants in run order: baseline, adaptive, forced", "baseline,adaptive"},
       {"order", "ORDER", "interleaved (repetition i of every variant, then i + 1) or grouped (variant by variant)",
        "interleaved"},
       {"temperature", "T", "sampling temperature; 0 = greedy", "0"},
       {"top-p", "P", "nucleus sampling mass in (0, 1]", "1"},
       {"seed", "N", "request RNG seed (the same for every request)", "0"},
       {"context", "N", "context limit in tokens", "8192"},
       {"block-size", "N", "MTP block size B for adaptive/forced (overrides MERERUN_Q35_MTP_BLOCK_SIZE)", ""},
       {"cost-ratio", "X", "MTP draft-cost ratio c for adaptive/forced (overrides MERERUN_Q35_MTP_HEAD_COST_RATIO)", ""},
       {"profile", "", "synchronised MTP phase timings (changes scheduling: not for throughput)", ""},
       {"backend", "NAME", "compute backend (ref, cpu, cuda)", "cpu"},
       {"threads", "N", "CPU worker threads (0: the physical cores)", "0"},
       {"json", "", "print the JSON document (the default)", ""},
       {"no-json", "", "print a human-readable table instead of JSON", ""},
       {"quiet", "", "no progress lines on stderr", ""}},
      run_model_benchmark};
}
MERE_COMMAND(make());

}  // namespace
}  // namespace mere::cli
