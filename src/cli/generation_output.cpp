// --stats / --json rendering for generation results.
#include "cli/generation_output.h"

#include <cstdio>

namespace mere::cli {

void print_stats(const GenerationStats& s) {
  std::fprintf(stderr,
               "\n[stats] prompt %lld tokens | prefill %.1f tok/s (%.3f s) | decode %.1f tok/s (%lld tokens, %.3f s) | "
               "TTFT %.1f ms | finish %s | seed %llu\n",
               (long long)s.prompt_tokens, s.prefill_tok_s(), s.prefill_seconds, s.decode_tok_s(),
               (long long)s.generated_tokens, s.decode_seconds, s.ttft_seconds * 1e3, s.finish_reason.c_str(),
               (unsigned long long)s.seed);
}

Json stats_json(const GenerationStats& s) {
  Json j = Json::object();
  j["prompt_tokens"] = s.prompt_tokens;
  j["generated_tokens"] = s.generated_tokens;
  j["prefill_seconds"] = s.prefill_seconds;
  j["decode_seconds"] = s.decode_seconds;
  j["ttft_seconds"] = s.ttft_seconds;
  j["total_seconds"] = s.total_seconds;
  j["prefill_tok_s"] = s.prefill_tok_s();
  j["decode_tok_s"] = s.decode_tok_s();
  j["finish_reason"] = s.finish_reason;
  j["seed"] = static_cast<int64_t>(s.seed & 0x7fffffffffffffffull);
  return j;
}

Json result_json(const TextResult& r) {
  Json j = Json::object();
  j["text"] = r.text;
  Json ids = Json::array();
  for (int32_t id : r.ids) ids.push_back(id);
  j["token_ids"] = ids;
  j["finish_reason"] = r.stats.finish_reason;
  if (!r.stop_string.empty()) j["stop"] = r.stop_string;
  j["stats"] = stats_json(r.stats);
  return j;
}

}  // namespace mere::cli
