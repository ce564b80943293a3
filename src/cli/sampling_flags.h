// Sampling/stop flags shared by `text generate` and `text chat`, and their translation into the
// request overrides that GenerationConfig::resolve layers over the model's defaults.
#pragma once
#include <vector>

#include "cli/command.h"
#include "model/generation_config.h"

namespace mere::cli {

std::vector<Flag> sampling_flags();
SamplingOverrides sampling_overrides(const Args& a);

}  // namespace mere::cli
