// Public entry point of the Jinja interpreter used for chat templates: parse a template once,
// render it many times against a JSON context. Semantics follow @huggingface/jinja (HF's
// JavaScript Jinja, trim_blocks + lstrip_blocks); see docs/chat-template.md for the details.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "core/json.h"

namespace mere::jinja {

struct Program;

class Template {
 public:
  // Throws mere::Error "[jinja] <name>:<line>: ..." on syntax errors and unsupported statements.
  explicit Template(std::string_view source, std::string name = "template");

  // context must be a JSON object; its keys become template variables. Throws mere::Error
  // "[jinja] <name>:<line>: ..." on runtime errors (unknown filter/test/method, raise_exception,
  // type errors).
  std::string render(const Json& context) const;

  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::shared_ptr<const Program> program_;
};

}  // namespace mere::jinja
