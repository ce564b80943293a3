// Loads tokenizer.json and runs HF's encode pipeline: added tokens (raw, then normalised), NFC, the
// pre-tokenizer sequence (Split regex + ByteLevel), byte-level BPE over raw bytes with a pair-keyed
// merge table and a word cache, then the post-processor. Decoding maps ids back to their bytes.
#include "text/tokenizer.h"

#include <algorithm>
#include <array>
#include <memory>
#include <fstream>
#include <mutex>
#include <queue>
#include <shared_mutex>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "core/json.h"
#include "text/tokenizer_regex.h"
#include "text/unicode.h"

namespace mere {

namespace {

constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// GPT-2 bytes_to_unicode: byte -> code point standing for it in byte-level vocabularies.
std::array<char32_t, 256> byte_to_char_table() {
  std::array<char32_t, 256> t{};
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    t[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
  }
  return t;
}

// Open-addressing map from a pair of token ids to (rank << 32 | merged id).
class PairMap {
 public:
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    keys_.assign(cap, kEmpty);
    vals_.assign(cap, 0);
    mask_ = cap - 1;
  }
  void insert_or_assign(uint64_t key, uint64_t val) {
    size_t i = slot(key);
    while (keys_[i] != kEmpty && keys_[i] != key) i = (i + 1) & mask_;
    keys_[i] = key;
    vals_[i] = val;
  }
  const uint64_t* find(uint64_t key) const {
    if (keys_.empty()) return nullptr;
    size_t i = slot(key);
    for (;;) {
      if (keys_[i] == key) return &vals_[i];
      if (keys_[i] == kEmpty) return nullptr;
      i = (i + 1) & mask_;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~0ull;
  size_t slot(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 20) & mask_; }
  std::vector<uint64_t> keys_, vals_;
  size_t mask_ = 0;
};

inline uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
struct StringEq {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const { return a == b; }
};
template <class V>
using StringMap = std::unordered_map<std::string, V, StringHash, StringEq>;

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

struct PreTokenizer {
  enum Kind { Split, ByteLevel } kind = Split;
  std::unique_ptr<text::Regex> regex;  // Split with a Regex pattern (or ByteLevel with use_regex)
  std::string literal;                 // Split with a String pattern
  SplitBehavior behavior = SplitBehavior::Isolated;
  bool invert = false;
  bool add_prefix_space = false;
};

// Leftmost-longest matcher over the added tokens (like HF's Aho-Corasick, MatchKind::LeftmostLongest).
struct AddedMatcher {
  std::array<bool, 256> first{};
  std::vector<std::vector<std::pair<std::string, int>>> by_byte = std::vector<std::vector<std::pair<std::string, int>>>(256);
  bool empty = true;

  void add(const std::string& pattern, int token_index) {
    if (pattern.empty()) return;
    auto b = static_cast<unsigned char>(pattern[0]);
    first[b] = true;
    by_byte[b].push_back({pattern, token_index});
    empty = false;
  }
  void finish() {
    for (auto& v : by_byte)
      std::stable_sort(v.begin(), v.end(), [](const auto& x, const auto& y) { return x.first.size() > y.first.size(); });
  }
  // All non-overlapping leftmost-longest matches: (begin, end, token index).
  void find(std::string_view s, std::vector<std::tuple<size_t, size_t, int>>& out) const {
    size_t i = 0;
    while (i < s.size()) {
      auto b = static_cast<unsigned char>(s[i]);
      if (first[b]) {
        bool hit = false;
        for (const auto& [pat, idx] : by_byte[b]) {
          if (s.size() - i >= pat.size() && s.compare(i, pat.size(), pat) == 0) {
            out.emplace_back(i, i + pat.size(), idx);
            i += pat.size();
            hit = true;
            break;
          }
        }
        if (hit) continue;
      }
      ++i;
    }
  }
};

struct Piece {
  size_t begin, end;
  int32_t id;  // -1: text
};

// Buffers reused across the pieces of one encode() call.
struct Scratch {
  std::vector<Piece> pieces;
  std::vector<std::tuple<size_t, size_t, int>> added_matches;
  std::string normalized;
  std::vector<std::string_view> splits, next;
  std::vector<std::pair<size_t, size_t>> regex_matches;
  std::vector<std::tuple<size_t, size_t, bool>> matches;
  std::vector<std::pair<std::pair<size_t, size_t>, bool>> parts;  // (offsets, remove)
  std::vector<std::unique_ptr<std::string>> arena;                // prefixed splits (add_prefix_space)
  std::vector<int32_t> syms;
};

}  // namespace

struct Tokenizer::Impl {
  std::string source;
  // vocabulary
  std::vector<std::string> id_token;  // vocab form; empty for ids that do not exist
  std::vector<uint8_t> id_flags;      // 1 exists, 2 added, 4 special
  std::string bytes_pool;             // decoded bytes of every id
  std::vector<uint32_t> bytes_off;    // id -> [bytes_off[id], bytes_off[id+1])
  StringMap<int32_t> token_id;        // vocab form -> id (added tokens override)
  // BPE
  std::array<int32_t, 256> byte_id{};
  PairMap merges;
  bool merges_unique = true;  // no two merges produce the same token: the simple algorithm equals HF's
  int32_t unk_id = -1;
  bool fuse_unk = false, ignore_merges = false;
  StringMap<int32_t> bytes_to_id;  // raw bytes -> id (only for ignore_merges)
  // pipeline
  bool nfc = false;
  std::vector<PreTokenizer> pre;
  std::vector<AddedToken> added;
  AddedMatcher raw_matcher, norm_matcher;
  std::vector<int32_t> post_prefix, post_suffix;
  // word cache
  mutable std::shared_mutex cache_mu;
  mutable StringMap<std::vector<int32_t>> cache;
  static constexpr size_t kCacheCapacity = 1 << 16, kCacheMaxWord = 256;

