// The backend's environment switches (MERE_CUDA_*): one of a fixed list of values, or an integer.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string_view>

namespace mere::cuda {

// Which of `choices` environment variable `name` holds: its index, or -1 when unset or empty. Any
// other value is a mere::Error naming the variable, the allowed values and the value found. A switch
// that is on by default tests `!= <index of its off value>` (unset is -1, not 0).
int env_choice(const char* name, std::initializer_list<std::string_view> choices);

// Environment variable `name` as an integer in [lo, hi]; unset or empty: `dflt`. Anything else is a
// mere::Error naming the variable, `what` it sets and the range.
int64_t env_int(const char* name, int64_t dflt, int64_t lo, int64_t hi, const char* what);

}  // namespace mere::cuda
