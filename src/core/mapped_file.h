// Read-only memory-mapped file (RAII). Checkpoints are mapped, never copied.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace mere {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);  // throws mere::Error naming the file
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace mere