  [[noreturn]] void bad(std::string_view what) const { fail(source, what); }

  void load(const Json& j);
  void load_model(const Json& m);
  void load_normalizer(const Json& n);
  void load_pre_tokenizer(const Json& p);
  void load_post_processor(const Json& p);
  void check_decoder(const Json& d);

  void split_added(std::string_view s, const AddedMatcher& m, bool parse_special, Scratch& sc,
                   std::vector<Piece>& out) const;
  void encode_text(std::string_view piece, Scratch& sc, std::vector<int32_t>& ids) const;
  void pre_tokenize(std::string_view piece, Scratch& sc) const;
  void bpe_cached(std::string_view word, Scratch& sc, std::vector<int32_t>& ids) const;
  void bpe(std::string_view word, Scratch& sc, std::vector<int32_t>& out) const;
  void merge_simple(std::vector<int32_t>& syms) const;
  void merge_heap(std::vector<int32_t>& syms) const;

  bool exists(int32_t id) const { return id >= 0 && static_cast<size_t>(id) < id_flags.size() && (id_flags[id] & 1); }
};

// ------------------------------------------------------------------ loading

namespace {

std::string type_of(const Json& j) { return j.is_object() ? j.get_string("type", "") : ""; }

}  // namespace

void Tokenizer::Impl::load(const Json& j) {
  if (!j.is_object()) bad(cat("expected a JSON object, got ", Json::type_name(j.type())));
  const Json* model = j.find("model");
  if (!model || !model->is_object()) bad("missing \"model\": expected an object");
  load_model(*model);
  if (const Json* n = j.find("normalizer"); n && !n->is_null()) load_normalizer(*n);
  if (const Json* p = j.find("pre_tokenizer"); p && !p->is_null()) load_pre_tokenizer(*p);
  if (pre.empty() || std::none_of(pre.begin(), pre.end(), [](const PreTokenizer& p) { return p.kind == PreTokenizer::ByteLevel; }))
    bad("pre_tokenizer: expected a ByteLevel pre-tokenizer (only byte-level BPE is supported), got none");
  if (const Json* p = j.find("post_processor"); p && !p->is_null()) load_post_processor(*p);
  if (const Json* d = j.find("decoder"); d && !d->is_null()) check_decoder(*d);
  else bad("decoder: expected ByteLevel, got null");

  // Added tokens (after the model so ids may extend the vocabulary).
  if (const Json* at = j.find("added_tokens"); at && !at->is_null()) {
    if (!at->is_array()) bad("added_tokens: expected an array");
    for (const Json& t : at->as_array()) {
      AddedToken a;
      a.id = static_cast<int32_t>(t.at("id").as_int());
      a.content = t.at("content").as_string();
      a.special = t.get_bool("special", false);
      a.single_word = t.get_bool("single_word", false);
      a.lstrip = t.get_bool("lstrip", false);
      a.rstrip = t.get_bool("rstrip", false);
      a.normalized = t.get_bool("normalized", !a.special);
      if (a.id < 0 || a.id > (1 << 30)) bad(cat("added_tokens: id of \"", a.content, "\": expected >= 0, got ", a.id));
      added.push_back(std::move(a));
    }
  }
  int32_t max_id = static_cast<int32_t>(id_token.size()) - 1;
  for (const auto& a : added) max_id = std::max(max_id, a.id);
  id_token.resize(max_id + 1);
  id_flags.resize(max_id + 1, 0);
  for (size_t i = 0; i < added.size(); ++i) {
    const auto& a = added[i];
    id_token[a.id] = a.content;
    id_flags[a.id] = 1 | 2 | (a.special ? 4 : 0);
    token_id[a.content] = a.id;
    if (a.content.empty()) continue;
    if (a.normalized) {
      std::string norm = nfc ? unicode::nfc(a.content) : a.content;
      norm_matcher.add(norm, static_cast<int>(i));
    } else {
      raw_matcher.add(a.content, static_cast<int>(i));
    }
  }
  raw_matcher.finish();
  norm_matcher.finish();

  // Bytes each id decodes to (ByteLevel decoder: a token whose every char is in the byte alphabet
  // stands for those bytes; any other token for its own UTF-8).
  auto b2c = byte_to_char_table();
  std::unordered_map<char32_t, uint8_t> c2b;
  for (int b = 0; b < 256; ++b) c2b[b2c[b]] = static_cast<uint8_t>(b);
  bytes_off.assign(id_token.size() + 1, 0);
  std::string tmp;
  for (size_t id = 0; id < id_token.size(); ++id) {
    bytes_off[id] = static_cast<uint32_t>(bytes_pool.size());
    const std::string& t = id_token[id];
    tmp.clear();
    bool all = true;
    auto* p = reinterpret_cast<const unsigned char*>(t.data());
    auto* end = p + t.size();
    while (p < end) {
      unicode::Utf8Step st = unicode::utf8_step(p, end);
      auto it = st.valid ? c2b.find(st.cp) : c2b.end();
      if (it == c2b.end()) {
        all = false;
        break;
      }
      tmp.push_back(static_cast<char>(it->second));
      p += st.len;
    }
    bytes_pool += all ? tmp : t;
    if (bytes_pool.size() > 0xFFFFFFF0u) bad("vocabulary too large");
  }
  bytes_off[id_token.size()] = static_cast<uint32_t>(bytes_pool.size());
}

void Tokenizer::Impl::load_model(const Json& m) {
  std::string type = m.get_string("type", "BPE");
  if (type != "BPE") bad(cat("model.type: expected BPE, got ", type));
  if (m.get_bool("byte_fallback", false)) bad("model.byte_fallback: expected false (byte-level BPE), got true");
  if (const Json* d = m.find("dropout"); d && !d->is_null() && d->as_number() != 0.0)
    bad(cat("model.dropout: expected null (deterministic BPE), got ", d->dump()));
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (const Json* v = m.find(k); v && !v->is_null() && !v->as_string().empty())
      bad(cat("model.", k, ": expected empty or null, got \"", v->as_string(), "\""));
  fuse_unk = m.get_bool("fuse_unk", false);
  ignore_merges = m.get_bool("ignore_merges", false);

  const Json& vocab = m.at("vocab");
  if (!vocab.is_object()) bad("model.vocab: expected an object of token -> id");
  int64_t max_id = -1;
  for (const auto& [tok, v] : vocab.as_object()) max_id = std::max(max_id, v.as_int());
  if (max_id > (1 << 30)) bad(cat("model.vocab: ids expected below 2^30, got ", max_id));
  id_token.assign(max_id + 1, std::string());
  id_flags.assign(max_id + 1, 0);
  token_id.reserve(vocab.size() * 2);
  for (const auto& [tok, v] : vocab.as_object()) {
    int64_t id = v.as_int();
    if (id < 0) bad(cat("model.vocab[\"", tok, "\"]: expected an id >= 0, got ", id));
    id_token[id] = tok;
    id_flags[id] = 1;
    token_id[tok] = static_cast<int32_t>(id);
  }
  auto b2c = byte_to_char_table();
  for (int b = 0; b < 256; ++b) {
    std::string s;
    unicode::append_utf8(s, b2c[b]);
    auto it = token_id.find(s);
    byte_id[b] = it == token_id.end() ? -1 : it->second;
  }
  if (const Json* u = m.find("unk_token"); u && u->is_string()) {
    auto it = token_id.find(u->as_string());
    if (it == token_id.end()) bad(cat("model.unk_token \"", u->as_string(), "\": expected a vocabulary token"));
    unk_id = it->second;
  }
  if (ignore_merges) {
    // Whole words found in the vocabulary bypass the merges; index the vocabulary by raw bytes.
    std::unordered_map<char32_t, uint8_t> c2b;
    for (int b = 0; b < 256; ++b) c2b[b2c[b]] = static_cast<uint8_t>(b);
    for (const auto& [tok, v] : vocab.as_object()) {
      std::string raw;
      auto* p = reinterpret_cast<const unsigned char*>(tok.data());
      auto* end = p + tok.size();
      bool ok = true;
      while (p < end && ok) {
        unicode::Utf8Step st = unicode::utf8_step(p, end);
        auto it = st.valid ? c2b.find(st.cp) : c2b.end();
        ok = it != c2b.end();
        if (ok) raw.push_back(static_cast<char>(it->second));
        p += st.len;
      }
      if (ok) bytes_to_id.emplace(raw, static_cast<int32_t>(v.as_int()));
    }
  }

  const Json* mj = m.find("merges");
  size_t count = mj && mj->is_array() ? mj->size() : 0;
  merges.reserve(count + 1);
  std::unordered_map<int32_t, int> produced;
  auto lookup = [&](std::string_view t, size_t rank) {
    auto it = token_id.find(t);
    if (it == token_id.end()) bad(cat("model.merges[", rank, "]: token \"", t, "\" expected in the vocabulary"));
    return it->second;
  };
  for (size_t rank = 0; rank < count; ++rank) {
    const Json& e = mj->at(rank);
    std::string a, b;
    if (e.is_string()) {
      const std::string& s = e.as_string();
      size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        bad(cat("model.merges[", rank, "]: expected \"left right\", got \"", s, "\""));
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2) {
      a = e.at(size_t{0}).as_string();
      b = e.at(size_t{1}).as_string();
    } else {
      bad(cat("model.merges[", rank, "]: expected \"a b\" or [a, b], got ", e.dump()));
    }
    int32_t ia = lookup(a, rank), ib = lookup(b, rank), inew = lookup(a + b, rank);
    merges.insert_or_assign(pair_key(ia, ib), (static_cast<uint64_t>(rank) << 32) | static_cast<uint32_t>(inew));
    if (++produced[inew] > 1) merges_unique = false;
  }
}

void Tokenizer::Impl::load_normalizer(const Json& n) {
  std::string type = type_of(n);
  if (type == "NFC") {
    nfc = true;
  } else if (type == "Sequence") {
    for (const Json& k : n.at("normalizers").as_array()) load_normalizer(k);
  } else {
    bad(cat("normalizer: expected NFC (or a Sequence of it), got ", type.empty() ? n.dump() : type));
  }
}

void Tokenizer::Impl::load_pre_tokenizer(const Json& p) {
  std::string type = type_of(p);
  if (type == "Sequence") {
    for (const Json& k : p.at("pretokenizers").as_array()) load_pre_tokenizer(k);
    return;
  }
  PreTokenizer t;
  if (type == "Split") {
    t.kind = PreTokenizer::Split;
    const Json& pat = p.at("pattern");
    if (const Json* r = pat.find("Regex")) {
      try {
        t.regex = std::make_unique<text::Regex>(r->as_string());
      } catch (const Error& e) {
        bad(cat("pre_tokenizer Split pattern: ", e.what()));
      }
    } else if (const Json* s = pat.find("String")) {
      t.literal = s->as_string();
    } else {
      bad(cat("pre_tokenizer Split pattern: expected {\"Regex\": ...} or {\"String\": ...}, got ", pat.dump()));
    }
    std::string beh = p.get_string("behavior", "Isolated");
    if (beh == "Removed") t.behavior = SplitBehavior::Removed;
    else if (beh == "Isolated") t.behavior = SplitBehavior::Isolated;
    else if (beh == "MergedWithPrevious") t.behavior = SplitBehavior::MergedWithPrevious;
    else if (beh == "MergedWithNext") t.behavior = SplitBehavior::MergedWithNext;
    else if (beh == "Contiguous") t.behavior = SplitBehavior::Contiguous;
    else bad(cat("pre_tokenizer Split behavior: expected Removed|Isolated|MergedWithPrevious|MergedWithNext|Contiguous, got ", beh));
    t.invert = p.get_bool("invert", false);
  } else if (type == "ByteLevel") {
    t.kind = PreTokenizer::ByteLevel;
    t.add_prefix_space = p.get_bool("add_prefix_space", true);
    if (p.get_bool("use_regex", true)) t.regex = std::make_unique<text::Regex>(kGpt2Pattern);
  } else {
    bad(cat("pre_tokenizer: expected Split, ByteLevel or a Sequence of them, got ", type.empty() ? p.dump() : type));
  }
  pre.push_back(std::move(t));
}

void Tokenizer::Impl::load_post_processor(const Json& p) {
  std::string type = type_of(p);
  if (type == "ByteLevel") return;  // offsets only
  if (type == "Sequence") {
    for (const Json& k : p.at("processors").as_array()) load_post_processor(k);
    return;
  }
  if (type == "TemplateProcessing") {
    const Json& specials = p.at("special_tokens");
    bool seen_a = false;
    for (const Json& item : p.at("single").as_array()) {
      if (const Json* st = item.find("SpecialToken")) {
        const std::string& name = st->at("id").as_string();
        const Json* spec = specials.find(name);
        if (!spec) bad(cat("post_processor: special token \"", name, "\" expected in special_tokens"));
        for (const Json& id : spec->at("ids").as_array())
          (seen_a ? post_suffix : post_prefix).push_back(static_cast<int32_t>(id.as_int()));
      } else if (item.find("Sequence")) {
        seen_a = true;
      } else {
        bad(cat("post_processor: expected SpecialToken or Sequence items, got ", item.dump()));
      }
    }
    return;
  }
  bad(cat("post_processor: expected ByteLevel, TemplateProcessing or a Sequence of them, got ", type.empty() ? p.dump() : type));
}

void Tokenizer::Impl::check_decoder(const Json& d) {
  std::string type = type_of(d);
  if (type == "ByteLevel") return;
  if (type == "Sequence") {
    for (const Json& k : d.at("decoders").as_array()) check_decoder(k);
    return;
  }
  bad(cat("decoder: expected ByteLevel, got ", type.empty() ? d.dump() : type));
}

// ------------------------------------------------------------------ encoding

void Tokenizer::Impl::split_added(std::string_view s, const AddedMatcher& m, bool parse_special, Scratch& sc,
                                  std::vector<Piece>& out) const {
  out.clear();
  if (m.empty) {
    out.push_back({0, s.size(), -1});
    return;
  }
  auto& matches = sc.added_matches;
  matches.clear();
  m.find(s, matches);
  size_t offset = 0;
  for (auto [start, stop, idx] : matches) {
    const AddedToken& t = added[idx];
    if (!parse_special && t.special) continue;
    auto word_before = [&](size_t pos) {
      if (pos == 0) return false;
      size_t q = pos - 1;
      while (q > 0 && (static_cast<unsigned char>(s[q]) & 0xC0) == 0x80) --q;
      char32_t c;
      unicode::utf8_decode_valid(reinterpret_cast<const unsigned char*>(s.data()) + q, &c);
      return unicode::is_word(c);
    };
    auto word_at = [&](size_t pos) {
      if (pos >= s.size()) return false;
      char32_t c;
      unicode::utf8_decode_valid(reinterpret_cast<const unsigned char*>(s.data()) + pos, &c);
      return unicode::is_word(c);
    };
    if (t.single_word && (word_before(start) || word_at(stop))) continue;
    if (t.lstrip) {
      size_t ns = start;
      while (ns > 0) {
        size_t q = ns - 1;
        while (q > 0 && (static_cast<unsigned char>(s[q]) & 0xC0) == 0x80) --q;
        char32_t c;
        unicode::utf8_decode_valid(reinterpret_cast<const unsigned char*>(s.data()) + q, &c);
        if (!unicode::is_white_space(c)) break;
        ns = q;
      }
      start = std::max(ns, offset);
    }
    if (t.rstrip) {
      while (stop < s.size()) {
        char32_t c;
        int len = unicode::utf8_decode_valid(reinterpret_cast<const unsigned char*>(s.data()) + stop, &c);
        if (!unicode::is_white_space(c)) break;
        stop += len;
      }
    }
    if (start < offset) start = offset;  // a previous rstrip consumed the start of this match
    if (offset < start) out.push_back({offset, start, -1});
    out.push_back({start, stop, t.id});
    offset = stop;
  }
  if (offset != s.size() || out.empty()) out.push_back({offset, s.size(), -1});
}

namespace {

// HF Pattern::find_matches: (offsets, is_match) covering the whole input.
void find_matches(const PreTokenizer& t, const text::Regex* re, std::string_view s,
                  std::vector<std::pair<size_t, size_t>>& tmp, std::vector<std::tuple<size_t, size_t, bool>>& out) {
  out.clear();
  if (s.empty()) {
    out.emplace_back(0, 0, false);
    return;
  }
  tmp.clear();
  if (re) {
    re->find_all(s, tmp);
  } else if (t.literal.empty()) {
    out.emplace_back(0, s.size(), false);
    return;
  } else {
    for (size_t p = s.find(t.literal); p != std::string_view::npos; p = s.find(t.literal, p + t.literal.size()))
      tmp.emplace_back(p, p + t.literal.size());
  }
  size_t prev = 0;
  for (auto [b, e] : tmp) {
    if (prev != b) out.emplace_back(prev, b, false);
    out.emplace_back(b, e, true);
    prev = e;
  }
  if (prev != s.size()) out.emplace_back(prev, s.size(), false);
}

}  // namespace

void Tokenizer::Impl::pre_tokenize(std::string_view piece, Scratch& sc) const {
  auto& splits = sc.splits;
  auto& next = sc.next;
  auto& tmp = sc.regex_matches;
  auto& matches = sc.matches;
  auto& parts = sc.parts;
  splits.clear();
  splits.push_back(piece);
  for (const PreTokenizer& t : pre) {
    next.clear();
    for (std::string_view s : splits) {
      if (t.kind == PreTokenizer::ByteLevel) {
        if (t.add_prefix_space && (s.empty() || s[0] != ' ')) {
          sc.arena.push_back(std::make_unique<std::string>(" " + std::string(s)));
          s = *sc.arena.back();
        }
        if (!t.regex) {
          if (!s.empty()) next.push_back(s);
          continue;
        }
        find_matches(t, t.regex.get(), s, tmp, matches);
        for (auto [b, e, m] : matches)
          if (e > b) next.push_back(s.substr(b, e - b));
        continue;
      }
      find_matches(t, t.regex.get(), s, tmp, matches);
      if (t.invert)
        for (auto& m : matches) std::get<2>(m) = !std::get<2>(m);
      parts.clear();
      bool prev_match = false;
      switch (t.behavior) {
        case SplitBehavior::Isolated:
          for (auto [b, e, m] : matches) parts.push_back({{b, e}, false});
          break;
        case SplitBehavior::Removed:
          for (auto [b, e, m] : matches) parts.push_back({{b, e}, m});
          break;
        case SplitBehavior::Contiguous:
          for (auto [b, e, m] : matches) {
            if (m == prev_match && !parts.empty()) parts.back().first.second = e;
            else parts.push_back({{b, e}, false});
            prev_match = m;
          }
          break;
        case SplitBehavior::MergedWithPrevious:
          for (auto [b, e, m] : matches) {
            if (m && !prev_match && !parts.empty()) parts.back().first.second = e;
            else parts.push_back({{b, e}, false});
            prev_match = m;
          }
          break;
        case SplitBehavior::MergedWithNext:
          for (size_t i = matches.size(); i-- > 0;) {
            auto [b, e, m] = matches[i];
            if (m && !prev_match && !parts.empty()) parts.back().first.first = b;
            else parts.push_back({{b, e}, false});
            prev_match = m;
          }
          std::reverse(parts.begin(), parts.end());
          break;
      }
      for (auto& [off, remove] : parts)
        if (!remove && off.second > off.first) next.push_back(s.substr(off.first, off.second - off.first));
    }
    splits.swap(next);
  }
}

void Tokenizer::Impl::encode_text(std::string_view piece, Scratch& sc, std::vector<int32_t>& ids) const {
  if (nfc && unicode::nfc(piece, sc.normalized)) piece = sc.normalized;
  if (norm_matcher.empty) {
    pre_tokenize(piece, sc);
    for (std::string_view w : sc.splits) bpe_cached(w, sc, ids);
    return;
  }
  std::vector<Piece> parts;
  split_added(piece, norm_matcher, true, sc, parts);
  for (const Piece& p : parts) {
    if (p.id >= 0) {
      ids.push_back(p.id);
      continue;
    }
    pre_tokenize(piece.substr(p.begin, p.end - p.begin), sc);
    for (std::string_view w : sc.splits) bpe_cached(w, sc, ids);
  }
}

void Tokenizer::Impl::bpe_cached(std::string_view word, Scratch& sc, std::vector<int32_t>& ids) const {
  if (word.size() >= kCacheMaxWord) {
    bpe(word, sc, ids);
    return;
  }
  {
    std::shared_lock lock(cache_mu);
    auto it = cache.find(word);
    if (it != cache.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t before = ids.size();
  bpe(word, sc, ids);
  std::unique_lock lock(cache_mu, std::try_to_lock);
  if (lock.owns_lock() && cache.size() < kCacheCapacity)
    cache.emplace(std::string(word), std::vector<int32_t>(ids.begin() + before, ids.end()));
}

void Tokenizer::Impl::bpe(std::string_view word, Scratch& sc, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges) {
    auto it = bytes_to_id.find(word);
    if (it != bytes_to_id.end()) {
      out.push_back(it->second);
      return;
    }
  }
  std::vector<int32_t>& syms = sc.syms;
  syms.clear();
  bool prev_unk = false;
  for (unsigned char b : word) {
    int32_t id = byte_id[b];
    if (id >= 0) {
      syms.push_back(id);
      prev_unk = false;
    } else if (unk_id >= 0) {
      if (!(fuse_unk && prev_unk)) syms.push_back(unk_id);
      prev_unk = true;
    }
  }
  if (syms.size() > 1) {
    if (merges_unique && syms.size() <= 128) merge_simple(syms);
    else merge_heap(syms);
  }
  out.insert(out.end(), syms.begin(), syms.end());
}

// Repeatedly merges the adjacent pair of lowest rank (leftmost on ties).
void Tokenizer::Impl::merge_simple(std::vector<int32_t>& syms) const {
  constexpr uint64_t kNone = ~0ull;
  size_t n = syms.size();
  uint64_t ranks[128];
  auto rank_at = [&](size_t i) -> uint64_t {
    const uint64_t* v = merges.find(pair_key(syms[i], syms[i + 1]));
    return v ? *v : kNone;  // (rank << 32 | new id): comparing whole values compares ranks
  };
  for (size_t i = 0; i + 1 < n; ++i) ranks[i] = rank_at(i);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i)
      if (ranks[i] < ranks[best]) best = i;
    if (ranks[best] == kNone) break;
    syms[best] = static_cast<int32_t>(ranks[best] & 0xFFFFFFFFu);
    for (size_t i = best + 1; i + 1 < n; ++i) syms[i] = syms[i + 1];
    for (size_t i = best; i + 2 < n; ++i) ranks[i] = ranks[i + 1];
    --n;
    if (best > 0) ranks[best - 1] = rank_at(best - 1);
    if (best + 1 < n) ranks[best] = rank_at(best);
  }
  syms.resize(n);
}

