// See verify_bench.h. Timing: steady_clock around each pass of a repetition but its first (a fresh
// fork: a device backend captures its graph then), after one warm-up repetition; medians with min/max. The forward calls return only after their
// results are on the host, so wall time is the device time plus what the host adds.
#include "runtime/verify_bench.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "core/error.h"
#include "runtime/generator.h"

namespace mere {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

Json stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  Json j = Json::object();
  const size_t n = v.size();
  j["median"] = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  j["min"] = v.front();
  j["max"] = v.back();
  return j;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int32_t row_argmax(const float* row, int64_t V) {  // lowest id on ties
  return static_cast<int32_t>(std::max_element(row, row + V) - row);
}

}  // namespace

Json run_verify_bench(const Qwen35Model& model, const VerifyBenchOptions& o,
                      const std::function<void(const std::string&)>& progress) {
  MERE_CHECK(!o.widths.empty(), "verify-bench", "--widths: expected at least one width");
  for (int64_t w : o.widths)
    MERE_CHECK(w >= 1 && w <= ForwardOptions::kMaxRecurrentRows, "verify-bench", "--widths: each width must be in 1..",
               ForwardOptions::kMaxRecurrentRows, ", got ", w);
  MERE_CHECK(o.prompt_tokens >= 1 && o.reps >= 1, "verify-bench", "--prompt-tokens and --reps: expected >= 1");
  MERE_CHECK(o.passes >= 2, "verify-bench", "--passes: expected >= 2 (the first pass of a repetition is not timed), got ",
             o.passes);
  auto say = [&](const std::string& s) {
    if (progress) progress(s);
  };
  const ModelConfig& c = model.config();
  const int64_t V = c.vocab_size, H = c.hidden_size;
  const int64_t wmax = *std::max_element(o.widths.begin(), o.widths.end());
  const int64_t N = o.passes * wmax;  // oracle tokens needed by the widest width

  std::vector<int32_t> prompt(static_cast<size_t>(o.prompt_tokens));
  uint32_t s = o.seed;
  const int64_t id_range = std::min<int64_t>(V, 248000);
  for (auto& v : prompt) v = static_cast<int32_t>(((s = s * 1664525u + 1013904223u) >> 8) % static_cast<uint32_t>(id_range));

  say("prefill " + std::to_string(o.prompt_tokens) + " tokens");
  SequenceMemory base = model.new_memory();
  std::vector<float> logits(static_cast<size_t>(wmax * V)), hidden(static_cast<size_t>(std::max(wmax, o.prompt_tokens) * H));
  std::vector<int32_t> ids(static_cast<size_t>(wmax));  // a verification pass's row argmaxes
  model.forward(prompt.data(), o.prompt_tokens, base, hidden.data(), logits.data(), LogitsMode::Last);
  const int32_t first = row_argmax(logits.data(), V);
  const std::vector<float> prompt_hidden(hidden.begin() + (o.prompt_tokens - 1) * H, hidden.begin() + o.prompt_tokens * H);

  // the oracle: N + 1 greedy tokens decoded serially; oracle[i + 1] follows oracle[i]
  say("oracle: " + std::to_string(N) + " serial greedy steps");
  std::vector<int32_t> oracle{first};
  std::vector<double> step_s;
  {
    SequenceMemory m = base.fork();
    for (int64_t i = 0; i < N; ++i) {
      const auto t0 = Clock::now();
      model.forward(&oracle.back(), 1, m, nullptr, logits.data(), LogitsMode::Last);
      step_s.push_back(since(t0));
      oracle.push_back(row_argmax(logits.data(), V));
    }
  }

  Json widths = Json::array();
  double tps1 = 0;
  for (int64_t w : o.widths) {
    say("width " + std::to_string(w) + ": " + std::to_string(o.reps) + " x " + std::to_string(o.passes) + " passes");
    std::vector<double> tps, pass_ms;
    int64_t mismatches = 0;
    for (int64_t r = 0; r <= o.reps; ++r) {  // r = 0 warms up
      SequenceMemory m = base.fork();
      double total = 0;
      for (int64_t p = 0; p < o.passes; ++p) {
        const int32_t* rows = oracle.data() + p * w;  // the pass's input ids: confirmed token + drafts
        GdnTrace trace;
        ForwardOptions fo;
        fo.gdn = ForwardOptions::Gdn::Recurrent;
        fo.trace = &trace;
        // as the greedy decoder verifies (speculative.cpp): each row's argmax id, not its logits
        // (widths past kMaxVerifyRows, which no decoder runs, return the logits)
        const bool ids_only = w <= ForwardOptions::kMaxVerifyRows;
        fo.row_argmax = ids_only ? ids.data() : nullptr;
        const auto t0 = Clock::now();
        const auto cp = m.checkpoint();  // the decoder checkpoints before every verification pass
        model.forward(rows, w, m, hidden.data(), ids_only ? nullptr : logits.data(),
                      ids_only ? LogitsMode::None : LogitsMode::All, fo);
        // the first pass on a fresh fork is untimed: a device backend captures the sequence's graph
        // for this kind of pass then, once per request
        if (p > 0) total += since(t0);
        (void)cp;
        for (int64_t j = 0; j < w; ++j)
          if ((ids_only ? ids[static_cast<size_t>(j)] : row_argmax(logits.data() + j * V, V)) != rows[j + 1])
            ++mismatches;
      }
      if (r == 0) continue;
      tps.push_back(static_cast<double>((o.passes - 1) * w) / total);
      pass_ms.push_back(1e3 * total / static_cast<double>(o.passes - 1));
    }
    Json e = Json::object();
    e["width"] = w;
    e["tokens_per_s"] = stats(tps);
    e["pass_ms"] = stats(pass_ms);
    e["oracle_mismatches"] = mismatches;  // rows whose argmax differs from the serial decode (must be 0)
    const double med = median(tps);
    if (w == 1) tps1 = med;
    e["speedup_vs_width1"] = tps1 > 0 ? Json(med / tps1) : Json();
    Json reps = Json::array();
    for (double x : tps) reps.push_back(x);
    e["tokens_per_s_reps"] = std::move(reps);
    widths.push_back(std::move(e));
  }

  // draft cost: one chained head step (T = 1) against one serial target step
  Json out = Json::object();
  out["target_step_ms"] = stats([&] {
    std::vector<double> v(step_s.begin() + std::min<size_t>(step_s.size() - 1, 2), step_s.end());
    for (double& x : v) x *= 1e3;
    return v;
  }());
  if (model.has_mtp()) {
    say("MTP head: chained steps");
    SequenceMemory m = base.fork();
    // the prompt's last post-norm hidden state feeds the first head step
    std::vector<float> h(prompt_hidden), h2(static_cast<size_t>(H));
    std::vector<double> head_ms;
    for (int64_t i = 0; i < std::max<int64_t>(8, o.passes) + 2; ++i) {
      const auto t0 = Clock::now();
      model.mtp_forward(h.data(), &oracle[static_cast<size_t>(i % N)], 1, m, h2.data(), logits.data(), LogitsMode::Last);
      const double ms = 1e3 * since(t0);
      if (i >= 2) head_ms.push_back(ms);
      h.swap(h2);
    }
    out["head_step_ms"] = stats(head_ms);
    out["head_cost_ratio"] = median(head_ms) / out.at("target_step_ms").at("median").as_number();
  }
  if (!o.parity_depths.empty()) {
    MERE_CHECK(model.has_mtp(), "verify-bench", "--parity-depths: the model has no MTP head");
    MERE_CHECK(o.parity_tokens >= 1, "verify-bench", "--parity-tokens: expected >= 1");
    SamplingParams sp;
    sp.temperature = 0.0f;
    sp.max_tokens = o.parity_tokens;
    sp.ignore_eos = true;
    const int64_t ctx = o.prompt_tokens + o.parity_tokens + 16;
    auto generate = [&](const SpeculationOptions& spec, GenerationStats* st) {
      std::vector<int32_t> ids;
      Generator g(model);
      *st = g.run(prompt, sp, {}, ctx, [&](int32_t id) {
        ids.push_back(id);
        return true;
      }, spec);
      return ids;
    };
    say("parity: " + std::to_string(o.parity_tokens) + " greedy tokens without MTP");
    GenerationStats st;
    const std::vector<int32_t> serial = generate(SpeculationOptions::off(), &st);
    Json parity = Json::array();
    for (int64_t d : o.parity_depths) {
      say("parity: forced depth " + std::to_string(d));
      SpeculationOptions spec;
      spec.mode = SpeculationOptions::Mode::Forced;
      spec.forced_depth = static_cast<int>(d);
      spec.block_size = std::max(o.parity_block_size, static_cast<int>(d) + 1);  // room for d drafts
      const std::vector<int32_t> got = generate(spec, &st);
      int64_t first = -1;
      for (size_t i = 0; i < std::max(got.size(), serial.size()); ++i)
        if (i >= got.size() || i >= serial.size() || got[i] != serial[i]) {
          first = static_cast<int64_t>(i);
          break;
        }
      Json e = Json::object();
      e["depth"] = d;
      e["equal"] = first < 0;
      e["first_divergence"] = first;
      e["tokens"] = static_cast<int64_t>(got.size());
      e["rounds"] = st.accel.rounds;
      e["drafted"] = st.accel.drafted;
      e["accepted"] = st.accel.accepted;
      e["route"] = st.accel.route;
      parity.push_back(std::move(e));
    }
    out["parity"] = std::move(parity);
    out["parity_tokens"] = o.parity_tokens;
  }
  out["widths"] = std::move(widths);
  out["prompt_tokens"] = o.prompt_tokens;
  out["passes"] = o.passes;
  out["reps"] = o.reps;
  out["oracle_tokens"] = N;
  return out;
}

}  // namespace mere
