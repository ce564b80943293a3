// Sampling flags -> SamplingOverrides.
#include "cli/sampling_flags.h"

#include "core/error.h"

namespace mere::cli {

std::vector<Flag> sampling_flags() {
  return {
      {"max-tokens", "N", "maximum tokens to generate", "generation_config or until the context ends"},
      {"temperature", "T", "sampling temperature; 0 = greedy", "generation_config, else 1"},
      {"top-k", "K", "keep the K most likely tokens (0 = off)", ""},
      {"top-p", "P", "nucleus sampling mass in (0, 1]", ""},
      {"min-p", "P", "drop tokens below P x the top probability", ""},
      {"repetition-penalty", "R", "HF repetition penalty (1 = off)", ""},
      {"presence-penalty", "X", "OpenAI presence penalty", ""},
      {"frequency-penalty", "X", "OpenAI frequency penalty", ""},
      {"seed", "N", "request RNG seed (reproduces sampled output)", "random"},
      {"stop", "TEXT", "stop string (repeatable)", ""},
      {"ignore-eos", "", "keep generating past EOS", ""},
      {"context", "N", "context limit in tokens", "the model's max_position_embeddings"},
      {"mtp", "", "force MTP speculation (MERERUN_Q35_MTP_SPECULATION=1)", "the model's default"},
      {"no-mtp", "", "disable MTP speculation", ""},
      {"mtp-block-size", "B", "verification block size (1 + up to B-1 drafts)", "8 dense 27B, 4 otherwise"},
      {"mtp-depth", "D", "always draft D tokens instead of the adaptive depth", ""},
      {"backend", "NAME", "compute backend: cpu, ref or cuda (cuda:N)", "cpu"},
  };
}

SamplingOverrides sampling_overrides(const Args& a) {
  SamplingOverrides o;
  if (a.has("max-tokens")) o.max_tokens = a.get_int("max-tokens", 0);
  if (a.has("temperature")) o.temperature = static_cast<float>(a.get_double("temperature", 1));
  if (a.has("top-k")) o.top_k = static_cast<int>(a.get_int("top-k", 0));
  if (a.has("top-p")) o.top_p = static_cast<float>(a.get_double("top-p", 1));
  if (a.has("min-p")) o.min_p = static_cast<float>(a.get_double("min-p", 0));
  if (a.has("repetition-penalty")) o.repetition_penalty = static_cast<float>(a.get_double("repetition-penalty", 1));
  if (a.has("presence-penalty")) o.presence_penalty = static_cast<float>(a.get_double("presence-penalty", 0));
  if (a.has("frequency-penalty")) o.frequency_penalty = static_cast<float>(a.get_double("frequency-penalty", 0));
  if (a.has("seed")) {
    const int64_t s = a.get_int("seed", 0);
    MERE_CHECK(s >= 0, "cli", "--seed must be non-negative, got ", s);
    o.seed = static_cast<uint64_t>(s);
  }
  o.stop = a.get_all("stop");
  o.ignore_eos = a.flag("ignore-eos");
  return o;
}

SpeculationOptions speculation_options(const Args& a) {
  SpeculationOptions s = SpeculationOptions::from_env();
  MERE_CHECK(!(a.flag("mtp") && a.flag("no-mtp")), "cli", "--mtp and --no-mtp contradict each other");
  if (a.flag("mtp")) s.mode = SpeculationOptions::Mode::Forced;
  if (a.flag("no-mtp")) s.mode = SpeculationOptions::Mode::Off;
  if (a.has("mtp-block-size")) {
    const int64_t b = a.get_int("mtp-block-size", 4);
    MERE_CHECK(b >= 2 && b <= 9, "cli", "--mtp-block-size must be in [2, 9], got ", b);
    s.block_size = static_cast<int>(b);
  }
  if (a.has("mtp-depth")) {
    const int64_t d = a.get_int("mtp-depth", 1);
    MERE_CHECK(d >= 1 && d <= 8, "cli", "--mtp-depth must be in [1, 8], got ", d);
    s.forced_depth = static_cast<int>(d);
    if (s.mode == SpeculationOptions::Mode::Auto) s.mode = SpeculationOptions::Mode::Forced;
  }
  return s;
}

}  // namespace mere::cli
