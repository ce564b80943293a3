// Shared output for generation commands: the --stats line and the --json document.
#pragma once
#include <string>

#include "core/json.h"
#include "runtime/text_generation.h"

namespace mere::cli {

// One line on stderr: prompt tokens, prefill tok/s, decode tok/s, time to first token.
void print_stats(const GenerationStats& s);
Json stats_json(const GenerationStats& s);
Json acceleration_json(const AccelerationStats& a);
Json result_json(const TextResult& r);

}  // namespace mere::cli
