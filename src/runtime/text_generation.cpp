// generate_text: Generator + StreamDecoder + StopMatcher.
#include "runtime/text_generation.h"

#include "runtime/stop_matcher.h"

namespace mere {

TextResult generate_text(const Qwen35Model& model, const Tokenizer& tok, std::span<const TokenId> eos_ids,
                         std::span<const int32_t> prompt_ids, const SamplingParams& params, int64_t context_limit,
                         const std::function<void(std::string_view)>& on_text, const SpeculationOptions& spec) {
  TextResult r;
  StreamDecoder dec(tok, /*skip_special=*/false);
  StopMatcher stop(params.stop, {});
  auto emit = [&](const std::string& s) {
    if (s.empty()) return;
    r.text += s;
    if (on_text) on_text(s);
  };
  Generator gen(model);
  r.stats = gen.run(prompt_ids, params, eos_ids, context_limit, [&](int32_t id) {
    r.ids.push_back(id);
    emit(stop.push(dec.push(id)));
    return !stop.stopped();
  }, spec);
  if (!stop.stopped()) {
    emit(stop.push(dec.finish()));
    if (!stop.stopped()) emit(stop.flush());
  }
  if (stop.stopped()) {
    r.stop_string = stop.matched();
    r.stats.finish_reason = "stop";
  }
  return r;
}

}  // namespace mere
