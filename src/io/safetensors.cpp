// safetensors parsing and validation; sharded checkpoints through the index's weight_map.
#include "io/safetensors.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/json.h"

namespace fs = std::filesystem;

namespace mere {

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string TensorInfo::shape_str() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

namespace {
constexpr uint64_t kMaxHeader = 100ull << 20;  // 100 MiB, as the reference implementation allows
}

SafetensorsHeader parse_safetensors(const uint8_t* data, size_t size, const std::string& source) {
  SafetensorsHeader h;
  if (size < 8) fail(source, cat("truncated safetensors file: expected at least 8 bytes, got ", size));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
  if (n > kMaxHeader) fail(source, cat("header length ", n, " exceeds the 100 MiB limit"));
  if (n > size - 8) fail(source, cat("header length ", n, " runs past the end of the file (", size, " bytes)"));
  h.data_start = 8 + static_cast<size_t>(n);
  const size_t data_size = size - h.data_start;
  Json j;
  try {
    j = Json::parse(std::string_view(reinterpret_cast<const char*>(data + 8), static_cast<size_t>(n)),
                    source + " header", 64);
  } catch (const Error& e) {
    fail(source, e.what());
  }
  if (!j.is_object()) fail(source, cat("header must be a JSON object, got ", Json::type_name(j.type())));

  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  std::vector<size_t> range_owner;
  for (const auto& [name, v] : j.as_object()) {
    if (name == "__metadata__") {
      if (!v.is_object()) fail(source, "__metadata__ must be an object");
      for (const auto& [k, mv] : v.as_object()) {
        if (!mv.is_string()) fail(source, cat("__metadata__[\"", k, "\"] must be a string"));
        h.metadata[k] = mv.as_string();
      }
      continue;
    }
    const std::string where = source + ": tensor " + name;
    if (!v.is_object()) fail(where, "entry must be an object");
    const Json* jd = v.find("dtype");
    const Json* js = v.find("shape");
    const Json* jo = v.find("data_offsets");
    if (!jd || !jd->is_string()) fail(where, "missing or non-string \"dtype\"");
    if (!js || !js->is_array()) fail(where, "missing or non-array \"shape\"");
    if (!jo || !jo->is_array() || jo->size() != 2) fail(where, "\"data_offsets\" must be [begin, end]");
    TensorInfo t;
    t.name = name;
    t.file = source;
    if (!parse_dtype(jd->as_string(), &t.dtype)) fail(where, cat("unknown dtype \"", jd->as_string(), "\""));
    if (js->size() > 8) fail(where, cat("too many dimensions: ", js->size()));
    unsigned __int128 elems = 1;
    for (const auto& d : js->as_array()) {
      if (!d.is_integer() || d.as_int() < 0) fail(where, "shape entries must be non-negative integers");
      t.shape.push_back(d.as_int());
      elems *= static_cast<uint64_t>(d.as_int());
      if (elems > (static_cast<unsigned __int128>(1) << 62)) fail(where, "shape too large");
    }
    for (const auto& o : jo->as_array())
      if (!o.is_integer() || o.as_int() < 0) fail(where, "data_offsets must be non-negative integers");
    const uint64_t b = static_cast<uint64_t>(jo->at(size_t{0}).as_int());
    const uint64_t e = static_cast<uint64_t>(jo->at(size_t{1}).as_int());
    if (b > e) fail(where, cat("data_offsets begin ", b, " > end ", e));
    if (e > data_size) fail(where, cat("data_offsets end ", e, " past the data section (", data_size, " bytes)"));
    const unsigned __int128 want = elems * dtype_size(t.dtype);
    if (want != e - b)
      fail(where, cat("size mismatch: ", dtype_name(t.dtype), " ", t.shape_str(), " needs ",
                      static_cast<uint64_t>(want), " bytes, data_offsets give ", e - b));
    t.data = reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(b));  // relative; rebased by caller
    t.nbytes = static_cast<size_t>(e - b);
    ranges.emplace_back(b, e);
    range_owner.push_back(h.tensors.size());
    h.tensors.push_back(std::move(t));
  }
  std::vector<size_t> order(ranges.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ranges[a] < ranges[b]; });
  for (size_t k = 1; k < order.size(); ++k) {
    const auto& prev = ranges[order[k - 1]];
    const auto& cur = ranges[order[k]];
    if (cur.first < prev.second && cur.first != cur.second && prev.first != prev.second)
      fail(source, cat("overlapping data: tensors ", h.tensors[range_owner[order[k - 1]]].name, " and ",
                       h.tensors[range_owner[order[k]]].name));
  }
  return h;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : map_(path) {
  SafetensorsHeader h = parse_safetensors(map_.data(), map_.size(), path);
  metadata_ = std::move(h.metadata);
  tensors_ = std::move(h.tensors);
  const uint8_t* base = map_.data() + h.data_start;
  for (auto& t : tensors_) t.data = base + reinterpret_cast<uintptr_t>(t.data);
}

TensorStore::TensorStore(const std::string& path) {
  std::vector<std::string> files;
  std::map<std::string, std::string> expected;  // tensor -> file, from the index
  if (fs::is_regular_file(path)) {
    files.push_back(path);
  } else if (fs::is_directory(path)) {
    const fs::path index = fs::path(path) / "model.safetensors.index.json";
    if (fs::exists(index)) {
      Json j = Json::parse_file(index.string());
      const Json* wm = j.find("weight_map");
      if (!wm || !wm->is_object()) fail(index.string(), "missing \"weight_map\" object");
      std::set<std::string> uniq;
      for (const auto& [name, f] : wm->as_object()) {
        if (!f.is_string()) fail(index.string(), cat("weight_map[\"", name, "\"] must be a file name"));
        const std::string& fn = f.as_string();
        if (fn.find('/') != std::string::npos || fn.find("..") != std::string::npos)
          fail(index.string(), cat("weight_map file name \"", fn, "\" must be a plain file name"));
        expected[name] = fn;
        uniq.insert(fn);
      }
      for (const auto& f : uniq) files.push_back((fs::path(path) / f).string());
    } else {
      for (const auto& e : fs::directory_iterator(path))
        if (e.is_regular_file() && e.path().extension() == ".safetensors") files.push_back(e.path().string());
      std::sort(files.begin(), files.end());
      if (files.empty()) fail(path, "no .safetensors files and no model.safetensors.index.json");
    }
  } else {
    fail(path, "no such file or directory");
  }
  for (const auto& f : files) {
    files_.push_back(std::make_unique<SafetensorsFile>(f));
    const std::string base = fs::path(f).filename().string();
    for (const auto& t : files_.back()->tensors()) {
      if (!expected.empty()) {
        auto it = expected.find(t.name);
        if (it == expected.end() || it->second != base) continue;  // index says it lives elsewhere
      }
      if (by_name_.count(t.name)) fail(f, cat("duplicate tensor ", t.name, " (also in ", by_name_[t.name].file, ")"));
      by_name_[t.name] = t;
    }
  }
  for (const auto& [name, file] : expected)
    if (!by_name_.count(name)) fail(path, cat("index lists tensor ", name, " in ", file, " but that file lacks it"));
}

const TensorInfo* TensorStore::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &it->second;
}

const TensorInfo& TensorStore::get(const std::string& name) const {
  const TensorInfo* t = find(name);
  if (!t) fail("checkpoint", cat("missing tensor ", name));
  return *t;
}

size_t TensorStore::total_bytes() const {
  size_t n = 0;
  for (const auto& [_, t] : by_name_) n += t.nbytes;
  return n;
}

}  // namespace mere
