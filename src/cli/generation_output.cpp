// --stats / --json rendering for generation results.
#include "cli/generation_output.h"

#include <cstdio>

#include "core/error.h"

namespace mere::cli {

void print_stats(const GenerationStats& s) {
  std::fprintf(stderr,
               "\n[stats] prompt %lld tokens | prefill %.1f tok/s (%.3f s) | decode %.1f tok/s (%lld tokens, %.3f s) | "
               "TTFT %.1f ms | finish %s | seed %llu\n",
               (long long)s.prompt_tokens, s.prefill_tok_s(), s.prefill_seconds, s.decode_tok_s(),
               (long long)s.generated_tokens, s.decode_seconds, s.ttft_seconds * 1e3, s.finish_reason.c_str(),
               (unsigned long long)s.seed);
  const AccelerationStats& a = s.accel;
  if (a.route != "serial" || a.rounds > 0) {
    std::string by_pos;
    for (size_t i = 0; i < a.drafted_by_position.size(); ++i)
      if (a.drafted_by_position[i])
        by_pos += cat(i ? " " : "", i + 1, ":", 100.0 * a.accepted_by_position[i] / a.drafted_by_position[i], "%");
    std::fprintf(stderr, "[mtp] route %s | rounds %lld | drafted %lld | accepted %lld (%.1f%%) | mean accepted length %.2f | by position %s | replacement passes %lld\n",
                 a.route.c_str(), (long long)a.rounds, (long long)a.drafted, (long long)a.accepted, 100.0 * a.acceptance_rate(),
                 a.mean_accepted_length(), by_pos.c_str(), (long long)a.replacement_passes);
    if (a.profiled)
      std::fprintf(stderr, "[mtp] profile: draft %.3f s | verify %.3f s | accept %.3f s | repair %.3f s\n", a.draft_seconds,
                   a.verify_seconds, a.accept_seconds, a.repair_seconds);
  }
  if (s.graph_captures > 0)
    std::fprintf(stderr, "[device] graphs captured %lld (%.1f ms)\n", (long long)s.graph_captures,
                 s.graph_capture_seconds * 1e3);
}

Json acceleration_json(const AccelerationStats& a) {
  Json j = Json::object();
  j["route"] = a.route;
  j["rounds"] = a.rounds;
  j["drafted"] = a.drafted;
  j["accepted"] = a.accepted;
  j["acceptance_rate"] = a.acceptance_rate();
  j["mean_accepted_length"] = a.mean_accepted_length();
  Json dp = Json::array(), ap = Json::array();
  for (auto v : a.drafted_by_position) dp.push_back(v);
  for (auto v : a.accepted_by_position) ap.push_back(v);
  j["drafted_by_position"] = dp;
  j["accepted_by_position"] = ap;
  j["draft_history_tokens"] = a.draft_history_tokens;
  j["replacement_passes"] = a.replacement_passes;
  if (a.profiled)
    j["profile"] = Json(Json::Object{{"draft_seconds", a.draft_seconds}, {"verify_seconds", a.verify_seconds},
                                     {"accept_seconds", a.accept_seconds}, {"repair_seconds", a.repair_seconds}});
  return j;
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
  j["acceleration"] = acceleration_json(s.accel);
  j["graph_captures"] = s.graph_captures;
  j["graph_capture_seconds"] = s.graph_capture_seconds;
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
