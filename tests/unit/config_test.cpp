// config.json parsing: nested and flat forms, defaults, and rejected configurations.
#include <gtest/gtest.h>

#include "core/error.h"
#include "model/config.h"

using mere::Json;
using mere::LayerKind;
using mere::parse_model_config;

namespace {
const char* kText = R"({"model_type":"qwen3_5_text","vocab_size":512,"hidden_size":64,"num_hidden_layers":4,
  "num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,"linear_num_key_heads":2,"linear_key_head_dim":16,
  "linear_num_value_heads":4,"linear_value_head_dim":16,"intermediate_size":128,
  "rope_parameters":{"rope_theta":10000000,"partial_rotary_factor":0.25,"rope_type":"default"},"eos_token_id":5})";

std::string err(const std::string& text) {
  try {
    parse_model_config(Json::parse(text), "config.json");
  } catch (const mere::Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Config, FlatDefaults) {
  auto c = parse_model_config(Json::parse(kText), "config.json");
  EXPECT_FALSE(c.is_moe);
  EXPECT_EQ(c.rotary_dim, 8);
  ASSERT_EQ(c.layer_types.size(), 4u);
  EXPECT_EQ(c.layer_types[3], LayerKind::Full);
  EXPECT_EQ(c.layer_types[0], LayerKind::Linear);
  EXPECT_EQ(c.conv_dim(), 2 * 32 + 64);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{5});
}

TEST(Config, NestedTextConfig) {
  std::string nested = std::string(R"({"architectures":["Qwen3_5ForConditionalGeneration"],"model_type":"qwen3_5",)") +
                       R"("tie_word_embeddings":true,"vision_config":{"depth":2},"text_config":)" + kText + "}";
  auto c = parse_model_config(Json::parse(nested), "config.json");
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.hidden_size, 64);
}

TEST(Config, RejectsBadConfigs) {
  EXPECT_NE(err(R"({"architectures":["LlamaForCausalLM"]})").find("unknown architecture"), std::string::npos);
  EXPECT_NE(err(R"({"model_type":"qwen3_5_text"})").find("missing required field"), std::string::npos);
  std::string s = kText;
  EXPECT_NE(err(s.substr(0, s.size() - 1) + R"(,"layer_types":["linear_attention"]})").find("layer_types has 1"),
            std::string::npos);
  EXPECT_NE(err(s.substr(0, s.size() - 1) +
                R"(,"layer_types":["linear_attention","x","full_attention","full_attention"]})")
                .find("unknown layer type"),
            std::string::npos);
  EXPECT_NE(err(s.substr(0, s.size() - 1) + R"(,"linear_num_value_heads":3})").find("not a multiple"), std::string::npos);
  std::string moe = s;
  moe.replace(moe.find("qwen3_5_text"), 12, "qwen3_5_moe_text");
  EXPECT_NE(err(moe).find("num_experts"), std::string::npos);
}
