// .npy reading and writing (see npy.h). The header is a Python dict literal; the parser accepts
// exactly what numpy's format module writes (any key order, optional trailing comma, spaces) and
// rejects everything else with a message naming the file and what was expected.
#include "io/npy.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/error.h"

namespace mere {

namespace {

constexpr const char* kWhere = "npy";

std::string shape_tuple(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

int64_t checked_numel(const std::vector<int64_t>& shape, std::string_view source) {
  int64_t n = 1;
  for (int64_t d : shape) {
    MERE_CHECK(d >= 0, kWhere, source, ": shape dims: expected >= 0, got ", d);
    MERE_CHECK(d == 0 || n <= std::numeric_limits<int64_t>::max() / 16 / d, kWhere, source,
               ": shape ", shape_tuple(shape), " is too large");
    n *= d;
  }
  return n;
}

void write_file(const std::string& path, const std::string& preamble, const void* data, size_t nbytes) {
  std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  MERE_CHECK(f != nullptr, kWhere, "cannot create \"", tmp, "\": ", std::strerror(errno));
  bool ok = std::fwrite(preamble.data(), 1, preamble.size(), f) == preamble.size() &&
            (nbytes == 0 || std::fwrite(data, 1, nbytes, f) == nbytes);
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    fail(kWhere, cat("writing \"", tmp, "\": ", std::strerror(errno)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = std::strerror(errno);
    std::remove(tmp.c_str());
    fail(kWhere, cat("renaming \"", tmp, "\" to \"", path, "\": ", err));
  }
}

// Minimal parser for numpy's header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
struct Header {
  std::string descr;
  bool fortran = false;
  std::vector<int64_t> shape;
};

class DictParser {
 public:
  DictParser(std::string_view s, std::string_view source) : s_(s), src_(source) {}

  Header parse() {
    Header h;
    bool has_descr = false, has_fortran = false, has_shape = false;
    ws();
    expect('{');
    while (true) {
      ws();
      if (peek() == '}') break;
      std::string key = str();
      ws();
      expect(':');
      ws();
      if (key == "descr") {
        h.descr = str();
        has_descr = true;
      } else if (key == "fortran_order") {
        h.fortran = boolean();
        has_fortran = true;
      } else if (key == "shape") {
        h.shape = tuple();
        has_shape = true;
      } else {
        bad(cat("unknown header key '", key, "'"));
      }
      ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      ws();
      MERE_CHECK(peek() == '}', kWhere, src_, ": header: expected ',' or '}' at offset ", i_, ", got '",
                 at_text(), "'");
    }
    ++i_;
    MERE_CHECK(has_descr && has_fortran && has_shape, kWhere, src_,
               ": header: expected keys 'descr', 'fortran_order' and 'shape', got \"", s_, "\"");
    return h;
  }

 private:
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  std::string at_text() const { return i_ < s_.size() ? std::string(1, s_[i_]) : std::string("end of header"); }
  [[noreturn]] void bad(const std::string& what) const { fail(kWhere, cat(src_, ": header: ", what)); }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n')) ++i_;
  }
  void expect(char c) {
    if (peek() != c) bad(cat("expected '", c, "' at offset ", i_, ", got '", at_text(), "'"));
    ++i_;
  }
  std::string str() {
    char q = peek();
    if (q != '\'' && q != '"') bad(cat("expected a quoted string at offset ", i_, ", got '", at_text(), "'"));
    size_t end = s_.find(q, i_ + 1);
    if (end == std::string_view::npos) bad("unterminated string");
    std::string out(s_.substr(i_ + 1, end - i_ - 1));
    i_ = end + 1;
    return out;
  }
  bool boolean() {
    if (s_.substr(i_, 4) == "True") {
      i_ += 4;
      return true;
    }
    if (s_.substr(i_, 5) == "False") {
      i_ += 5;
      return false;
    }
    bad(cat("expected True or False at offset ", i_, ", got '", at_text(), "'"));
  }
  std::vector<int64_t> tuple() {
    std::vector<int64_t> out;
    expect('(');
    while (true) {
      ws();
      if (peek() == ')') break;
      if (!(peek() >= '0' && peek() <= '9')) bad(cat("shape: expected a non-negative integer at offset ", i_,
                                                     ", got '", at_text(), "'"));
      int64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) bad("shape: dimension overflows int64");
        v = v * 10 + (peek() - '0');
        ++i_;
      }
      if (peek() == 'L') ++i_;  // Python 2 long suffix
      out.push_back(v);
      ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      ws();
      if (peek() != ')') bad(cat("shape: expected ',' or ')' at offset ", i_, ", got '", at_text(), "'"));
    }
    ++i_;
    return out;
  }

