// Errors: every failure is a mere::Error whose message reads "[where] what is wrong: expected X, got Y".
// The CLI catches it, prints it and exits non-zero; nothing in the library aborts on bad input.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace mere {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <class... Args>
std::string cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

[[noreturn]] inline void fail(std::string_view where, std::string_view what) {
  throw Error(cat("[", where, "] ", what));
}

}  // namespace mere

// MERE_CHECK(cond, "where", "message parts", ...): throws mere::Error when cond is false.
#define MERE_CHECK(cond, where, ...)                      \
  do {                                                    \
    if (!(cond)) ::mere::fail((where), ::mere::cat(__VA_ARGS__)); \
  } while (0)
