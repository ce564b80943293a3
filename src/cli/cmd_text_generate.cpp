// `mere.run text generate`: raw completion of a prompt with the model's tokenizer.
#include <cstdio>

#include "cli/command.h"
#include "cli/generation_output.h"
#include "cli/sampling_flags.h"
#include "core/error.h"
#include "model/generation_config.h"
#include "runtime/text_generation.h"

namespace mere::cli {
namespace {

int run_text_generate(const Args& a) {
  const std::string dir = a.require("model");
  MERE_CHECK(a.has("prompt"), "cli", "missing required flag --prompt");
  const std::string prompt = a.get("prompt");
  MERE_CHECK(!prompt.empty(), "generate", "empty prompt: give some text with --prompt");
  const Tokenizer tok = Tokenizer::from_dir(dir);
  const GenerationConfig gc = GenerationConfig::load(dir);
  const SamplingParams params = gc.resolve(sampling_overrides(a));
  auto model = Qwen35Model::load(dir, a.get("backend", "cpu"));
  EncodeInfo info;
  std::vector<int32_t> ids = tok.encode(prompt, EncodeOptions{}, &info);
  if (info.invalid_utf8)
    std::fprintf(stderr, "warning: the prompt has %zu invalid UTF-8 sequence(s); each was replaced by U+FFFD\n", info.invalid_utf8);
  MERE_CHECK(!ids.empty(), "generate", "the prompt encodes to zero tokens");
  const int64_t ctx = a.get_int("context", model->config().max_position_embeddings);
  const bool json = a.flag("json"), stream = a.flag("stream");
  auto on_text = [&](std::string_view s) {
    if (!stream) return;
    if (json) {
      Json ev = Json::object();
      ev["delta"] = std::string(s);
      std::printf("%s\n", ev.dump().c_str());
    } else {
      std::fwrite(s.data(), 1, s.size(), stdout);
    }
    std::fflush(stdout);
  };
  if (stream && !json) {
    std::fputs(prompt.c_str(), stdout);
    std::fflush(stdout);
  }
  TextResult r = generate_text(*model, tok, gc.eos_token_ids, ids, params, ctx, on_text, speculation_options(a));
  if (json) {
    Json j = result_json(r);
    j["prompt"] = prompt;
    std::printf("%s\n", j.dump().c_str());
  } else {
    if (!stream) std::fputs((prompt + r.text).c_str(), stdout);
    std::fputs("\n", stdout);
  }
  std::fflush(stdout);
  if (a.flag("stats")) print_stats(r.stats);
  return 0;
}

Command make() {
  Command c{"text generate", "complete a raw prompt (no chat template)", "",
            {{"model", "DIR", "model directory", ""},
             {"prompt", "TEXT", "the prompt", ""},
             {"stream", "", "print tokens as they are generated", ""},
             {"stats", "", "report prompt tokens, prefill/decode tok/s and time to first token on stderr", ""},
             {"json", "", "print one JSON document (with --stream: JSON lines of deltas first)", ""}},
            run_text_generate};
  for (auto& f : sampling_flags()) c.flags.push_back(f);
  return c;
}
MERE_COMMAND(make());

}  // namespace
}  // namespace mere::cli
