// The generation benchmark: fixed workloads, the request loop (template -> tokenise -> Generator ->
// streamed detokenisation, timed as one request), per-variant summaries (median/min/max), speedups
// over baseline and greedy output parity. Field names and definitions: docs/benchmark.md.
#include "runtime/benchmark.h"

#include <algorithm>
#include <cstdarg>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"
#include "core/sha256.h"

extern char** environ;

namespace mere {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
double ratio(double num, double den) { return den > 0 ? num / den : 0.0; }

const char* kSummaryLog =
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
    "order-history path.";

std::vector<BenchmarkWorkload> make_builtin_workloads() {
  return {
      {"code",
       "Write a complete Python implementation of an LRU cache built on a dict plus a doubly linked list. Use "
       "type hints throughout, make get(key) and put(key, value) run in O(1) time with a fixed capacity that "
       "evicts the least recently used entry, and finish with a short usage example. Reply with code only, "
       "no explanation."},
      {"chat",
       "Hi! I used to read every evening, but over the last year I have barely finished a single book and I "
       "miss it. Could you help me get back into the habit? A friendly, encouraging answer with a simple "
       "four-week plan would be great."},
      {"prose",
       "Write about 400 words of connected prose, with no headings or lists, about a small community that "
       "turns its abandoned railway station into a public library: the people who led the effort, the work "
       "of restoring the building, and what the place means to the town once it opens."},
      {"math",
       "Derive a closed formula for the sum of the first n squares, 1^2 + 2^2 + ... + n^2, and prove it by "
       "mathematical induction, stating the base case and the inductive step clearly. Then check the "
       "formula for n = 10 by computing the sum directly."},
      {"summary", std::string("Summarise the following incident log for a manager in one short paragraph, then "
                              "give a bulleted list of actions with owners where the log suggests them.\n\n") +
                      kSummaryLog},
  };
}

// One request, timed like a served one: templating and tokenisation, prefill, decode with streamed
// detokenisation.
struct RequestResult {
  Json record;
  std::vector<int32_t> ids;
  std::string ids_sha, text_sha;
  int64_t generated = 0;
  double decode_tok_s = 0, end_to_end_tok_s = 0, ttft = 0, prefill_tok_s = 0;
  AccelerationStats accel;
};

RequestResult run_request(const Qwen35Model& model, const Tokenizer& tok, const ChatTemplate* tmpl,
                          std::span<const TokenId> eos_ids, const BenchmarkWorkload& w, const SamplingParams& params,
                          int64_t context, const SpeculationOptions& spec) {
  const ResidentMemory before = read_resident_memory();
  const auto t0 = Clock::now();
  std::string rendered = w.prompt;
  if (tmpl) {
    Json msg = Json::object();
    msg["role"] = "user";
    msg["content"] = w.prompt;
    Json messages = Json::array();
    messages.push_back(std::move(msg));
    ChatRenderOptions ro;
    ro.add_generation_prompt = true;
    ro.enable_thinking = false;
    rendered = tmpl->render(messages, ro);
  }
  const std::vector<int32_t> prompt_ids = tok.encode(rendered, EncodeOptions{});
  MERE_CHECK(!prompt_ids.empty(), "benchmark", w.name, ": the prompt encodes to zero tokens");
  const int64_t want = static_cast<int64_t>(prompt_ids.size()) + params.max_tokens.value_or(0);
  MERE_CHECK(want <= context, "benchmark", w.name, ": prompt (", prompt_ids.size(), " tokens) + generated tokens (",
             params.max_tokens.value_or(0), "): expected at most the context limit of ", context, ", got ", want,
             " (raise --context or lower --tokens)");
  const double load_seconds = since(t0);

  RequestResult r;
  std::string text;
  StreamDecoder dec(tok, /*skip_special=*/false);
  r.ids.reserve(static_cast<size_t>(params.max_tokens.value_or(0)));
  Generator gen(model);
  const GenerationStats st = gen.run(prompt_ids, params, eos_ids, context, [&](int32_t id) {
    r.ids.push_back(id);
    text += dec.push(id);
    return true;
  }, spec);
  text += dec.finish();
  const double elapsed = since(t0);
  const ResidentMemory after = read_resident_memory();

  r.generated = st.generated_tokens;
  r.ids_sha = sha256_hex_token_ids(r.ids);
  r.text_sha = sha256_hex(text);
  r.decode_tok_s = st.decode_tok_s();
  r.end_to_end_tok_s = ratio(static_cast<double>(st.generated_tokens), elapsed);
  r.ttft = load_seconds + st.ttft_seconds;
  r.prefill_tok_s = st.prefill_tok_s();
  r.accel = st.accel;

  Json& j = r.record;
  j = Json::object();
  j["promptTokens"] = st.prompt_tokens;
  j["generatedTokens"] = st.generated_tokens;
  j["finishReason"] = st.finish_reason;
  j["loadSeconds"] = load_seconds;
  j["prefillSeconds"] = st.prefill_seconds;
  j["decodeSeconds"] = st.decode_seconds;
  j["firstTokenSeconds"] = std::max(0.0, st.ttft_seconds - st.prefill_seconds);
  j["ttftSeconds"] = r.ttft;
  j["elapsedSeconds"] = elapsed;
  j["prefillTokensPerSecond"] = r.prefill_tok_s;
  j["decodeTokensPerSecond"] = r.decode_tok_s;
  j["endToEndTokensPerSecond"] = r.end_to_end_tok_s;
  j["outputSHA256"] = r.ids_sha;
  j["textSHA256"] = r.text_sha;
  j["textBytes"] = static_cast<int64_t>(text.size());
  j["seed"] = static_cast<int64_t>(st.seed & 0x7fffffffffffffffull);
  j["residentBytesBefore"] = before.resident_bytes;
  j["residentBytesAfter"] = after.resident_bytes;
  j["peakResidentBytesAfter"] = after.peak_resident_bytes;
  j["acceleration"] = acceleration_json(st.accel);
  j["graphCaptures"] = st.graph_captures;
  j["graphCaptureSeconds"] = st.graph_capture_seconds;
  return r;
}

Json summary_json(const SampleSummary& s) {
  Json j = Json::object();
  j["median"] = s.median;
  j["min"] = s.min;
  j["max"] = s.max;
  return j;
}

// First index where two id sequences differ (the shorter length when one is a prefix of the other).
int64_t first_divergence(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return static_cast<int64_t>(i);
  return static_cast<int64_t>(n);
}

std::string format_line(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format_line(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

}  // namespace

const std::vector<BenchmarkWorkload>& builtin_workloads() {
  static const std::vector<BenchmarkWorkload> w = make_builtin_workloads();
  return w;
}

const BenchmarkWorkload& builtin_workload(std::string_view name) {
  for (const auto& w : builtin_workloads())
    if (w.name == name) return w;
  fail("benchmark", cat("unknown workload \"", name, "\": expected code, chat, prose, math or summary"));
}

std::string_view variant_name(BenchmarkVariant v) {
  switch (v) {
    case BenchmarkVariant::Baseline: return "baseline";
    case BenchmarkVariant::Adaptive: return "adaptive";
    case BenchmarkVariant::Forced: return "forced";
  }
  return "baseline";
}

BenchmarkVariant parse_variant(std::string_view name) {
  if (name == "baseline") return BenchmarkVariant::Baseline;
  if (name == "adaptive") return BenchmarkVariant::Adaptive;
  if (name == "forced") return BenchmarkVariant::Forced;
  fail("benchmark", cat("unknown variant \"", name, "\": expected baseline, adaptive or forced"));
}

SpeculationOptions variant_speculation(BenchmarkVariant v, const BenchmarkOptions& opt) {
  if (v == BenchmarkVariant::Baseline) return SpeculationOptions::off();
  SpeculationOptions s = SpeculationOptions::from_env();
  s.mode = v == BenchmarkVariant::Forced ? SpeculationOptions::Mode::Forced : SpeculationOptions::Mode::Auto;
  if (opt.block_size) s.block_size = *opt.block_size;
  if (opt.cost_ratio) {
    s.cost_ratio = *opt.cost_ratio;
    s.measured_costs = false;  // like MERERUN_Q35_MTP_HEAD_COST_RATIO: an explicit ratio selects the fixed rule
  }
  if (opt.profile) s.profile = true;
  return s;
}

Json speculation_json(const SpeculationOptions& s) {
  Json j = Json::object();
  j["mode"] = s.mode == SpeculationOptions::Mode::Off ? "off" : s.mode == SpeculationOptions::Mode::Forced ? "forced" : "auto";
  j["blockSize"] = s.block_size;
  j["costRatio"] = s.cost_ratio;
  j["pipelinedFallback"] = s.pipelined_fallback ? Json(*s.pipelined_fallback) : Json();
  j["profile"] = s.profile;
  j["measuredCosts"] = s.measured_costs ? Json(*s.measured_costs) : Json();
  return j;
}

Json acceleration_json(const AccelerationStats& a) {
  Json j = Json::object();
  j["route"] = a.route;
  j["rounds"] = a.rounds;
  j["draftedTokens"] = a.drafted;
  j["acceptedTokens"] = a.accepted;
  j["acceptanceRate"] = a.acceptance_rate();
  j["meanAcceptedLength"] = a.mean_accepted_length();
  Json dp = Json::array(), ap = Json::array();
  for (int64_t v : a.drafted_by_position) dp.push_back(v);
  for (int64_t v : a.accepted_by_position) ap.push_back(v);
  j["draftedByPosition"] = std::move(dp);
  j["acceptedByPosition"] = std::move(ap);
  j["draftHistoryTokens"] = a.draft_history_tokens;
  j["replacementPasses"] = a.replacement_passes;
  if (a.profiled) {
    Json p = Json::object();
    p["draftSeconds"] = a.draft_seconds;
    p["verifySeconds"] = a.verify_seconds;
    p["acceptSeconds"] = a.accept_seconds;
    p["repairSeconds"] = a.repair_seconds;
    j["profile"] = std::move(p);
  } else {
    j["profile"] = nullptr;
  }
  return j;
}

ResidentMemory parse_proc_status_memory(std::string_view status) {
  ResidentMemory m;
  auto field = [&](std::string_view key) -> int64_t {
    size_t pos = 0;
    while (pos < status.size()) {
      size_t eol = status.find('\n', pos);
      if (eol == std::string_view::npos) eol = status.size();
      std::string_view line = status.substr(pos, eol - pos);
      if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ':') {
        std::istringstream is{std::string(line.substr(key.size() + 1))};
        int64_t kb = 0;
        std::string unit;
        if (is >> kb) {
          is >> unit;
          return unit == "kB" || unit.empty() ? kb * 1024 : kb;
        }
        return 0;
      }
      pos = eol + 1;
    }
    return 0;
  };
  m.resident_bytes = field("VmRSS");
  m.peak_resident_bytes = field("VmHWM");
  return m;
}

ResidentMemory read_resident_memory() {
  std::ifstream f("/proc/self/status");
  if (!f) return {};
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_proc_status_memory(ss.str());
}

Json runtime_environment_json() {
  std::map<std::string, std::string> vars;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    if (kv.rfind("MERERUN_Q35_", 0) != 0) continue;
    const size_t eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    vars.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  Json j = Json::object();
  for (auto& [k, v] : vars) j[k] = v;
  return j;
}

SampleSummary summarize_sample(std::vector<double> values) {
  SampleSummary s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  s.min = values.front();
  s.max = values.back();
  s.median = n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
  return s;
}

Json run_benchmark(const Qwen35Model& model, const Tokenizer& tok, const ChatTemplate* tmpl,
                   std::span<const TokenId> eos_ids, const BenchmarkOptions& opt, const BenchmarkProgress& progress) {
  MERE_CHECK(!opt.scenarios.empty(), "benchmark", "no scenarios: expected --workloads or --prompt");
  MERE_CHECK(!opt.variants.empty(), "benchmark", "no variants: expected at least one of baseline, adaptive, forced");
  MERE_CHECK(opt.tokens >= 1, "benchmark", "--tokens: expected >= 1, got ", opt.tokens);
  MERE_CHECK(opt.warmups >= 0, "benchmark", "--warmups: expected >= 0, got ", opt.warmups);
  MERE_CHECK(opt.warmup_tokens >= 1, "benchmark", "--warmup-tokens: expected >= 1, got ", opt.warmup_tokens);
  MERE_CHECK(opt.repetitions >= 1, "benchmark", "--repetitions: expected >= 1, got ", opt.repetitions);
  MERE_CHECK(opt.context >= 2, "benchmark", "--context: expected >= 2, got ", opt.context);
  MERE_CHECK(opt.chat_template == (tmpl != nullptr), "benchmark", "chat template: expected one exactly when templating is on");
  const int64_t context = std::min(opt.context, model.config().max_position_embeddings);
  const bool greedy = opt.temperature == 0.0f;

  auto params_for = [&](int64_t tokens) {
    SamplingParams p;  // explicit, not the model's generation_config: every variant sees the same request
    p.temperature = opt.temperature;
    p.top_p = opt.top_p;
    p.seed = opt.seed;
    p.max_tokens = tokens;
    p.ignore_eos = true;
    p.validate("benchmark");
    return p;
  };
  const SamplingParams measured = params_for(opt.tokens), warm = params_for(opt.warmup_tokens);
  auto say = [&](const std::string& s) {
    if (progress) progress(s);
  };

  Json scenarios = Json::array();
  for (const auto& w : opt.scenarios) {
    Json sc = Json::object();
    sc["name"] = w.name;
    sc["prompt"] = w.prompt;
    sc["chatTemplate"] = opt.chat_template;
    Json variants = Json::array();
    std::map<BenchmarkVariant, SampleSummary> decode_by_variant, e2e_by_variant;
    // parity bookkeeping: the first measured request is the reference
    bool have_ref = false, parity = true, fixed_length = true;
    std::vector<int32_t> ref_ids;
    std::string ref_sha, ref_variant;
    int64_t ref_tokens = 0;
    Json mismatches = Json::array();

    // one variant's requests and tallies
    struct Run {
      BenchmarkVariant v;
      std::string name;
      SpeculationOptions spec;
      Json vj = Json::object(), warmups = Json::array(), reps = Json::array();
      std::vector<double> decode, e2e, ttft, prefill;
      AccelerationStats total;
      std::map<std::string, int64_t> routes;
      std::vector<std::string> hashes;
    };
    std::vector<Run> runs;
    for (BenchmarkVariant v : opt.variants) {
      Run& run = runs.emplace_back();
      run.v = v;
      run.name = std::string(variant_name(v));
      run.spec = variant_speculation(v, opt);
      run.vj["variant"] = run.name;
      run.vj["speculation"] = speculation_json(run.spec);
      const ResolvedSpeculation rs = resolve_speculation(run.spec, model, measured);
      Json resolved = Json::object();
      resolved["enabled"] = rs.enabled;
      resolved["blockSize"] = rs.block_size;
      resolved["costRatio"] = rs.cost_ratio;
      resolved["measuredCosts"] = rs.measured_costs;
      resolved["pipelinedFallback"] = rs.pipelined_fallback;
      resolved["reason"] = rs.reason;
      run.vj["resolvedSpeculation"] = std::move(resolved);
    }
    auto warm_up = [&](Run& run) {
      for (int64_t i = 0; i < opt.warmups; ++i) {
        RequestResult r = run_request(model, tok, tmpl, eos_ids, w, warm, context, run.spec);
        say(format_line("[benchmark] %s/%s warm-up %lld/%lld: %lld tokens, decode %.1f tok/s", w.name.c_str(),
                        run.name.c_str(), (long long)(i + 1), (long long)opt.warmups, (long long)r.generated,
                        r.decode_tok_s));
        run.warmups.push_back(std::move(r.record));
      }
    };
    auto measure = [&](Run& run, int64_t i) {
      RequestResult r = run_request(model, tok, tmpl, eos_ids, w, measured, context, run.spec);
      say(format_line("[benchmark] %s/%s repetition %lld/%lld: %lld tokens, decode %.1f tok/s, request %.1f tok/s, "
                      "TTFT %.1f ms, route %s, acceptance %.2f",
                      w.name.c_str(), run.name.c_str(), (long long)(i + 1), (long long)opt.repetitions,
                      (long long)r.generated, r.decode_tok_s, r.end_to_end_tok_s, r.ttft * 1e3,
                      r.accel.route.c_str(), r.accel.acceptance_rate()));
      run.decode.push_back(r.decode_tok_s);
      run.e2e.push_back(r.end_to_end_tok_s);
      run.ttft.push_back(r.ttft);
      run.prefill.push_back(r.prefill_tok_s);
      run.total.rounds += r.accel.rounds;
      run.total.drafted += r.accel.drafted;
      run.total.accepted += r.accel.accepted;
      run.total.replacement_passes += r.accel.replacement_passes;
      run.routes[r.accel.route] += 1;
      run.hashes.push_back(r.ids_sha);
      if (r.generated != opt.tokens) fixed_length = false;
      if (!have_ref) {
        have_ref = true;
        ref_ids = r.ids;
        ref_sha = r.ids_sha;
        ref_tokens = r.generated;
        ref_variant = run.name;
      } else if (r.ids_sha != ref_sha || r.generated != ref_tokens) {
        parity = false;
        Json m = Json::object();
        m["variant"] = run.name;
        m["repetition"] = i;
        m["outputSHA256"] = r.ids_sha;
        m["generatedTokens"] = r.generated;
        m["firstDivergentToken"] = first_divergence(ref_ids, r.ids);
        mismatches.push_back(std::move(m));
      }
      Json rec = std::move(r.record);
      rec["repetition"] = i;
      run.reps.push_back(std::move(rec));
    };
    if (opt.interleave) {  // every variant's warm-ups, then repetition i of each variant in turn
      for (Run& run : runs) warm_up(run);
      for (int64_t i = 0; i < opt.repetitions; ++i)
        for (Run& run : runs) measure(run, i);
    } else {  // each variant's warm-ups and repetitions, one variant after the other
      for (Run& run : runs) {
        warm_up(run);
        for (int64_t i = 0; i < opt.repetitions; ++i) measure(run, i);
      }
    }
    for (Run& run : runs) {
      const SampleSummary ds = summarize_sample(run.decode), es = summarize_sample(run.e2e);
      decode_by_variant[run.v] = ds;
      e2e_by_variant[run.v] = es;
      Json sum = Json::object();
      sum["decodeTokensPerSecond"] = summary_json(ds);
      sum["endToEndTokensPerSecond"] = summary_json(es);
      sum["ttftSeconds"] = summary_json(summarize_sample(run.ttft));
      sum["prefillTokensPerSecond"] = summary_json(summarize_sample(run.prefill));
      Json acc = Json::object();
      Json rj = Json::object();
      for (auto& [route, n] : run.routes) rj[route] = n;
      acc["routes"] = std::move(rj);
      acc["rounds"] = run.total.rounds;
      acc["draftedTokens"] = run.total.drafted;
      acc["acceptedTokens"] = run.total.accepted;
      acc["acceptanceRate"] = run.total.acceptance_rate();
      acc["meanAcceptedLength"] = run.total.mean_accepted_length();
      acc["replacementPasses"] = run.total.replacement_passes;
      sum["acceleration"] = std::move(acc);
      sum["outputsConsistent"] = std::all_of(run.hashes.begin(), run.hashes.end(),
                                             [&](const std::string& h) { return h == run.hashes.front(); });
      sum["outputSHA256"] = run.hashes.front();
      run.vj["summary"] = std::move(sum);
      run.vj["warmups"] = std::move(run.warmups);
      run.vj["repetitions"] = std::move(run.reps);
      variants.push_back(std::move(run.vj));
    }

    Json speedups = Json::object();
    if (auto base = decode_by_variant.find(BenchmarkVariant::Baseline); base != decode_by_variant.end()) {
      for (BenchmarkVariant v : opt.variants) {
        if (v == BenchmarkVariant::Baseline) continue;
        Json s = Json::object();
        s["decode"] = ratio(decode_by_variant[v].median, base->second.median);
        s["endToEnd"] = ratio(e2e_by_variant[v].median, e2e_by_variant[BenchmarkVariant::Baseline].median);
        speedups[variant_name(v)] = std::move(s);
      }
    }
    sc["variants"] = std::move(variants);
    sc["speedups"] = std::move(speedups);
    sc["greedy"] = greedy;
    sc["fixedLength"] = fixed_length;
    sc["referenceVariant"] = ref_variant;
    sc["referenceOutputSHA256"] = ref_sha;
    if (greedy) {
      sc["greedyOutputParity"] = parity;
      sc["parityMismatches"] = std::move(mismatches);
    } else {
      sc["greedyOutputParity"] = nullptr;  // sampled runs are not expected to agree across variants
    }
    if (greedy && !parity) say(format_line("[benchmark] %s: greedy outputs differ between variants", w.name.c_str()));
    scenarios.push_back(std::move(sc));
  }

  Json settings = Json::object();
  settings["tokens"] = opt.tokens;
  settings["warmups"] = opt.warmups;
  settings["warmupTokens"] = opt.warmup_tokens;
  settings["repetitions"] = opt.repetitions;
  settings["order"] = opt.interleave ? "interleaved" : "grouped";
  Json vs = Json::array();
  for (BenchmarkVariant v : opt.variants) vs.push_back(std::string(variant_name(v)));
  settings["variants"] = std::move(vs);
  settings["temperature"] = opt.temperature;
  settings["topP"] = opt.top_p;
  settings["seed"] = static_cast<int64_t>(opt.seed & 0x7fffffffffffffffull);
  settings["contextLimit"] = context;
  settings["blockSize"] = opt.block_size ? Json(*opt.block_size) : Json(nullptr);
  settings["costRatio"] = opt.cost_ratio ? Json(*opt.cost_ratio) : Json(nullptr);
  settings["profile"] = opt.profile;
  settings["stopOnEos"] = false;
  settings["thinking"] = false;
  settings["chatTemplate"] = opt.chat_template;
  settings["prefixCache"] = false;
  settings["continuousBatching"] = false;

  Json doc = Json::object();
  doc["settings"] = std::move(settings);
  doc["scenarios"] = std::move(scenarios);
  return doc;
}

}  // namespace mere