  std::string_view s_;
  std::string_view src_;
  size_t i_ = 0;
};

struct Parsed {
  Header header;
  const uint8_t* data = nullptr;
  size_t data_bytes = 0;
};

Parsed parse_preamble(const void* bytes, size_t size, std::string_view source) {
  const auto* p = static_cast<const uint8_t*>(bytes);
  static const uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  MERE_CHECK(size >= 10 && std::memcmp(p, kMagic, 6) == 0, kWhere, source,
             ": expected the .npy magic \"\\x93NUMPY\", got ", size < 10 ? "a file shorter than 10 bytes" : "other bytes");
  int major = p[6];
  size_t header_len = 0, pre = 0;
  if (major == 1) {
    header_len = static_cast<size_t>(p[8]) | (static_cast<size_t>(p[9]) << 8);
    pre = 10;
  } else if (major == 2 || major == 3) {
    MERE_CHECK(size >= 12, kWhere, source, ": truncated preamble: expected >= 12 bytes, got ", size);
    header_len = static_cast<size_t>(p[8]) | (static_cast<size_t>(p[9]) << 8) | (static_cast<size_t>(p[10]) << 16) |
                 (static_cast<size_t>(p[11]) << 24);
    pre = 12;
  } else {
    fail(kWhere, cat(source, ": format version: expected 1, 2 or 3, got ", major, ".", int(p[7])));
  }
  MERE_CHECK(header_len <= size - pre, kWhere, source, ": truncated header: expected ", header_len,
             " bytes, got ", size - pre);
  std::string_view text(reinterpret_cast<const char*>(p + pre), header_len);
  Parsed out;
  out.header = DictParser(text, source).parse();
  out.data = p + pre + header_len;
  out.data_bytes = size - pre - header_len;
  MERE_CHECK(!out.header.fortran, kWhere, source, ": fortran_order: expected False, got True");
  return out;
}

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  MERE_CHECK(in.good(), kWhere, "cannot open \"", path, "\": ", std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  MERE_CHECK(!in.bad(), kWhere, "reading \"", path, "\" failed");
  return ss.str();
}

template <class T>
void load_elements(const Parsed& p, std::string_view source, size_t elem, NpyArray<T>* out) {
  int64_t n = checked_numel(p.header.shape, source);
  uint64_t need = static_cast<uint64_t>(n) * elem;
  MERE_CHECK(p.data_bytes == need, kWhere, source, ": data size for shape ", shape_tuple(p.header.shape), " ",
             p.header.descr, ": expected ", need, " bytes, got ", p.data_bytes);
  out->shape = p.header.shape;
  out->data.resize(static_cast<size_t>(n));
}

}  // namespace

std::string npy_preamble(std::string_view descr, const std::vector<int64_t>& shape) {
  std::string dict = cat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ", shape_tuple(shape), ", }");
  size_t total = 10 + dict.size() + 1;  // + '\n'
  size_t padded = (total + 63) / 64 * 64;
  dict.append(padded - total, ' ');
  dict += '\n';
  MERE_CHECK(dict.size() <= 0xffff, kWhere, "header too long for format 1.0: ", dict.size(), " bytes");
  std::string out = "\x93NUMPY";
  out += static_cast<char>(1);
  out += static_cast<char>(0);
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>((dict.size() >> 8) & 0xff);
  return out + dict;
}

void write_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape) {
  int64_t n = checked_numel(shape, path);
  write_file(path, npy_preamble("<f4", shape), data, static_cast<size_t>(n) * 4);
}

void write_npy_i32(const std::string& path, const int32_t* data, const std::vector<int64_t>& shape) {
  int64_t n = checked_numel(shape, path);
  write_file(path, npy_preamble("<i4", shape), data, static_cast<size_t>(n) * 4);
}

NpyArray<float> parse_npy_f32(const void* bytes, size_t size, std::string_view source) {
  Parsed p = parse_preamble(bytes, size, source);
  MERE_CHECK(p.header.descr == "<f4", kWhere, source, ": descr: expected '<f4' (little-endian float32), got '",
             p.header.descr, "'");
  NpyArray<float> out;
  load_elements(p, source, 4, &out);
  if (!out.data.empty()) std::memcpy(out.data.data(), p.data, out.data.size() * 4);
  return out;
}

NpyArray<int32_t> parse_npy_i32(const void* bytes, size_t size, std::string_view source) {
  Parsed p = parse_preamble(bytes, size, source);
  NpyArray<int32_t> out;
  if (p.header.descr == "<i4") {
    load_elements(p, source, 4, &out);
    if (!out.data.empty()) std::memcpy(out.data.data(), p.data, out.data.size() * 4);
  } else if (p.header.descr == "<i8") {
    load_elements(p, source, 8, &out);
    for (size_t i = 0; i < out.data.size(); ++i) {
      int64_t v;
      std::memcpy(&v, p.data + 8 * i, 8);
      MERE_CHECK(v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max(), kWhere,
                 source, ": element ", i, ": expected a value that fits int32, got ", v);
      out.data[i] = static_cast<int32_t>(v);
    }
  } else {
    fail(kWhere, cat(source, ": descr: expected '<i4' or '<i8', got '", p.header.descr, "'"));
  }
  return out;
}

NpyArray<float> read_npy_f32(const std::string& path) {
  std::string bytes = read_whole(path);
  return parse_npy_f32(bytes.data(), bytes.size(), path);
}

NpyArray<int32_t> read_npy_i32(const std::string& path) {
  std::string bytes = read_whole(path);
  return parse_npy_i32(bytes.data(), bytes.size(), path);
}

}  // namespace mere
