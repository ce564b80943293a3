// The byte-level tokenizer that synthetic checkpoints ship: 256 byte tokens (GPT-2 byte-to-unicode
// alphabet, id = byte value, no merges) plus seven special tokens as added tokens, with the
// Qwen3.5 split regex, NFC normaliser and ByteLevel decoder, so every text command can run on a
// synthetic model. Special ids are the real Qwen3.5 ones when the vocab is the real 248320 (then
// they are also model-vocab entries, which Hugging Face tokenizers needs to keep ids after a gap).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/json.h"

namespace mere {

struct SynthTokenizerLayout {
  std::vector<std::pair<std::string, int64_t>> specials;  // content -> id, ascending ids
  int64_t endoftext = 0, im_start = 0, im_end = 0;
  int64_t size = 0;  // highest id + 1 (<= vocab_size)
};

// vocab_size >= 248077: real ids (<|endoftext|> 248044, <|im_start|> 248045, <|im_end|> 248046,
// <tool_call> 248058, </tool_call> 248059, <think> 248068, </think> 248069); otherwise 256..262.
// Throws when vocab_size < 263.
SynthTokenizerLayout synth_tokenizer_layout(int64_t vocab_size);

// GPT-2 bytes_to_unicode: the UTF-8 string that stands for byte b in byte-level BPE vocabularies.
std::string byte_level_char(uint8_t b);

Json synth_tokenizer_json(const SynthTokenizerLayout& layout);         // tokenizer.json
Json synth_tokenizer_config_json(const SynthTokenizerLayout& layout);  // tokenizer_config.json (ChatML template)
// The minimal ChatML chat template (generation prompt "<|im_start|>assistant\n<think>\n", or with
// enable_thinking=false "<|im_start|>assistant\n<think>\n\n</think>\n\n", as Qwen3.5).
const std::string& synth_chat_template();

}  // namespace mere
