// The backend's environment switches (MERE_CUDA_*): each takes one of a fixed list of values.
#pragma once
#include <initializer_list>
#include <string_view>

namespace mere::cuda {

// Which of `choices` environment variable `name` holds: its index, or -1 when unset or empty. Any
// other value is a mere::Error naming the variable, the allowed values and the value found. A switch
// that is on by default tests `!= <index of its off value>` (unset is -1, not 0).
int env_choice(const char* name, std::initializer_list<std::string_view> choices);

}  // namespace mere::cuda
