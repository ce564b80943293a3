// Unicode support for the tokenizer: UTF-8 decoding (strict, lossy like Rust's from_utf8_lossy, and
// streaming-aware), General_Category / White_Space / simple case folding (Unicode 16.0, as HF's
// Oniguruma regex) and NFC normalisation (Unicode 9.0 data, as HF's normaliser). See docs/tokenizer.md.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mere::unicode {

// General_Category values; the order matches tools/gen_unicode_tables.py.
enum class Category : uint8_t {
  Cn, Lu, Ll, Lt, Lm, Lo, Mn, Mc, Me, Nd, Nl, No, Pc, Pd, Ps,
  Pe, Pi, Pf, Po, Sm, Sc, Sk, So, Zs, Zl, Zp, Cc, Cf, Cs, Co,
  kCount
};
constexpr int kCategoryCount = static_cast<int>(Category::kCount);

Category category(char32_t c);
const char* category_name(Category c);  // "Lu"
bool is_letter(char32_t c);              // \p{L}
bool is_mark(char32_t c);                // \p{M}
bool is_number(char32_t c);              // \p{N}
bool is_white_space(char32_t c);         // White_Space (= Oniguruma's \s)
bool is_word(char32_t c);                // \w approximation: L, M, Nd, Nl, Pc, ZWNJ, ZWJ
uint8_t combining_class(char32_t c);     // Unicode 9.0
char32_t simple_fold(char32_t c);        // simple case folding (C + S); c itself when none
// All code points whose simple case folding equals simple_fold(c) (c included), sorted.
std::vector<char32_t> case_variants(char32_t c);

// Index of c's property record (< 256). Two code points with the same record have the same category,
// White_Space, combining class and NFC flags; the regex engine caches class membership by record.
uint8_t record_index(char32_t c);
Category record_category(uint8_t record);
bool record_white_space(uint8_t record);
int record_count();

// ---- UTF-8 ----
constexpr char32_t kReplacement = 0xFFFD;

// Outcome of decoding one sequence at p (p < end): len > 0 and valid: code point in cp;
// !valid && !truncated: ill-formed, len = length of the maximal subpart (>= 1) to replace by one U+FFFD;
// !valid && truncated: the bytes up to end are a proper prefix of a well-formed sequence (len of them).
struct Utf8Step {
  char32_t cp = 0;
  int len = 0;
  bool valid = false;
  bool truncated = false;
};
Utf8Step utf8_step(const unsigned char* p, const unsigned char* end);

// Decodes one code point of well-formed UTF-8 (no checks beyond p < end); returns its byte length.
inline int utf8_decode_valid(const unsigned char* p, char32_t* cp) {
  unsigned char b = p[0];
  if (b < 0x80) { *cp = b; return 1; }
  if (b < 0xE0) { *cp = (char32_t(b & 0x1F) << 6) | (p[1] & 0x3F); return 2; }
  if (b < 0xF0) { *cp = (char32_t(b & 0x0F) << 12) | (char32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F); return 3; }
  *cp = (char32_t(b & 0x07) << 18) | (char32_t(p[1] & 0x3F) << 12) | (char32_t(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
  return 4;
}
void append_utf8(std::string& out, char32_t cp);
bool is_valid_utf8(std::string_view s);
// Appends s to out with every maximal ill-formed subsequence replaced by U+FFFD (Rust's
// String::from_utf8_lossy, Python's errors="replace"). Returns the number of replacements.
size_t append_lossy_utf8(std::string& out, std::string_view s);
// Length of the trailing bytes of s that form a proper prefix of a well-formed sequence
// (0..3): what a streaming decoder must hold back until more bytes arrive.
size_t utf8_incomplete_tail(std::string_view s);

// ---- normalisation ----
// NFC of well-formed UTF-8 (Unicode 9.0 data). Returns false and leaves out untouched when s is
// already NFC (the common case: no allocation); otherwise writes the normalised text to out.
bool nfc(std::string_view s, std::string& out);
std::string nfc(std::string_view s);

}  // namespace mere::unicode
