// Streaming safetensors writer, alignment ordering and shard planning (see safetensors_writer.h).
// The writer holds only the header in memory; tensor data passes straight through a FILE* with a
// large buffer. Nothing appears under the final name until finish() renames the temp file.
#include "io/safetensors_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <utility>

#include "core/error.h"

namespace mere {

namespace {

constexpr const char* kWhere = "safetensors_writer";

std::string errno_text() { return std::strerror(errno); }

Json default_metadata(const Json& metadata) {
  if (metadata.is_null()) {
    Json m = Json::object();
    m["format"] = "pt";
    return m;
  }
  MERE_CHECK(metadata.is_object(), kWhere, "__metadata__: expected an object, got ",
             Json::type_name(metadata.type()));
  for (const auto& [k, v] : metadata.as_object())
    MERE_CHECK(v.is_string(), kWhere, "__metadata__[\"", k, "\"]: expected a string, got ",
               Json::type_name(v.type()));
  return metadata;
}

void validate(const std::vector<TensorDecl>& tensors) {
  std::set<std::string> seen;
  for (const auto& t : tensors) {
    MERE_CHECK(!t.name.empty(), kWhere, "tensor name: expected non-empty, got \"\"");
    MERE_CHECK(t.name != "__metadata__", kWhere, "tensor name: \"__metadata__\" is reserved");
    MERE_CHECK(seen.insert(t.name).second, kWhere, "tensor \"", t.name, "\": declared twice");
    for (int64_t d : t.shape)
      MERE_CHECK(d >= 0, kWhere, "tensor \"", t.name, "\": expected dims >= 0, got ", d);
  }
}

}  // namespace

int64_t TensorDecl::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t TensorDecl::nbytes() const { return numel() * static_cast<int64_t>(dtype_size(dtype)); }

std::string safetensors_header(const std::vector<TensorDecl>& tensors, const Json& metadata) {
  validate(tensors);
  Json h = Json::object();
  h["__metadata__"] = default_metadata(metadata);
  int64_t off = 0;
  for (const auto& t : tensors) {
    Json e = Json::object();
    e["dtype"] = dtype_name(t.dtype);
    Json shape = Json::array();
    for (int64_t d : t.shape) shape.push_back(d);
    e["shape"] = std::move(shape);
    Json offs = Json::array();
    offs.push_back(off);
    off += t.nbytes();
    offs.push_back(off);
    e["data_offsets"] = std::move(offs);
    h.as_object().emplace_back(t.name, std::move(e));  // names are unique (validated): no lookup
  }
  std::string json = h.dump();
  size_t padded = (json.size() + 8 + 7) / 8 * 8 - 8;
  json.append(padded - json.size(), ' ');
  std::string out(8, '\0');
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out += json;
  return out;
}

SafetensorsWriter::SafetensorsWriter(std::string path, std::vector<TensorDecl> tensors, const Json& metadata)
    : path_(std::move(path)), tensors_(std::move(tensors)) {
  std::string header = safetensors_header(tensors_, metadata);
  header_bytes_ = static_cast<int64_t>(header.size());
  for (const auto& t : tensors_) {
    data_bytes_ += t.nbytes();
    ends_.push_back(data_bytes_);
  }
  tmp_path_ = path_ + ".tmp";
  f_ = std::fopen(tmp_path_.c_str(), "wb");
  MERE_CHECK(f_ != nullptr, kWhere, "cannot create \"", tmp_path_, "\": ", errno_text());
  std::setvbuf(f_, nullptr, _IOFBF, 8 << 20);
  if (std::fwrite(header.data(), 1, header.size(), f_) != header.size()) {
    std::string err = errno_text();
    std::fclose(f_);
    f_ = nullptr;
    std::remove(tmp_path_.c_str());
    fail(kWhere, cat("writing header of \"", tmp_path_, "\": ", err));
  }
  advance(0);
}

SafetensorsWriter::~SafetensorsWriter() {
  if (f_) {
    std::fclose(f_);
    std::remove(tmp_path_.c_str());
  }
}

void SafetensorsWriter::advance(int64_t n) {
  written_ += n;
  while (cur_ < tensors_.size() && ends_[cur_] <= written_) ++cur_;
}

int64_t SafetensorsWriter::remaining_in_current() const {
  return cur_ < tensors_.size() ? ends_[cur_] - written_ : 0;
}

void SafetensorsWriter::write(const void* data, size_t n) {
  MERE_CHECK(f_ != nullptr && !finished_, kWhere, "\"", path_, "\": write after finish");
  MERE_CHECK(written_ + static_cast<int64_t>(n) <= data_bytes_, kWhere, "\"", path_,
             "\": too much data: expected ", data_bytes_, " bytes in total, got ", written_ + static_cast<int64_t>(n));
  if (n == 0) return;
  if (std::fwrite(data, 1, n, f_) != n)
    fail(kWhere, cat("writing \"", tmp_path_, "\" at data byte ", written_, ": ", errno_text()));
  advance(static_cast<int64_t>(n));
}

void SafetensorsWriter::finish() {
  MERE_CHECK(f_ != nullptr && !finished_, kWhere, "\"", path_, "\": finish called twice");
  if (written_ != data_bytes_) {
    const std::string& name = tensors_[cur_].name;
    fail(kWhere, cat("\"", path_, "\": incomplete data: expected ", data_bytes_, " bytes, got ", written_,
                     " (tensor \"", name, "\" unfinished)"));
  }
  bool ok = std::fflush(f_) == 0;
  std::string err = ok ? "" : errno_text();
  if (ok && ::fsync(fileno(f_)) != 0) {
    ok = false;
    err = errno_text();
  }
  if (std::fclose(f_) != 0 && ok) {
    ok = false;
    err = errno_text();
  }
  f_ = nullptr;
  if (!ok) {
    std::remove(tmp_path_.c_str());
    fail(kWhere, cat("closing \"", tmp_path_, "\": ", err));
  }
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    err = errno_text();
    std::remove(tmp_path_.c_str());
    fail(kWhere, cat("renaming \"", tmp_path_, "\" to \"", path_, "\": ", err));
  }
  finished_ = true;
}

