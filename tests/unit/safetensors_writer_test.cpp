// Streaming safetensors writer: header bytes and alignment, streamed data, temp-file discipline,
// error cases, alignment ordering, shard planning and the index JSON. Output is parsed here with
// mere::Json only (independent of the reader under src/io/safetensors.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/json.h"
#include "io/safetensors_writer.h"

namespace fs = std::filesystem;
using mere::DType;
using mere::Json;
using mere::TensorDecl;

namespace {

fs::path temp_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("mere_stw_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

uint64_t le64(const std::string& s) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(s[static_cast<size_t>(i)]);
  return n;
}

Json header_json(const std::string& file_bytes, size_t* data_start) {
  uint64_t n = le64(file_bytes);
  *data_start = 8 + n;
  return Json::parse(file_bytes.substr(8, n), "header");
}

}  // namespace

TEST(SafetensorsWriter, HeaderLayoutAndPadding) {
  std::vector<TensorDecl> t = {{"a", DType::BF16, {2, 3}}, {"b", DType::F32, {}}, {"c", DType::U8, {5}}};
  std::string h = mere::safetensors_header(t);
  ASSERT_GE(h.size(), 8u);
  uint64_t n = le64(h);
  EXPECT_EQ(h.size(), 8 + n);
  EXPECT_EQ(h.size() % 8, 0u);
  std::string json = h.substr(8);
  EXPECT_EQ(json.front(), '{');
  size_t last = json.find_last_not_of(' ');
  EXPECT_EQ(json[last], '}');
  Json j = Json::parse(json);
  const auto& obj = j.as_object();
  ASSERT_EQ(obj.size(), 4u);
  EXPECT_EQ(obj[0].first, "__metadata__");
  EXPECT_EQ(j.at("__metadata__").at("format").as_string(), "pt");
  EXPECT_EQ(j.at("a").at("dtype").as_string(), "BF16");
  EXPECT_EQ(j.at("a").at("shape").at(1).as_int(), 3);
  EXPECT_EQ(j.at("a").at("data_offsets").at(0).as_int(), 0);
  EXPECT_EQ(j.at("a").at("data_offsets").at(1).as_int(), 12);
  EXPECT_EQ(j.at("b").at("shape").size(), 0u);
  EXPECT_EQ(j.at("b").at("data_offsets").at(1).as_int(), 16);
  EXPECT_EQ(j.at("c").at("data_offsets").at(1).as_int(), 21);
}

TEST(SafetensorsWriter, CustomMetadataAndValidation) {
  Json meta = Json::object();
  meta["format"] = "mlx";
  std::string h = mere::safetensors_header({{"x", DType::F32, {1}}}, meta);
  EXPECT_NE(h.find("\"mlx\""), std::string::npos);
  Json bad = Json::object();
  bad["n"] = 3;
  EXPECT_THROW(mere::safetensors_header({{"x", DType::F32, {1}}}, bad), mere::Error);
  EXPECT_THROW(mere::safetensors_header({{"x", DType::F32, {1}}, {"x", DType::F32, {1}}}), mere::Error);
  EXPECT_THROW(mere::safetensors_header({{"__metadata__", DType::F32, {1}}}), mere::Error);
  EXPECT_THROW(mere::safetensors_header({{"", DType::F32, {1}}}), mere::Error);
  EXPECT_THROW(mere::safetensors_header({{"x", DType::F32, {-1}}}), mere::Error);
}

TEST(SafetensorsWriter, StreamsDataInDeclaredOrder) {
  fs::path dir = temp_dir("stream");
  std::vector<TensorDecl> t = {{"w", DType::F32, {2, 2}}, {"b", DType::BF16, {3}}, {"e", DType::I32, {0}}};
  const std::string path = (dir / "m.safetensors").string();
  {
    mere::SafetensorsWriter w(path, t);
    EXPECT_TRUE(fs::exists(path + ".tmp"));
    EXPECT_FALSE(fs::exists(path));
    EXPECT_EQ(w.current(), 0u);
    float wv[4] = {1, 2, 3, 4};
    w.write(wv, 8);  // half of "w"
    EXPECT_EQ(w.current(), 0u);
    EXPECT_EQ(w.remaining_in_current(), 8);
    uint16_t bv[3] = {0x3f80, 0x4000, 0x4040};
    // The rest of "w" and all of "b" in one call: writes may span tensors.
    std::string rest(reinterpret_cast<const char*>(wv) + 8, 8);
    rest.append(reinterpret_cast<const char*>(bv), 6);
    w.write(rest.data(), rest.size());
    EXPECT_EQ(w.current(), 3u);  // the empty tensor is complete too
    EXPECT_EQ(w.data_written(), 22);
    w.finish();
    EXPECT_EQ(static_cast<int64_t>(fs::file_size(path)), w.file_bytes());
  }
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  std::string bytes = slurp(path);
  size_t ds = 0;
  Json h = header_json(bytes, &ds);
  EXPECT_EQ(ds % 8, 0u);
  EXPECT_EQ(bytes.size(), ds + 22);
  float back[4];
  std::memcpy(back, bytes.data() + ds, 16);
  EXPECT_EQ(back[3], 4.0f);
  uint16_t b2;
  std::memcpy(&b2, bytes.data() + ds + 16 + 2, 2);
  EXPECT_EQ(b2, 0x4000);
  EXPECT_EQ(h.at("e").at("data_offsets").at(0).as_int(), 22);
  fs::remove_all(dir);
}

