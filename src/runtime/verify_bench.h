// Oracle-fed verification benchmark (issue 7, mtp.md §6): how many tokens per second a verification
// pass of width w confirms when every draft is accepted. A greedy continuation is first decoded
// serially (the oracle); each width then re-runs that continuation from the same prefilled state in
// passes of w rows (the greedy speculative decoder's own pass: recurrent GatedDeltaNet, traced for
// replay, each row's argmax id returned instead of its logits), checking that every row's argmax is
// the oracle's next token — so the benchmark is
// also a batch-width invariance check on the running backend. Also the cost of one MTP head step
// against one target step (the draft-cost ratio c of the adaptive policy).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "core/json.h"
#include "model/qwen35.h"

namespace mere {

struct VerifyBenchOptions {
  std::vector<int64_t> widths{1, 4, 8, 9};  // pass widths (1 = one row per pass)
  int64_t prompt_tokens = 512;              // prefilled context before the measured passes
  int64_t passes = 16;                      // passes per repetition (each width: passes x w tokens)
  int64_t reps = 5;                         // measured repetitions after one warm-up
  uint32_t seed = 12345;                    // pseudo-random prompt ids
  // Greedy parity with forced MTP depths (issue 7 at real geometries: with random weights nearly
  // every draft is rejected, so rollback runs every round): `parity_tokens` greedy tokens (EOS
  // ignored) with MTP off, then with each forced depth; ids must be equal. Empty: skipped.
  std::vector<int64_t> parity_depths;
  int64_t parity_tokens = 64;
  int parity_block_size = 0;  // 0: the model's default block size
};

// Returns {"widths": [{width, tokens_per_s {median,min,max}, pass_ms, speedup_vs_width1,
// oracle_mismatches}], "target_step_ms", "head_step_ms", "head_cost_ratio", "parity": [{depth,
// equal, first_divergence, rounds, accepted, drafted}], ...}.
// progress (may be empty) is called with a line of text before each measurement.
Json run_verify_bench(const Qwen35Model& model, const VerifyBenchOptions& opt,
                      const std::function<void(const std::string&)>& progress = {});

}  // namespace mere
