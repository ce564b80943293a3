// Builds tokenizer.json / tokenizer_config.json for synthetic checkpoints (see synth_tokenizer.h).
// The JSON mirrors the structure of real Qwen tokenizer files so the same reader handles both.
#include "model/synth_tokenizer.h"

#include <algorithm>

#include "core/error.h"

namespace mere {

namespace {

// Qwen3.5 pre-tokenizer split regex (qwen35.md §6.1).
const char* kSplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

Json byte_level() {
  Json j = Json::object();
  j["type"] = "ByteLevel";
  j["add_prefix_space"] = false;
  j["trim_offsets"] = false;
  j["use_regex"] = false;
  return j;
}

void append_utf8(std::string& s, uint32_t cp) {
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace

std::string byte_level_char(uint8_t b) {
  auto printable = [](int x) { return (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255); };
  uint32_t cp = b;
  if (!printable(b)) {
    int n = 0;  // the k-th non-printable byte maps to 256 + k
    for (int x = 0; x < b; ++x)
      if (!printable(x)) ++n;
    cp = 256 + n;
  }
  std::string s;
  append_utf8(s, cp);
  return s;
}

SynthTokenizerLayout synth_tokenizer_layout(int64_t vocab_size) {
  MERE_CHECK(vocab_size >= 263, "synth_tokenizer", "vocab_size: expected >= 263 (256 bytes + 7 specials), got ",
             vocab_size);
  SynthTokenizerLayout l;
  if (vocab_size >= 248077) {
    l.specials = {{"<|endoftext|>", 248044}, {"<|im_start|>", 248045}, {"<|im_end|>", 248046},
                  {"<tool_call>", 248058},   {"</tool_call>", 248059}, {"<think>", 248068},
                  {"</think>", 248069}};
  } else {
    l.specials = {{"<|endoftext|>", 256}, {"<|im_start|>", 257}, {"<|im_end|>", 258}, {"<think>", 259},
                  {"</think>", 260},      {"<tool_call>", 261},   {"</tool_call>", 262}};
  }
  for (const auto& [s, id] : l.specials) {
    if (s == "<|endoftext|>") l.endoftext = id;
    if (s == "<|im_start|>") l.im_start = id;
    if (s == "<|im_end|>") l.im_end = id;
    l.size = std::max(l.size, id + 1);
  }
  return l;
}

const std::string& synth_chat_template() {
  static const std::string t =
      "{%- for message in messages %}"
      "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
      "{%- endfor %}"
      "{%- if add_generation_prompt %}"
      "{{- '<|im_start|>assistant\\n' }}"
      "{%- if enable_thinking is defined and enable_thinking is false %}"
      "{{- '<think>\\n\\n</think>\\n\\n' }}"
      "{%- else %}"
      "{{- '<think>\\n' }}"
      "{%- endif %}"
      "{%- endif %}";
  return t;
}

Json synth_tokenizer_json(const SynthTokenizerLayout& layout) {
  Json t = Json::object();
  t["version"] = "1.0";
  t["truncation"] = nullptr;
  t["padding"] = nullptr;
  Json added = Json::array();
  for (const auto& [content, id] : layout.specials) {
    Json a = Json::object();
    a["id"] = id;
    a["content"] = content;
    a["single_word"] = false;
    a["lstrip"] = false;
    a["rstrip"] = false;
    a["normalized"] = false;
    a["special"] = true;
    added.push_back(std::move(a));
  }
  t["added_tokens"] = std::move(added);
  Json norm = Json::object();
  norm["type"] = "NFC";
  t["normalizer"] = std::move(norm);

  Json split = Json::object();
  split["type"] = "Split";
  Json pat = Json::object();
  pat["Regex"] = kSplitRegex;
  split["pattern"] = std::move(pat);
  split["behavior"] = "Isolated";
  split["invert"] = false;
  Json pre = Json::object();
  pre["type"] = "Sequence";
  Json seq = Json::array();
  seq.push_back(std::move(split));
  seq.push_back(byte_level());
  pre["pretokenizers"] = std::move(seq);
  t["pre_tokenizer"] = std::move(pre);
  t["post_processor"] = byte_level();
  t["decoder"] = byte_level();

  Json model = Json::object();
  model["type"] = "BPE";
  model["dropout"] = nullptr;
  model["unk_token"] = nullptr;
  model["continuing_subword_prefix"] = "";
  model["end_of_word_suffix"] = "";
  model["fuse_unk"] = false;
  model["byte_fallback"] = false;
  model["ignore_merges"] = false;
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab.as_object().emplace_back(byte_level_char(static_cast<uint8_t>(b)), Json(b));
  // Hugging Face tokenizers renumbers added tokens that are not in the model vocab to the next free
  // ids, so specials placed after a gap (the real 248044.. ids) must also be vocab entries.
  bool contiguous = true;
  for (size_t i = 0; i < layout.specials.size(); ++i)
    contiguous = contiguous && layout.specials[i].second == 256 + static_cast<int64_t>(i);
  if (!contiguous)
    for (const auto& [content, id] : layout.specials) vocab.as_object().emplace_back(content, Json(id));
  model["vocab"] = std::move(vocab);
  model["merges"] = Json::array();
  t["model"] = std::move(model);
  return t;
}

Json synth_tokenizer_config_json(const SynthTokenizerLayout& layout) {
  Json c = Json::object();
  c["add_bos_token"] = false;
  c["add_prefix_space"] = false;
  Json dec = Json::object();
  for (const auto& [content, id] : layout.specials) {
    Json a = Json::object();
    a["content"] = content;
    a["lstrip"] = false;
    a["normalized"] = false;
    a["rstrip"] = false;
    a["single_word"] = false;
    a["special"] = true;
    dec.as_object().emplace_back(std::to_string(id), std::move(a));
  }
  c["added_tokens_decoder"] = std::move(dec);
  Json extra = Json::array();
  extra.push_back("<|im_start|>");
  extra.push_back("<|im_end|>");
  c["additional_special_tokens"] = std::move(extra);
  c["bos_token"] = nullptr;
  c["chat_template"] = synth_chat_template();
  c["clean_up_tokenization_spaces"] = false;
  c["eos_token"] = "<|im_end|>";
  c["errors"] = "replace";
  c["model_max_length"] = 262144;
  c["pad_token"] = "<|endoftext|>";
  c["split_special_tokens"] = false;
  c["tokenizer_class"] = "Qwen2Tokenizer";
  c["unk_token"] = nullptr;
  return c;
}

}  // namespace mere
