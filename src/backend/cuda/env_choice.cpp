#include "backend/cuda/env_choice.h"

#include <cstdlib>
#include <string>

#include "core/error.h"

namespace mere::cuda {

int env_choice(const char* name, std::initializer_list<std::string_view> choices) {
  const char* e = std::getenv(name);
  if (e == nullptr || *e == '\0') return -1;
  int i = 0;
  std::string allowed;
  for (std::string_view c : choices) {
    if (c == e) return i;
    allowed += (i == 0 ? "" : i + 1 == static_cast<int>(choices.size()) ? " or " : ", ") + std::string(c);
    ++i;
  }
  MERE_CHECK(false, name, "expected ", allowed, ", got '", e, "'");
  return -1;
}

int64_t env_int(const char* name, int64_t dflt, int64_t lo, int64_t hi, const char* what) {
  const char* e = std::getenv(name);
  if (e == nullptr || *e == 0) return dflt;
  char* end = nullptr;
  const long v = std::strtol(e, &end, 10);
  MERE_CHECK(end != e && *end == 0 && v >= lo && v <= hi, name, "expected ", what, " in [", lo, ", ", hi, "], got '", e,
             "'");
  return v;
}

}  // namespace mere::cuda
