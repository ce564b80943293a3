// The fast CPU backend ("cpu"): AVX2/FMA kernels chosen at run time (portable kernels otherwise),
// a thread pool, int8-activation quantised matrix products read straight from the MLX layout.
// Tests construct it with an explicit ISA to cover the portable path on AVX2 machines too.
#pragma once
#include <memory>

#include "backend/backend.h"
#include "backend/cpu/fast/kernels.h"

namespace mere {

struct FastCpuOptions {
  int threads = 0;              // <= 0: default_threads() (physical cores, or the CLI's --threads)
  bool force_generic = false;  // use the portable kernels even when AVX2 is available
};

std::unique_ptr<Backend> make_cpu_fast_backend(const FastCpuOptions& opt = {});

}  // namespace mere
