// Text-level generation: prompt ids in, streamed UTF-8 text out. Detokenises incrementally (never a
// broken UTF-8 sequence), applies stop strings (held back until they cannot match), and reports the
// token-level statistics of the Generator.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "model/qwen35.h"
#include "runtime/generator.h"
#include "runtime/sampler.h"
#include "text/tokenizer.h"

namespace mere {

struct TextResult {
  std::string text;            // everything emitted (stop string excluded)
  std::vector<int32_t> ids;    // generated ids (EOS / stop tokens excluded)
  GenerationStats stats;
  std::string stop_string;     // the stop string that ended generation, if any
};

TextResult generate_text(const Qwen35Model& model, const Tokenizer& tok, std::span<const TokenId> eos_ids,
                         std::span<const int32_t> prompt_ids, const SamplingParams& params, int64_t context_limit,
                         const std::function<void(std::string_view)>& on_text,
                         const SpeculationOptions& spec = SpeculationOptions::off());

}  // namespace mere
