// Sampling/stop flags shared by `text generate` and `text chat`, and their translation into the
// request overrides that GenerationConfig::resolve layers over the model's defaults.
#pragma once
#include <vector>

#include "cli/command.h"
#include "model/generation_config.h"
#include "runtime/generator.h"

namespace mere::cli {

std::vector<Flag> sampling_flags();
SamplingOverrides sampling_overrides(const Args& a);
// MERERUN_Q35_* from the environment, then --mtp / --no-mtp / --mtp-block-size / --mtp-depth.
SpeculationOptions speculation_options(const Args& a);

}  // namespace mere::cli
