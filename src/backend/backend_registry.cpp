// Backend selection by name: "ref" is the CPU reference (ops.h), "cpu" the fast CPU backend
// (AVX2/FMA when the CPU has it, portable kernels otherwise; default_threads() workers).
#include "backend/backend.h"
#include "backend/cpu/fast/fast_backend.h"
#include "core/error.h"

namespace mere {

std::unique_ptr<Backend> make_backend(const std::string& name) {
  if (name == "ref") return make_cpu_reference_backend();
  if (name == "cpu" || name.empty()) return make_cpu_fast_backend();
  fail("backend", cat("unknown backend \"", name, "\": expected ref or cpu"));
}

}  // namespace mere
