// safetensors reader: valid files and every kind of malformed header the issue lists.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/safetensors.h"

namespace fs = std::filesystem;
using mere::parse_safetensors;

namespace {

std::string blob(const std::string& header, size_t data_bytes, int64_t declared_len = -1) {
  std::string s(8, '\0');
  uint64_t n = declared_len >= 0 ? static_cast<uint64_t>(declared_len) : header.size();
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  s += header;
  s += std::string(data_bytes, '\x01');
  return s;
}

std::string error_of(const std::string& b) {
  try {
    parse_safetensors(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "t.safetensors");
  } catch (const mere::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Safetensors, ParsesValidHeader) {
  auto b = blob(R"({"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},)"
                R"("b":{"dtype":"F32","shape":[],"data_offsets":[12,16]}})",
                16);
  auto h = parse_safetensors(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "t");
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.metadata.at("format"), "pt");
  EXPECT_EQ(h.tensors[0].numel(), 6);
  EXPECT_EQ(h.tensors[1].numel(), 1);
}

TEST(Safetensors, RejectsMalformedFiles) {
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  struct Case {
    std::string bytes, expect;
  } cases[] = {
      {std::string("\x05\x00\x00", 3), "truncated"},
      {blob(ok, 8, 1000), "runs past the end"},
      {blob(ok, 8, int64_t{1} << 40), "exceeds the 100 MiB limit"},
      {blob(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4), "past the data section"},
      {blob(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,0]}})", 8), "begin 4 > end 0"},
      {blob(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8), "size mismatch"},
      {blob(R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", 8), "unknown dtype"},
      {blob(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8), "non-negative"},
      {blob(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12),
       "overlapping"},
      {blob(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})", 8), "malformed JSON"},
      {blob(R"([1,2])", 0), "must be a JSON object"},
      {blob(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8), "too large"},
      {blob(R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", 8), "shape"},
  };
  for (const auto& c : cases) {
    std::string e = error_of(c.bytes);
    EXPECT_NE(e.find(c.expect), std::string::npos) << "expected '" << c.expect << "', got '" << e << "'";
    EXPECT_NE(e.find("t.safetensors"), std::string::npos) << e;
  }
}

TEST(Safetensors, ShardedIndexAndMissingTensor) {
  fs::path dir = fs::temp_directory_path() / "mere_st_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir / name, std::ios::binary) << bytes;
  };
  write("a.safetensors", blob(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4));
  write("b.safetensors", blob(R"({"y":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}})", 3));
  write("model.safetensors.index.json", R"({"metadata":{},"weight_map":{"x":"a.safetensors","y":"b.safetensors"}})");
  mere::TensorStore s(dir.string());
  EXPECT_EQ(s.all().size(), 2u);
  EXPECT_EQ(s.get("y").nbytes, 3u);
  EXPECT_THROW(s.get("z"), mere::Error);
  write("model.safetensors.index.json", R"({"weight_map":{"x":"a.safetensors","q":"b.safetensors"}})");
  try {
    mere::TensorStore bad(dir.string());
    FAIL();
  } catch (const mere::Error& e) {
    EXPECT_NE(std::string(e.what()).find("lacks it"), std::string::npos) << e.what();
  }
  write("model.safetensors.index.json", R"({"weight_map":{"x":"../a.safetensors"}})");
  EXPECT_THROW(mere::TensorStore{dir.string()}, mere::Error);
  fs::remove_all(dir);
}
