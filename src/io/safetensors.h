// safetensors reader: mmap, single file or sharded (model.safetensors.index.json). Every header
// field is validated: offsets inside the file, sizes matching dtype x shape, no overlapping ranges.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"

namespace mere {

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // points into the mapped file
  size_t nbytes = 0;
  std::string file;  // for error messages

  int64_t numel() const;
  std::string shape_str() const;  // "[3, 4]"
};

struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;  // data pointers relative to the data section start (base = null)
  std::map<std::string, std::string> metadata;
  size_t data_start = 0;  // 8 + header length
};

// Parses and validates a safetensors blob held in memory (the fuzz target calls this directly).
// Throws mere::Error naming `source` and the offending tensor.
SafetensorsHeader parse_safetensors(const uint8_t* data, size_t size, const std::string& source);

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return map_.path(); }

 private:
  MappedFile map_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a checkpoint directory (or one .safetensors file path).
class TensorStore {
 public:
  explicit TensorStore(const std::string& path);
  const TensorInfo* find(const std::string& name) const;
  const TensorInfo& get(const std::string& name) const;  // throws "missing tensor"
  const std::map<std::string, TensorInfo>& all() const { return by_name_; }
  size_t total_bytes() const;

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, TensorInfo> by_name_;
};

}  // namespace mere