// HF's algorithm (word.rs merge_all): a min-heap of (rank, position); stale entries are skipped
// when the pair at that position no longer produces the entry's token.
void Tokenizer::Impl::merge_heap(std::vector<int32_t>& syms) const {
  struct Entry {
    uint32_t rank;
    uint32_t pos;
    int32_t new_id;
    bool operator>(const Entry& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  size_t n = syms.size();
  std::vector<int32_t> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  for (size_t i = 0; i + 1 < n; ++i)
    if (const uint64_t* v = merges.find(pair_key(syms[i], syms[i + 1])))
      heap.push({static_cast<uint32_t>(*v >> 32), static_cast<uint32_t>(i), static_cast<int32_t>(*v & 0xFFFFFFFFu)});
  while (!heap.empty()) {
    Entry top = heap.top();
    heap.pop();
    size_t pos = top.pos;
    if (!alive[pos] || next[pos] < 0) continue;
    size_t right = static_cast<size_t>(next[pos]);
    const uint64_t* v = merges.find(pair_key(syms[pos], syms[right]));
    if (!v || static_cast<int32_t>(*v & 0xFFFFFFFFu) != top.new_id) continue;
    syms[pos] = top.new_id;
    alive[right] = false;
    next[pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = static_cast<int32_t>(pos);
    if (prev[pos] >= 0) {
      size_t l = static_cast<size_t>(prev[pos]);
      if (const uint64_t* w = merges.find(pair_key(syms[l], syms[pos])))
        heap.push({static_cast<uint32_t>(*w >> 32), static_cast<uint32_t>(l), static_cast<int32_t>(*w & 0xFFFFFFFFu)});
    }
    if (next[pos] >= 0) {
      size_t r = static_cast<size_t>(next[pos]);
      if (const uint64_t* w = merges.find(pair_key(syms[pos], syms[r])))
        heap.push({static_cast<uint32_t>(*w >> 32), static_cast<uint32_t>(pos), static_cast<int32_t>(*w & 0xFFFFFFFFu)});
    }
  }
  size_t w = 0;
  for (size_t i = 0; i < n; ++i)
    if (alive[i]) syms[w++] = syms[i];
  syms.resize(w);
}

// ------------------------------------------------------------------ public API

Tokenizer Tokenizer::from_json(const Json& j, std::string_view source) {
  auto impl = std::make_shared<Impl>();
  impl->source = std::string(source);
  impl->load(j);
  Tokenizer t;
  t.impl_ = std::move(impl);
  return t;
}

Tokenizer Tokenizer::from_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("tokenizer", cat("cannot open ", path, ": expected a readable tokenizer.json"));
  std::stringstream ss;
  ss << f.rdbuf();
  return from_json(Json::parse(ss.str(), path), path);
}

Tokenizer Tokenizer::from_dir(const std::string& model_dir) {
  return from_file(model_dir + (model_dir.empty() || model_dir.back() == '/' ? "" : "/") + "tokenizer.json");
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special) const {
  EncodeOptions o;
  o.add_special = add_special;
  return encode(text, o, nullptr);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& options, EncodeInfo* info) const {
  const Impl& m = *impl_;
  std::string clean;
  size_t invalid = 0;
  if (!unicode::is_valid_utf8(text)) {
    invalid = unicode::append_lossy_utf8(clean, text);
    text = clean;
  }
  if (info) info->invalid_utf8 = invalid;
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (options.add_special) ids.insert(ids.end(), m.post_prefix.begin(), m.post_prefix.end());
  thread_local Scratch sc;  // buffers keep their capacity across calls; encode() never re-enters
  sc.arena.clear();
  m.split_added(text, m.raw_matcher, options.parse_special, sc, sc.pieces);
  for (const Piece& p : sc.pieces) {
    if (p.id >= 0) ids.push_back(p.id);
    else m.encode_text(text.substr(p.begin, p.end - p.begin), sc, ids);
  }
  if (options.add_special) ids.insert(ids.end(), m.post_suffix.begin(), m.post_suffix.end());
  return ids;
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
  const Impl& m = *impl_;
  if (!m.exists(id)) return {};
  return std::string_view(m.bytes_pool).substr(m.bytes_off[id], m.bytes_off[id + 1] - m.bytes_off[id]);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string raw;
  for (int32_t id : ids) {
    if (skip_special && is_special(id)) continue;
    raw += token_bytes(id);
  }
  if (unicode::is_valid_utf8(raw)) return raw;
  std::string out;
  unicode::append_lossy_utf8(out, raw);
  return out;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  auto it = impl_->token_id.find(token);
  if (it == impl_->token_id.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  if (!impl_->exists(id)) return std::nullopt;
  return impl_->id_token[id];
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->id_token.size()); }
bool Tokenizer::is_special(int32_t id) const { return impl_->exists(id) && (impl_->id_flags[id] & 4); }
bool Tokenizer::is_added(int32_t id) const { return impl_->exists(id) && (impl_->id_flags[id] & 2); }
const std::vector<AddedToken>& Tokenizer::added_tokens() const { return impl_->added; }

// ------------------------------------------------------------------ streaming

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tok_(&tokenizer), skip_special_(skip_special) {}

std::string StreamDecoder::push(int32_t id) { return push(std::span<const int32_t>(&id, 1)); }

std::string StreamDecoder::push(std::span<const int32_t> ids) {
  for (int32_t id : ids) {
    if (skip_special_ && tok_->is_special(id)) continue;
    pending_ += tok_->token_bytes(id);
  }
  size_t hold = unicode::utf8_incomplete_tail(pending_);
  std::string out;
  unicode::append_lossy_utf8(out, std::string_view(pending_).substr(0, pending_.size() - hold));
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StreamDecoder::finish() {
  std::string out;
  unicode::append_lossy_utf8(out, pending_);
  pending_.clear();
  return out;
}

void StreamDecoder::reset() { pending_.clear(); }

}  // namespace mere
