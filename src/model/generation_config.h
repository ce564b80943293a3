// A model's own sampling defaults and EOS ids: generation_config.json (Hugging Face format) plus the
// eos_token_id of config.json (top level or text_config). Merge rule for a request:
// request flags > generation_config.json > built-in defaults (SamplingParams{}).
// A missing file means "no opinion"; a malformed one is an error naming the file.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/sampler.h"

namespace mere {

class Json;

// The sampling fields a request (CLI flags, API body) set explicitly; unset ones fall through.
struct SamplingOverrides {
  std::optional<float> temperature;
  std::optional<int> top_k;
  std::optional<float> top_p;
  std::optional<float> min_p;
  std::optional<float> repetition_penalty;
  std::optional<float> presence_penalty;
  std::optional<float> frequency_penalty;
  std::optional<uint64_t> seed;
  std::optional<int64_t> max_tokens;
  std::vector<std::string> stop;
  std::vector<TokenId> stop_token_ids;
  bool ignore_eos = false;
};

struct GenerationConfig {
  std::vector<TokenId> eos_token_ids;  // generation_config.json's, then config.json's; unique
  std::optional<bool> do_sample;       // false: greedy unless the request sets a temperature
  std::optional<float> temperature;
  std::optional<int> top_k;            // 0 and -1 (vLLM's "off") both read as 0
  std::optional<float> top_p;
  std::optional<float> min_p;
  std::optional<float> repetition_penalty;
  std::optional<float> presence_penalty;
  std::optional<float> frequency_penalty;
  std::optional<int64_t> max_new_tokens;

  // Reads <model_dir>/generation_config.json and <model_dir>/config.json; either may be absent.
  static GenerationConfig load(const std::string& model_dir);
  // From parsed documents (either may be null); the where strings name the sources in errors.
  static GenerationConfig from_json(const Json* generation_config, const Json* config,
                                    const std::string& gen_where = "generation_config.json",
                                    const std::string& config_where = "config.json");

  // Built-in defaults, overridden by this file's values, overridden by the request; validated.
  SamplingParams resolve(const SamplingOverrides& request = {}) const;
};

}  // namespace mere
