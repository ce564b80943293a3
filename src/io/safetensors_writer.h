// Streaming safetensors writer: declare every tensor (name, dtype, shape) up front, the header is
// written at once, then each tensor's bytes are streamed in declared order, so a 15 GB shard never
// has to be in memory. Output goes to "<path>.tmp" and is renamed on finish(). Also: a sharding
// planner (model-0000i-of-0000n.safetensors + model.safetensors.index.json) and the index writer.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/json.h"

namespace mere {

struct TensorDecl {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;

  int64_t numel() const;
  int64_t nbytes() const;
};

// The exact header bytes for tensors laid out back to back in the given order: 8-byte LE length,
// JSON {"__metadata__": metadata, name: {dtype, shape, data_offsets}, ...}, padded with spaces so
// the data starts at a multiple of 8. metadata must be an object of strings (or null: {"format":"pt"}).
std::string safetensors_header(const std::vector<TensorDecl>& tensors, const Json& metadata = Json());

class SafetensorsWriter {
 public:
  // Validates names (non-empty, unique, not "__metadata__") and shapes (dims >= 0), creates
  // "<path>.tmp" and writes the header. Throws mere::Error on any problem.
  SafetensorsWriter(std::string path, std::vector<TensorDecl> tensors, const Json& metadata = Json());
  ~SafetensorsWriter();  // an unfinished writer closes and removes its temp file
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // Appends n bytes of the tensor stream; may cross tensor boundaries (the writer only counts).
  void write(const void* data, size_t n);
  // Index of the tensor the next byte belongs to (== tensors().size() when all data is written),
  // and how many bytes of it are still expected.
  size_t current() const { return cur_; }
  int64_t remaining_in_current() const;
  // Checks every declared byte was written, flushes, fsyncs and renames <path>.tmp -> <path>.
  void finish();

  const std::vector<TensorDecl>& tensors() const { return tensors_; }
  const std::string& path() const { return path_; }
  int64_t header_bytes() const { return header_bytes_; }
  int64_t data_bytes() const { return data_bytes_; }
  int64_t file_bytes() const { return header_bytes_ + data_bytes_; }
  int64_t data_written() const { return written_; }

 private:
  void advance(int64_t n);

  std::string path_, tmp_path_;
  std::vector<TensorDecl> tensors_;
  std::vector<int64_t> ends_;  // cumulative end offset of each tensor
  FILE* f_ = nullptr;
  int64_t header_bytes_ = 0, data_bytes_ = 0, written_ = 0;
  size_t cur_ = 0;
  bool finished_ = false;
};

// Reorders tensors (stable) so every tensor's data offset is a multiple of its element size:
// tensors whose byte size keeps 8-byte alignment stay in place; the others move to the end,
// largest element size first. Keeps X.weight / X.scales / X.biases adjacent in the common case.
std::vector<TensorDecl> order_for_alignment(std::vector<TensorDecl> tensors);

struct ShardPlan {
  std::vector<std::string> files;                // file names (no directory)
  std::vector<std::vector<TensorDecl>> shards;   // each already in write (aligned) order
  int64_t total_bytes = 0;                        // sum of tensor bytes (the index's total_size)
};

// Greedy split in declared order: a shard is closed when the next tensor would push its data past
// max_shard_bytes (a single larger tensor gets a shard of its own). One shard -> "model.safetensors"
// (single-file mode, no index needed); n > 1 -> "model-00001-of-0000n.safetensors", ...
// max_shard_bytes <= 0 means "no limit" (single file).
ShardPlan plan_shards(const std::vector<TensorDecl>& tensors, int64_t max_shard_bytes);
std::string shard_file_name(int index, int count);  // index 0-based -> "model-00001-of-00003.safetensors"
// {"metadata": {"total_size": N}, "weight_map": {name: file, ...}} (names in plan order).
Json shard_index_json(const ShardPlan& plan);

}  // namespace mere