std::vector<TensorDecl> order_for_alignment(std::vector<TensorDecl> tensors) {
  std::vector<TensorDecl> keep, tail;
  for (auto& t : tensors) (t.nbytes() % 8 == 0 ? keep : tail).push_back(std::move(t));
  std::stable_sort(tail.begin(), tail.end(), [](const TensorDecl& a, const TensorDecl& b) {
    return dtype_size(a.dtype) > dtype_size(b.dtype);
  });
  for (auto& t : tail) keep.push_back(std::move(t));
  return keep;
}

std::string shard_file_name(int index, int count) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", index + 1, count);
  return buf;
}

ShardPlan plan_shards(const std::vector<TensorDecl>& tensors, int64_t max_shard_bytes) {
  validate(tensors);
  ShardPlan plan;
  std::vector<TensorDecl> cur;
  int64_t cur_bytes = 0;
  for (const auto& t : tensors) {
    int64_t b = t.nbytes();
    if (max_shard_bytes > 0 && !cur.empty() && cur_bytes + b > max_shard_bytes) {
      plan.shards.push_back(order_for_alignment(std::move(cur)));
      cur.clear();
      cur_bytes = 0;
    }
    cur.push_back(t);
    cur_bytes += b;
    plan.total_bytes += b;
  }
  if (!cur.empty() || plan.shards.empty()) plan.shards.push_back(order_for_alignment(std::move(cur)));
  int n = static_cast<int>(plan.shards.size());
  for (int i = 0; i < n; ++i) plan.files.push_back(n == 1 ? "model.safetensors" : shard_file_name(i, n));
  return plan;
}

Json shard_index_json(const ShardPlan& plan) {
  Json idx = Json::object();
  Json meta = Json::object();
  meta["total_size"] = plan.total_bytes;
  idx["metadata"] = std::move(meta);
  Json map = Json::object();
  for (size_t s = 0; s < plan.shards.size(); ++s)
    for (const auto& t : plan.shards[s]) map.as_object().emplace_back(t.name, Json(plan.files[s]));
  idx["weight_map"] = std::move(map);
  return idx;
}

}  // namespace mere
