// .npy writer and reader: numpy's exact header format, round trips, version 2 headers and every
// malformed-input error path (magic, version, dtype, fortran order, truncation, bad dicts).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "io/npy.h"

namespace fs = std::filesystem;

namespace {

std::string make_npy(int major, const std::string& dict, const std::string& data) {
  std::string s = "\x93NUMPY";
  s += static_cast<char>(major);
  s += '\0';
  size_t n = dict.size();
  s += static_cast<char>(n & 0xff);
  s += static_cast<char>((n >> 8) & 0xff);
  if (major >= 2) {
    s += static_cast<char>((n >> 16) & 0xff);
    s += static_cast<char>((n >> 24) & 0xff);
  }
  return s + dict + data;
}

std::string floats(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  size_t i = 0;
  for (float f : v) std::memcpy(&s[4 * i++], &f, 4);
  return s;
}

std::string error_of(const std::string& b) {
  try {
    mere::parse_npy_f32(b.data(), b.size(), "x.npy");
  } catch (const mere::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Npy, PreambleMatchesNumpy) {
  std::string p = mere::npy_preamble("<f4", {2, 3});
  EXPECT_EQ(p.size() % 64, 0u);
  EXPECT_EQ(p.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ(p.substr(10, 59), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
  EXPECT_EQ(p.back(), '\n');
  EXPECT_NE(mere::npy_preamble("<i4", {7}).find("'shape': (7,), }"), std::string::npos);
  EXPECT_NE(mere::npy_preamble("<f4", {}).find("'shape': (), }"), std::string::npos);
}

TEST(Npy, WriteReadRoundTrip) {
  fs::path dir = fs::temp_directory_path() / ("mere_npy_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string f = (dir / "a.npy").string();
  std::vector<float> v = {1.5f, -2.0f, 3.25f, 0.0f, 1e-30f, 7.0f};
  mere::write_npy_f32(f, v.data(), {3, 2});
  auto a = mere::read_npy_f32(f);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(a.data, v);
  EXPECT_EQ(a.numel(), 6);

  const std::string g = (dir / "i.npy").string();
  std::vector<int32_t> ids = {1, -2, 248046};
  mere::write_npy_i32(g, ids.data(), {3});
  auto b = mere::read_npy_i32(g);
  EXPECT_EQ(b.data, ids);
  EXPECT_THROW(mere::read_npy_f32(g), mere::Error);  // '<i4' is not float32
  EXPECT_THROW(mere::read_npy_f32((dir / "missing.npy").string()), mere::Error);
  fs::remove_all(dir);
}

TEST(Npy, ReadsVersion2AndOddSpacing) {
  std::string v2 = make_npy(2, "{'shape':(2,),'fortran_order':False,'descr':'<f4'}\n", floats({1, 2}));
  auto a = mere::parse_npy_f32(v2.data(), v2.size());
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(a.data[1], 2.0f);
  std::string scalar = make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }          \n", floats({9}));
  auto s = mere::parse_npy_f32(scalar.data(), scalar.size());
  EXPECT_TRUE(s.shape.empty());
  EXPECT_EQ(s.data[0], 9.0f);
  std::string empty = make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4), }\n", "");
  EXPECT_EQ(mere::parse_npy_f32(empty.data(), empty.size()).data.size(), 0u);
}

TEST(Npy, ReadsInt64Ids) {
  std::string d(16, '\0');
  int64_t v[2] = {5, 248044};
  std::memcpy(d.data(), v, 16);
  std::string b = make_npy(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }\n", d);
  auto a = mere::parse_npy_i32(b.data(), b.size());
  EXPECT_EQ(a.data[1], 248044);
  int64_t big = int64_t{1} << 40;
  std::memcpy(d.data(), &big, 8);
  b = make_npy(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }\n", d);
  EXPECT_THROW(mere::parse_npy_i32(b.data(), b.size()), mere::Error);
}

TEST(Npy, RejectsMalformedInput) {
  const std::string ok_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";
  EXPECT_NE(error_of("hello").find("magic"), std::string::npos);
  EXPECT_NE(error_of(make_npy(4, ok_dict, floats({1, 2}))).find("version"), std::string::npos);
  EXPECT_NE(error_of(make_npy(1, ok_dict, floats({1}))).find("expected 8 bytes, got 4"), std::string::npos);
  EXPECT_NE(error_of(make_npy(1, ok_dict, floats({1, 2, 3}))).find("expected 8 bytes, got 12"), std::string::npos);
  EXPECT_NE(error_of(make_npy(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", floats({1, 2})))
                .find("'<f4'"),
            std::string::npos);
  EXPECT_NE(error_of(make_npy(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", floats({1, 2})))
                .find("got '<f8'"),
            std::string::npos);
  EXPECT_NE(error_of(make_npy(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", floats({1, 2})))
                .find("fortran_order"),
            std::string::npos);
  EXPECT_NE(error_of(make_npy(1, "{'descr': '<f4', 'shape': (2,), }", floats({1, 2}))).find("expected keys"),
            std::string::npos);
  EXPECT_NE(error_of(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,-1), }", "")).find("shape"),
            std::string::npos);
  EXPECT_NE(error_of(make_npy(1, "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", "")).find("True or False"),
            std::string::npos);
  EXPECT_NE(error_of(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", "")).find("unknown"),
            std::string::npos);
  EXPECT_NE(error_of(make_npy(1, "{'descr': '<f4", "")).find("unterminated"), std::string::npos);
  EXPECT_NE(error_of(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", ""))
                .find("overflow"),
            std::string::npos);
  EXPECT_NE(error_of(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", ""))
                .find("too large"),
            std::string::npos);
  // Header length pointing past the end of the file.
  std::string trunc = make_npy(1, ok_dict, "");
  trunc[8] = static_cast<char>(0xff);
  EXPECT_NE(error_of(trunc).find("truncated header"), std::string::npos);
  EXPECT_NE(error_of(std::string("\x93NUMPY\x02\x00\x01", 9)).find("magic"), std::string::npos);
  EXPECT_NE(error_of(make_npy(1, ok_dict, floats({1}))).find("x.npy"), std::string::npos);
}
