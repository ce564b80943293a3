// Token-level generation on one sequence: prefill, then sample/decode until EOS, a stop token,
// the token budget or the caller says stop. Text-level concerns (detokenising, stop strings)
// belong to the caller's on_token callback.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/qwen35.h"
#include "runtime/sampler.h"

namespace mere {

// What MTP speculation did in one request (mtp.md §1-3, bench-receipts.md §1 "acceleration").
struct AccelerationStats {
  std::string route = "serial";       // "mtp", "pipelined-fallback" or "serial"
  int64_t rounds = 0;                 // verification passes
  int64_t drafted = 0;                // draft tokens offered
  int64_t accepted = 0;               // draft tokens accepted
  std::vector<int64_t> drafted_by_position, accepted_by_position;  // [B-1]
  int64_t draft_history_tokens = 0;   // rows the head primed over (prompt + confirmed transitions)
  int64_t replacement_passes = 0;     // second target passes (0 when every cache rolls back)
  // MERERUN_Q35_MTP_PROFILE=1: seconds per phase, summed over rounds
  bool profiled = false;
  double draft_seconds = 0, verify_seconds = 0, accept_seconds = 0, repair_seconds = 0;
  double acceptance_rate() const { return drafted ? double(accepted) / double(drafted) : 0.0; }
  // committed tokens per round: accepted drafts + the target's own token
  double mean_accepted_length() const { return rounds ? double(accepted + rounds) / double(rounds) : 0.0; }
};

// How a request may speculate. from_env reads the MERERUN_Q35_* controls (mtp.md §5) per request;
// unset optional fields take the model's defaults (resolve_speculation).
struct SpeculationOptions {
  enum class Mode { Off, Auto, Forced } mode = Mode::Auto;  // Auto: the model's defaults decide; Forced: MTP admitted
  int block_size = 0;                       // B (1 committed + up to B-1 drafts); 0: the model's default
  double cost_ratio = 0.18;                 // c in the seed's depth rule
  std::optional<bool> measured_costs;       // depth from measured costs (default) or the fixed ratio
  std::optional<bool> pipelined_fallback;   // after permanent zero depth: the pipelined decoder
  bool profile = false;                     // per-round phase timings
  int forced_depth = 0;                     // > 0: always draft this many (tests, benchmarks)
  std::optional<bool> scoped_compile, async_decode_blocks;  // CUDA scheduling controls, recorded
  static SpeculationOptions from_env();
  static SpeculationOptions off() {
    SpeculationOptions o;
    o.mode = Mode::Off;
    return o;
  }
};

// What a request will actually do, after eligibility and the model's managed defaults.
struct ResolvedSpeculation {
  bool enabled = false;
  int block_size = 4;
  double cost_ratio = 0.18;
  bool measured_costs = true;
  bool pipelined_fallback = false;
  // CUDA scheduling (mtp.md §5), resolved whether or not MTP is on: serial decoding on a device
  // engine runs the pipelined decoder (MERERUN_Q35_ASYNC_DECODE_BLOCKS; default on for the managed
  // geometries; greedy requests without penalties only), and T = 1 steps run as the sequence's own
  // captured graph
  // (MERERUN_Q35_SCOPED_COMPILE; the engine's graphs are always per sequence, so default on).
  bool async_decode = false;
  bool scoped_graphs = true;
  std::string reason;  // why MTP is off, when it is
};
ResolvedSpeculation resolve_speculation(const SpeculationOptions& opt, const Qwen35Model& model,
                                        const SamplingParams& params);

struct GenerationStats {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double prefill_seconds = 0;  // forward over the prompt
  double decode_seconds = 0;   // from the end of prefill to the last token (first sample included)
  double ttft_seconds = 0;     // from the start of the request to the first token
  double total_seconds = 0;
  std::string finish_reason;   // "stop" (EOS, stop token or stop string), "length"
  uint64_t seed = 0;
  AccelerationStats accel;
  // a device backend's graphs captured for this request and the host seconds they took (0 on the CPU)
  int64_t graph_captures = 0;
  double graph_capture_seconds = 0;
  double prefill_tok_s() const { return prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0; }
  double decode_tok_s() const { return decode_seconds > 0 ? generated_tokens / decode_seconds : 0; }
};

class Generator {
 public:
  explicit Generator(const Qwen35Model& model) : model_(model) {}

  // prompt: [P] ids; eos_ids: the model's EOS set (ignored when params.ignore_eos);
  // context_limit: max prompt + generated tokens. on_token(id) returns false to stop ("stop").
  // EOS and stop tokens end generation and are not passed to on_token.
  GenerationStats run(std::span<const int32_t> prompt, const SamplingParams& params, std::span<const TokenId> eos_ids,
                      int64_t context_limit, const std::function<bool(int32_t)>& on_token,
                      const SpeculationOptions& spec = SpeculationOptions::off());

 private:
  const Qwen35Model& model_;
};

}  // namespace mere