TEST(SafetensorsWriter, RejectsTooMuchOrTooLittleData) {
  fs::path dir = temp_dir("errors");
  const std::string path = (dir / "m.safetensors").string();
  {
    mere::SafetensorsWriter w(path, {{"a", DType::F32, {2}}});
    char buf[12] = {};
    EXPECT_THROW(w.write(buf, 12), mere::Error);
    w.write(buf, 4);
    try {
      w.finish();
      FAIL() << "finish accepted incomplete data";
    } catch (const mere::Error& e) {
      EXPECT_NE(std::string(e.what()).find("incomplete"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("\"a\""), std::string::npos) << e.what();
    }
  }
  // An abandoned writer leaves nothing behind.
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  EXPECT_THROW(mere::SafetensorsWriter((dir / "no" / "such" / "dir.safetensors").string(), {}), mere::Error);
  fs::remove_all(dir);
}

TEST(SafetensorsWriter, AlignmentOrderKeepsOffsetsAligned) {
  std::vector<TensorDecl> t = {{"w1", DType::U32, {4, 2}},  {"s1", DType::BF16, {4, 1}}, {"odd", DType::BF16, {3}},
                               {"f", DType::F32, {3}},      {"u8", DType::U8, {5}},      {"w2", DType::U32, {2, 4}},
                               {"big", DType::BF16, {8}}};
  auto o = mere::order_for_alignment(t);
  ASSERT_EQ(o.size(), t.size());
  // 8-byte-multiple tensors keep their relative order at the front.
  EXPECT_EQ(o[0].name, "w1");
  EXPECT_EQ(o[1].name, "s1");
  EXPECT_EQ(o[2].name, "w2");
  EXPECT_EQ(o[3].name, "big");
  int64_t off = 0;
  for (const auto& d : o) {
    EXPECT_EQ(off % static_cast<int64_t>(mere::dtype_size(d.dtype)), 0) << d.name;
    off += d.nbytes();
  }
}

TEST(SafetensorsWriter, PlanShardsAndIndex) {
  std::vector<TensorDecl> t;
  for (int i = 0; i < 10; ++i) t.push_back({"t" + std::to_string(i), DType::F32, {100}});  // 400 B each
  t.push_back({"huge", DType::F32, {1000}});                                                  // 4000 B
  t.push_back({"tail", DType::BF16, {3}});                                                    // 6 B
  auto plan = mere::plan_shards(t, 1000);
  ASSERT_EQ(plan.shards.size(), 7u);  // 2+2+2+2+2 small, huge alone, tail
  EXPECT_EQ(plan.files[0], "model-00001-of-00007.safetensors");
  EXPECT_EQ(plan.files[6], "model-00007-of-00007.safetensors");
  EXPECT_EQ(plan.shards[5].size(), 1u);
  EXPECT_EQ(plan.shards[5][0].name, "huge");
  EXPECT_EQ(plan.total_bytes, 10 * 400 + 4000 + 6);
  for (const auto& s : plan.shards) {
    int64_t bytes = 0;
    for (const auto& d : s) bytes += d.nbytes();
    EXPECT_TRUE(bytes <= 1000 || s.size() == 1);
  }
  Json idx = mere::shard_index_json(plan);
  EXPECT_EQ(idx.at("metadata").at("total_size").as_int(), plan.total_bytes);
  EXPECT_EQ(idx.at("weight_map").size(), t.size());
  EXPECT_EQ(idx.at("weight_map").at("t3").as_string(), "model-00002-of-00007.safetensors");
  EXPECT_EQ(idx.at("weight_map").at("tail").as_string(), "model-00007-of-00007.safetensors");

  auto single = mere::plan_shards(t, 0);
  ASSERT_EQ(single.shards.size(), 1u);
  EXPECT_EQ(single.files[0], "model.safetensors");
  auto fits = mere::plan_shards(t, 1 << 20);
  ASSERT_EQ(fits.files.size(), 1u);
  EXPECT_EQ(fits.files[0], "model.safetensors");
  EXPECT_EQ(mere::shard_file_name(11, 12), "model-00012-of-00012.safetensors");
}
