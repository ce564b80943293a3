// The in-process generation benchmark behind `mere.run model benchmark` (docs/benchmark.md,
// bench-receipts.md §1-2): one loaded model, scenarios x variants (baseline / adaptive / forced) x
// warm-ups + repetitions of fixed-length requests, reported as one JSON document with per-request
// timings, throughput, output hashes, resident memory and acceleration statistics, and per-scenario
// speedups and greedy output parity.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "model/qwen35.h"
#include "runtime/generator.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace mere {

// One scenario: a user message sent through the model's chat template (thinking off), or a raw prompt.
struct BenchmarkWorkload {
  std::string name;
  std::string prompt;
};

// The five fixed workloads (bench-receipts.md §6), in their canonical order: code, chat, prose,
// math, summary. The collector script carries the same texts (checked by its smoke test).
const std::vector<BenchmarkWorkload>& builtin_workloads();
// Looks a built-in workload up by name; throws "[benchmark] unknown workload ..." otherwise.
const BenchmarkWorkload& builtin_workload(std::string_view name);

enum class BenchmarkVariant { Baseline, Adaptive, Forced };
std::string_view variant_name(BenchmarkVariant v);
BenchmarkVariant parse_variant(std::string_view name);  // throws on anything but the three names

struct BenchmarkOptions {
  std::vector<BenchmarkWorkload> scenarios;
  std::vector<BenchmarkVariant> variants{BenchmarkVariant::Baseline, BenchmarkVariant::Adaptive};  // run order
  int64_t tokens = 256;          // generated tokens per measured request (EOS ignored)
  int64_t warmups = 1;           // per scenario and variant, before the measured repetitions
  int64_t warmup_tokens = 256;
  int64_t repetitions = 3;
  // true: every variant's warm-ups, then the repetitions in rounds of one request per variant (a slow
  // drift of the machine, such as another tenant's load, falls on every variant alike); false: each
  // variant's warm-ups and repetitions before the next variant's (the order to session 29)
  bool interleave = true;
  float temperature = 0.0f;      // 0: greedy
  float top_p = 1.0f;
  uint64_t seed = 0;             // request RNG seed, the same for every request
  int64_t context = 8192;        // context limit (clamped to the model's max_position_embeddings)
  std::optional<int> block_size;       // overrides the environment / model default for MTP variants
  std::optional<double> cost_ratio;    // likewise
  bool profile = false;                // MTP phase timings (never for throughput numbers)
  bool chat_template = true;           // false: the prompt is tokenised as is
};

// A progress line for stderr; the caller decides where it goes.
using BenchmarkProgress = std::function<void(const std::string&)>;

// Runs every scenario and returns the document described in docs/benchmark.md ("scenarios" plus
// "settings"; the caller adds "model" and "process"). tmpl may be null when !opt.chat_template.
// Throws mere::Error for a prompt that does not fit the context with the requested tokens.
Json run_benchmark(const Qwen35Model& model, const Tokenizer& tok, const ChatTemplate* tmpl,
                   std::span<const TokenId> eos_ids, const BenchmarkOptions& opt, const BenchmarkProgress& progress);

// The speculation options a variant runs with: baseline = Off; adaptive/forced = from_env() with
// the mode set and the explicit block size / cost ratio / profile flags applied on top.
SpeculationOptions variant_speculation(BenchmarkVariant v, const BenchmarkOptions& opt);
Json speculation_json(const SpeculationOptions& s);
Json acceleration_json(const AccelerationStats& a);

// VmRSS and VmHWM of this process in bytes (/proc/self/status; 0 where unavailable).
struct ResidentMemory {
  int64_t resident_bytes = 0;
  int64_t peak_resident_bytes = 0;
};
ResidentMemory read_resident_memory();
// Parses the text of a /proc/<pid>/status file.
ResidentMemory parse_proc_status_memory(std::string_view status);

// Every MERERUN_Q35_* variable of this process's environment, name -> value (sorted).
Json runtime_environment_json();

// Median / min / max of a sample (0s for an empty one).
struct SampleSummary {
  double median = 0, min = 0, max = 0;
};
SampleSummary summarize_sample(std::vector<double> values);

}  // namespace mere
