// Backend selection by name. Fast backends register here as they are added.
#include "backend/backend.h"
#include "core/error.h"

namespace mere {

std::unique_ptr<Backend> make_backend(const std::string& name) {
  if (name == "ref" || name == "cpu" || name.empty()) return make_cpu_reference_backend();
  fail("backend", cat("unknown backend \"", name, "\": expected ref or cpu"));
}

}  // namespace mere
