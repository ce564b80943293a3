// Generator: the plain serial decoding loop over the reference model.
#include "runtime/generator.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/error.h"
#include "model/device_engine.h"
#include "runtime/pipelined_decode.h"
#include "runtime/speculative.h"

namespace mere {

namespace {
double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

GenerationStats Generator::run(std::span<const int32_t> prompt, const SamplingParams& params,
                               std::span<const TokenId> eos_ids, int64_t context_limit,
                               const std::function<bool(int32_t)>& on_token, const SpeculationOptions& spec) {
  const auto t0 = std::chrono::steady_clock::now();
  const ModelConfig& c = model_.config();
  const int64_t P = static_cast<int64_t>(prompt.size());
  MERE_CHECK(P > 0, "generate", "empty prompt: at least one token is needed");
  context_limit = std::min(context_limit, c.max_position_embeddings);
  MERE_CHECK(P < context_limit, "generate", "prompt of ", P, " tokens does not fit the context of ", context_limit,
             " tokens (at least one token must be generated)");
  for (int32_t id : prompt)
    MERE_CHECK(id >= 0 && id < c.vocab_size, "generate", "token id ", id, " out of range: vocabulary has ", c.vocab_size);
  params.validate("generate");

  int64_t budget = context_limit - P;
  if (params.max_tokens) budget = std::min(budget, *params.max_tokens);

  GenerationStats st;
  st.prompt_tokens = P;
  Rng rng = Rng::from_request(params.seed);
  st.seed = rng.seed();
  Sampler sampler(params, static_cast<size_t>(c.vocab_size));
  SequenceMemory mem = model_.new_memory();
  std::vector<float> logits(static_cast<size_t>(c.vocab_size));
  std::vector<int32_t> generated;

  const ResolvedSpeculation rs = resolve_speculation(spec, model_, params);
  if (mem.device()) mem.device()->graphs = rs.scoped_graphs;
  std::vector<float> prompt_hidden;
  if (rs.enabled) prompt_hidden.resize(static_cast<size_t>(P * c.hidden_size));
  model_.forward(prompt.data(), P, mem, rs.enabled ? prompt_hidden.data() : nullptr, logits.data(), LogitsMode::Last);
  st.prefill_seconds = since(t0);
  const auto t_decode = std::chrono::steady_clock::now();
  st.finish_reason = "length";
  bool first = true;
  auto on_token_timed = [&](int32_t id) {
    if (first) st.ttft_seconds = since(t0);
    first = false;
    return on_token(id);
  };
  if (rs.enabled) {
    SpeculativeRequest req{prompt, &params, eos_ids, budget, context_limit};
    decode_speculative(model_, rs, spec, req, mem, prompt_hidden, logits, sampler, rng, generated, on_token_timed, st);
  } else {
    // false when generation ends here (EOS, stop token, the callback); the budget is checked apart
    auto emit = [&](int32_t id) {
      const bool is_eos = !params.ignore_eos && std::find(eos_ids.begin(), eos_ids.end(), id) != eos_ids.end();
      const bool is_stop =
          std::find(params.stop_token_ids.begin(), params.stop_token_ids.end(), id) != params.stop_token_ids.end();
      if (!is_eos && !is_stop) {
        generated.push_back(id);
        if (on_token_timed(id)) return true;
      }
      st.finish_reason = "stop";
      return false;
    };
    // the pipelined decoder (mtp.md §4): greedy tokens from the device argmax, read one step behind
    DeviceEngine* engine = model_.device_engine();
    const bool pipelined = engine && rs.async_decode;
    while (static_cast<int64_t>(generated.size()) < budget) {
      const int32_t id = sampler.sample(logits, TokenHistory{prompt, generated}, rng);
      if (!emit(id) || static_cast<int64_t>(generated.size()) >= budget) break;
      if (pipelined) {
        decode_pipelined(*engine, mem, id, budget - static_cast<int64_t>(generated.size()), emit);
        break;
      }
      model_.forward(&id, 1, mem, nullptr, logits.data(), LogitsMode::Last);
    }
  }
  st.generated_tokens = static_cast<int64_t>(generated.size());
  st.decode_seconds = since(t_decode);
  if (const DeviceSequenceState* d = mem.device()) {
    st.graph_captures = static_cast<int64_t>(d->captures);
    st.graph_capture_seconds = d->capture_seconds;
  }
  st.total_seconds = since(t0);
  if (st.ttft_seconds == 0) st.ttft_seconds = st.total_seconds;
  return st;
}

}  // namespace mere
