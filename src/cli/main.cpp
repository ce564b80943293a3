// mere.run entry point: dispatches "<group> <command> [flags]" to the registered commands,
// prints help, rejects unknown flags, and turns mere::Error into a message and exit code 1.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <set>

#include "cli/command.h"
#include "core/error.h"

namespace mere::cli {

std::vector<Command>& registry() {
  static std::vector<Command> r;
  return r;
}
bool register_command(Command c) {
  registry().push_back(std::move(c));
  return true;
}

std::string Args::get(const std::string& name, const std::string& def) const {
  auto it = values_.find(name);
  return it == values_.end() ? def : it->second;
}
std::string Args::require(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) fail("cli", cat("missing required flag --", name));
  return it->second;
}
int64_t Args::get_int(const std::string& name, int64_t def) const {
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  try {
    size_t pos = 0;
    long long v = std::stoll(it->second, &pos);
    if (pos != it->second.size()) throw std::invalid_argument("trailing");
    return v;
  } catch (const std::exception&) {
    fail("cli", cat("--", name, ": expected an integer, got \"", it->second, "\""));
  }
}
double Args::get_double(const std::string& name, double def) const {
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  try {
    size_t pos = 0;
    double v = std::stod(it->second, &pos);
    if (pos != it->second.size()) throw std::invalid_argument("trailing");
    return v;
  } catch (const std::exception&) {
    fail("cli", cat("--", name, ": expected a number, got \"", it->second, "\""));
  }
}
std::vector<std::string> Args::get_all(const std::string& name) const {
  std::vector<std::string> out;
  auto [a, b] = values_.equal_range(name);
  for (auto it = a; it != b; ++it) out.push_back(it->second);
  return out;
}

namespace {

void print_command_help(const Command& c) {
  std::printf("usage: mere.run %s [flags]\n\n%s\n", c.path.c_str(), c.summary.c_str());
  if (!c.usage.empty()) std::printf("\n%s\n", c.usage.c_str());
  std::printf("\nflags:\n");
  for (const auto& f : c.flags) {
    std::string lhs = "--" + f.name + (f.value_name.empty() ? "" : " " + f.value_name);
    std::string help = f.help;
    if (!f.default_value.empty()) help += " (default: " + f.default_value + ")";
    std::printf("  %-28s %s\n", lhs.c_str(), help.c_str());
  }
  std::printf("  %-28s %s\n", "--help", "show this help");
}

void print_top_help(const std::string& group) {
  std::printf("mere.run: run Qwen3.5-family models locally and fast (CPU and CUDA)\n\n");
  std::printf("usage: mere.run <command> [flags]   (mere.run <command> --help for its flags)\n\ncommands:\n");
  for (const auto& c : registry())
    if (group.empty() || c.path.rfind(group + " ", 0) == 0)
      std::printf("  %-22s %s\n", c.path.c_str(), c.summary.c_str());
}

Args parse_flags(const Command& c, int argc, char** argv, int start) {
  Args a;
  for (int i = start; i < argc; ++i) {
    std::string tok = argv[i];
    if (tok.rfind("--", 0) != 0 || tok == "--") {
      if (!c.allow_positional) fail("cli", cat("unexpected argument \"", tok, "\" (see mere.run ", c.path, " --help)"));
      a.positional_.push_back(tok);
      continue;
    }
    std::string name = tok.substr(2), value;
    bool inline_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inline_value = true;
    }
    const Flag* spec = nullptr;
    for (const auto& f : c.flags)
      if (f.name == name) spec = &f;
    if (!spec) fail("cli", cat("unknown flag --", name, " for \"", c.path, "\" (see mere.run ", c.path, " --help)"));
    if (spec->value_name.empty()) {
      if (inline_value) fail("cli", cat("--", name, " takes no value"));
      a.values_.emplace(name, "1");
    } else {
      if (!inline_value) {
        if (i + 1 >= argc) fail("cli", cat("--", name, " needs a value (", spec->value_name, ")"));
        value = argv[++i];
      }
      a.values_.emplace(name, value);
    }
  }
  return a;
}

}  // namespace
}  // namespace mere::cli

int main(int argc, char** argv) {
  using namespace mere::cli;
  try {
    if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
      print_top_help("");
      return argc < 2 ? 2 : 0;
    }
    if (!std::strcmp(argv[1], "--version")) {
      std::printf("mere.run 0.1.0\n");
      return 0;
    }
    // Longest matching command path: "text generate" before "text".
    const Command* best = nullptr;
    int consumed = 0;
    for (const auto& c : registry()) {
      std::vector<std::string> words;
      size_t s = 0;
      while (s <= c.path.size()) {
        size_t e = c.path.find(' ', s);
        if (e == std::string::npos) e = c.path.size();
        words.push_back(c.path.substr(s, e - s));
        s = e + 1;
      }
      if (static_cast<int>(words.size()) >= argc) continue;
      bool match = true;
      for (size_t k = 0; k < words.size(); ++k)
        if (words[k] != argv[1 + k]) match = false;
      if (match && static_cast<int>(words.size()) > consumed) {
        best = &c;
        consumed = static_cast<int>(words.size());
      }
    }
    if (!best) {
      bool is_group = false;
      for (const auto& c : registry())
        if (c.path.rfind(std::string(argv[1]) + " ", 0) == 0) is_group = true;
      if (is_group && (argc == 2 || !std::strcmp(argv[2], "--help"))) {
        print_top_help(argv[1]);
        return argc == 2 ? 2 : 0;
      }
      std::fprintf(stderr, "mere.run: unknown command \"%s%s%s\" (see mere.run --help)\n", argv[1],
                   argc > 2 ? " " : "", argc > 2 ? argv[2] : "");
      return 2;
    }
    for (int i = 1 + consumed; i < argc; ++i)
      if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
        print_command_help(*best);
        return 0;
      }
    Args args = parse_flags(*best, argc, argv, 1 + consumed);
    return best->run(args);
  } catch (const mere::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
