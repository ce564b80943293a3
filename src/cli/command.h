// The CLI's command registry and flag parser. Each subcommand lives in its own cmd_*.cpp and
// registers itself with MERE_COMMAND; `mere.run <group> <name> --help` prints its flags.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace mere::cli {

struct Flag {
  std::string name;         // without the leading "--"
  std::string value_name;   // empty: boolean switch; otherwise the flag takes a value ("N", "DIR")
  std::string help;
  std::string default_value;  // shown in --help; empty: none
};

class Args {
 public:
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::string get(const std::string& name, const std::string& def = "") const;
  std::string require(const std::string& name) const;  // throws naming the missing flag
  int64_t get_int(const std::string& name, int64_t def) const;
  double get_double(const std::string& name, double def) const;
  bool flag(const std::string& name) const { return has(name); }
  std::vector<std::string> get_all(const std::string& name) const;  // repeated flags
  const std::vector<std::string>& positional() const { return positional_; }

  std::multimap<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

struct Command {
  std::string path;      // "text generate"
  std::string summary;   // one line
  std::string usage;     // extra help text (may be empty)
  std::vector<Flag> flags;
  std::function<int(const Args&)> run;
  bool allow_positional = false;
};

std::vector<Command>& registry();
bool register_command(Command c);

}  // namespace mere::cli

#define MERE_CLI_CONCAT2(a, b) a##b
#define MERE_CLI_CONCAT(a, b) MERE_CLI_CONCAT2(a, b)
// MERE_COMMAND(Command{...}); at namespace scope in a cmd_*.cpp file.
#define MERE_COMMAND(...) \
  static const bool MERE_CLI_CONCAT(mere_cmd_registered_, __LINE__) = ::mere::cli::register_command(__VA_ARGS__)
