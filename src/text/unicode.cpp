// Unicode lookups over the generated tables, UTF-8 decoding with the Unicode "maximal subpart"
// replacement rule, and NFC (decompose, canonical reorder, compose) applied only to the segments
// of the text that can change.
#include "text/unicode.h"

#include <algorithm>

#include "text/unicode_tables.h"

namespace mere::unicode {

namespace t = tables;

namespace {

constexpr uint8_t kFlagWhite = 1, kFlagQcNo = 2, kFlagQcMaybe = 4, kFlagDecomp = 8;

inline const t::Record& record(char32_t c) {
  if (c >= 0x110000) return t::kRecords[0];
  return t::kRecords[t::kStage2[(size_t(t::kStage1[c >> t::kBlockShift]) << t::kBlockShift) |
                                (c & ((1u << t::kBlockShift) - 1))]];
}

// Hangul syllable constants (Unicode §3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr int kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

}  // namespace

uint8_t record_index(char32_t c) {
  if (c >= 0x110000) return 0;
  return t::kStage2[(size_t(t::kStage1[c >> t::kBlockShift]) << t::kBlockShift) | (c & ((1u << t::kBlockShift) - 1))];
}
Category record_category(uint8_t r) { return static_cast<Category>(t::kRecords[r].category); }
bool record_white_space(uint8_t r) { return t::kRecords[r].flags & kFlagWhite; }
int record_count() { return static_cast<int>(t::kRecordCount); }

Category category(char32_t c) { return static_cast<Category>(record(c).category); }

const char* category_name(Category c) {
  static const char* names[] = {"Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd",
                                "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm",
                                "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co"};
  int i = static_cast<int>(c);
  return i >= 0 && i < kCategoryCount ? names[i] : "??";
}

bool is_letter(char32_t c) {
  auto g = category(c);
  return g >= Category::Lu && g <= Category::Lo;
}
bool is_mark(char32_t c) {
  auto g = category(c);
  return g >= Category::Mn && g <= Category::Me;
}
bool is_number(char32_t c) {
  auto g = category(c);
  return g >= Category::Nd && g <= Category::No;
}
bool is_white_space(char32_t c) { return record(c).flags & kFlagWhite; }
bool is_word(char32_t c) {
  auto g = category(c);
  return (g >= Category::Lu && g <= Category::Nl) || g == Category::Pc || c == 0x200C || c == 0x200D;
}
uint8_t combining_class(char32_t c) { return record(c).ccc; }

char32_t simple_fold(char32_t c) {
  const uint32_t* b = t::kFoldFrom;
  const uint32_t* e = t::kFoldFrom + t::kFoldCount;
  const uint32_t* it = std::lower_bound(b, e, static_cast<uint32_t>(c));
  return (it != e && *it == c) ? t::kFoldTo[it - b] : c;
}

std::vector<char32_t> case_variants(char32_t c) {
  char32_t f = simple_fold(c);
  std::vector<char32_t> v{c, f};
  for (size_t i = 0; i < t::kFoldCount; ++i)
    if (t::kFoldTo[i] == f) v.push_back(t::kFoldFrom[i]);
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// ---------------------------------------------------------------- UTF-8

Utf8Step utf8_step(const unsigned char* p, const unsigned char* end) {
  Utf8Step s;
  unsigned char b = p[0];
  if (b < 0x80) {
    s.cp = b;
    s.len = 1;
    s.valid = true;
    return s;
  }
  int need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the first continuation byte
  char32_t cp;
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1;
    cp = b & 0x1F;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 2;
    cp = b & 0x0F;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 3;
    cp = b & 0x07;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    s.len = 1;  // 80..C1, F5..FF: never valid
    return s;
  }
  int i = 1;
  for (; i <= need; ++i) {
    if (p + i >= end) {
      s.len = i;
      s.truncated = true;
      return s;
    }
    unsigned char c = p[i];
    unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
    if (c < l || c > h) {
      s.len = i;  // maximal subpart: the bytes before the offending one
      return s;
    }
    cp = (cp << 6) | (c & 0x3F);
  }
  s.cp = cp;
  s.len = need + 1;
  s.valid = true;
  return s;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_valid_utf8(std::string_view s) {
  auto* p = reinterpret_cast<const unsigned char*>(s.data());
  auto* end = p + s.size();
  while (p < end) {
    if (*p < 0x80) {
      ++p;
      continue;
    }
    Utf8Step st = utf8_step(p, end);
    if (!st.valid) return false;
    p += st.len;
  }
  return true;
}

size_t append_lossy_utf8(std::string& out, std::string_view s) {
  auto* p = reinterpret_cast<const unsigned char*>(s.data());
  auto* end = p + s.size();
  size_t replaced = 0;
  while (p < end) {
    auto* run = p;
    while (p < end && *p < 0x80) ++p;
    if (p > run) out.append(reinterpret_cast<const char*>(run), p - run);
    if (p >= end) break;
    Utf8Step st = utf8_step(p, end);
    if (st.valid) {
      out.append(reinterpret_cast<const char*>(p), st.len);
    } else {
      append_utf8(out, kReplacement);
      ++replaced;
    }
    p += st.len;
  }
  return replaced;
}

size_t utf8_incomplete_tail(std::string_view s) {
  // A proper prefix of a well-formed sequence is at most 3 bytes long and starts with a lead byte.
  size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    auto* p = reinterpret_cast<const unsigned char*>(s.data()) + (n - back);
    if ((*p & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    if (*p < 0x80) return 0;
    Utf8Step st = utf8_step(p, p + back);
    return (st.truncated && static_cast<size_t>(st.len) == back) ? back : 0;
  }
  return 0;
}

// ---------------------------------------------------------------- NFC

namespace {

// A character before which the text can be cut without changing its NFC: a starter that never
// combines with what precedes it (ccc 0, NFC_Quick_Check = Yes).
inline bool is_boundary(const t::Record& r) { return r.ccc == 0 && !(r.flags & (kFlagQcNo | kFlagQcMaybe)); }
inline bool needs_work(const t::Record& r) { return r.ccc != 0 || (r.flags & (kFlagQcNo | kFlagQcMaybe)); }

void decompose(char32_t c, std::vector<char32_t>& out) {
  if (c >= kSBase && c < kSBase + kSCount) {
    int s = static_cast<int>(c - kSBase);
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  if (record(c).flags & kFlagDecomp) {
    const uint32_t* b = t::kDecompKeys;
    const uint32_t* e = t::kDecompKeys + t::kDecompCount;
    const uint32_t* it = std::lower_bound(b, e, static_cast<uint32_t>(c));
    if (it != e && *it == c) {
      uint32_t off = t::kDecompOffsets[it - b];
      for (uint32_t i = 0; i < (off & 15); ++i) out.push_back(t::kDecompData[(off >> 4) + i]);
      return;
    }
  }
  out.push_back(c);
}

char32_t compose_pair(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  uint64_t key = (uint64_t(a) << 21) | b;
  const uint64_t* beg = t::kCompKeys;
  const uint64_t* end = t::kCompKeys + t::kCompCount;
  const uint64_t* it = std::lower_bound(beg, end, key);
  return (it != end && *it == key) ? t::kCompValues[it - beg] : 0;
}

void normalize_segment(std::string_view seg, std::vector<char32_t>& buf, std::string& out) {
  buf.clear();
  auto* p = reinterpret_cast<const unsigned char*>(seg.data());
  auto* end = p + seg.size();
  while (p < end) {
    char32_t c;
    p += utf8_decode_valid(p, &c);
    decompose(c, buf);
  }
  // Canonical ordering: stable sort of each run of non-starters by combining class (O(n log n), so
  // a long run of marks cannot make normalisation quadratic).
  for (size_t i = 0; i < buf.size();) {
    if (combining_class(buf[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i + 1;
    while (j < buf.size() && combining_class(buf[j]) != 0) ++j;
    if (j - i > 1)
      std::stable_sort(buf.begin() + i, buf.begin() + j,
                       [](char32_t x, char32_t y) { return combining_class(x) < combining_class(y); });
    i = j;
  }
  // Canonical composition.
  if (!buf.empty()) {
    size_t starter = 0, w = 1;
    int last_cc = combining_class(buf[0]) ? 256 : 0;
    for (size_t i = 1; i < buf.size(); ++i) {
      char32_t c = buf[i];
      int cc = combining_class(c);
      char32_t comp = last_cc == 256 ? 0 : compose_pair(buf[starter], c);
      if (comp && (last_cc < cc || last_cc == 0)) {
        buf[starter] = comp;
        continue;
      }
      if (cc == 0) starter = w;
      last_cc = cc;
      buf[w++] = c;
    }
    buf.resize(w);
  }
  for (char32_t c : buf) append_utf8(out, c);
}

}  // namespace

bool nfc(std::string_view s, std::string& out) {
  auto* base = reinterpret_cast<const unsigned char*>(s.data());
  auto* end = base + s.size();
  auto* p = base;
  const unsigned char* boundary = base;  // start of the last boundary character seen
  const unsigned char* copied = base;    // input before this is already in out
  bool changed = false;
  std::vector<char32_t> buf;
  std::string seg_out;
  while (p < end) {
    if (*p < 0xCC) {  // below U+0300: always a boundary (ASCII and lead bytes C2..CB)
      boundary = p;
      p += *p < 0x80 ? 1 : 2;
      continue;
    }
    char32_t c;
    int len = utf8_decode_valid(p, &c);
    const t::Record& r = record(c);
    if (!needs_work(r)) {
      boundary = p;
      p += len;
      continue;
    }
    // Segment: from the last boundary to the next boundary after p.
    auto* seg_end = p + len;
    while (seg_end < end) {
      char32_t d;
      int l = utf8_decode_valid(seg_end, &d);
      if (is_boundary(record(d))) break;
      seg_end += l;
    }
    std::string_view seg(reinterpret_cast<const char*>(boundary), seg_end - boundary);
    seg_out.clear();
    normalize_segment(seg, buf, seg_out);
    if (seg_out != seg) {
      if (!changed) {
        out.clear();
        out.reserve(s.size());
        changed = true;
      }
      out.append(reinterpret_cast<const char*>(copied), boundary - copied);
      out += seg_out;
      copied = seg_end;
    }
    p = seg_end;
    boundary = seg_end;
  }
  if (changed) out.append(reinterpret_cast<const char*>(copied), end - copied);
  return changed;
}

std::string nfc(std::string_view s) {
  std::string out;
  if (nfc(s, out)) return out;
  return std::string(s);
}

}  // namespace mere::unicode
