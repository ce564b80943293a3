// mere::Tokenizer: Hugging Face tokenizer.json (byte-level BPE: Qwen2/3/3.5 and GPT-2 style) with
// the same ids as HF tokenizers: added/special tokens matched in the raw text first, NFC, the Split
// regex read from the file, ByteLevel, BPE merges. Also decoding and a streaming detokeniser that
// never emits a broken UTF-8 sequence. Thread-safe after construction. See docs/tokenizer.md.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mere {

class Json;

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

struct EncodeOptions {
  bool add_special = true;    // HF add_special_tokens: the post-processor's template tokens (Qwen adds none)
  bool parse_special = true;  // match special tokens written in the text; false = HF encode_special_tokens
};

struct EncodeInfo {
  size_t invalid_utf8 = 0;  // ill-formed UTF-8 sequences in the input, each replaced by U+FFFD
};

class Tokenizer {
 public:
  // Reads DIR/tokenizer.json. Throws mere::Error naming the file and the unsupported/malformed part.
  static Tokenizer from_dir(const std::string& model_dir);
  static Tokenizer from_file(const std::string& path);
  static Tokenizer from_json(const Json& tokenizer_json, std::string_view source = "tokenizer.json");

  std::vector<int32_t> encode(std::string_view text, bool add_special = true) const;
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options, EncodeInfo* info = nullptr) const;
  // Concatenated token bytes as text; ill-formed UTF-8 is replaced with U+FFFD (like HF). Unknown
  // ids are skipped.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;
  // The raw bytes a token stands for (may be a partial UTF-8 sequence); empty for unknown ids.
  std::string_view token_bytes(int32_t id) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;  // vocab form ("Ġhello", "<|im_end|>")
  std::optional<std::string> id_to_token(int32_t id) const;
  int32_t vocab_size() const;  // highest id + 1 (model vocab and added tokens)
  bool is_special(int32_t id) const;
  bool is_added(int32_t id) const;
  const std::vector<AddedToken>& added_tokens() const;  // in file order

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

// Incremental detokeniser: push ids one at a time and receive the text that became complete.
// Bytes of an unfinished UTF-8 sequence are held back until the following tokens complete it (or
// it turns out ill-formed, then U+FFFD as decode would). The concatenation of everything returned
// by push() and finish() equals tokenizer.decode(all ids).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = false);
  std::string push(int32_t id);
  std::string push(std::span<const int32_t> ids);
  std::string finish();  // flushes held-back bytes (as U+FFFD) and resets
  void reset();
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tok_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace mere
