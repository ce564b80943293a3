// Synthetic (random-weight) Qwen3.5 checkpoints at any geometry, written in the real on-disk
// layouts: Hugging Face safetensors (bf16/f16/f32, nested config.json, MTP weights) or the
// mlx-community affine 4/8-bit layout (with MTP kept). Values are sane (fan-in scaled matrices,
// near-neutral norms, A_log = log U(1,16)) and a pure function of (seed, tensor, element), so the
// output is identical for any thread count; rows are generated and quantised streaming.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/json.h"
#include "io/safetensors_writer.h"
#include "model/geometry.h"

namespace mere {

struct SynthOptions {
  Geometry geometry;
  DType dtype = DType::BF16;  // BF16, F16 or F32: weights (HF) or scales/biases + unquantised tensors (MLX)
  int bits = 0;               // 0: Hugging Face layout; 4 or 8: MLX affine layout
  int group_size = 64;        // 32, 64 or 128 (MLX only)
  uint64_t seed = 0;
  bool mtp = true;                          // write the mtp.* block (mtp_num_hidden_layers layers)
  int64_t shard_bytes = int64_t{4096} << 20;  // max tensor bytes per shard; <= 0: one file
  int threads = 0;                          // 0: std::thread::hardware_concurrency()
  std::string out_dir;
  bool force = false;     // replace synth outputs in an existing directory
  bool progress = false;  // progress bar on stderr
};

// How one output tensor's values are produced. Values are generated for a "logical" tensor
// (named by key, laid out [logical rows, cols]) so that the HF and MLX layouts of one seed hold
// the same numbers (split/stacked experts just remap rows).
enum class SynthInit : uint8_t { Uniform, LogUniform1To16 };
enum class SynthRole : uint8_t { Plain, QWeight, QScales, QBiases };

struct SynthTensor {
  TensorDecl decl;            // output name, dtype and shape
  std::string key;            // logical tensor (RNG stream)
  uint64_t key_hash = 0;      // derived from (seed, key)
  SynthInit init = SynthInit::Uniform;
  float lo = 0, hi = 0;       // uniform range (Uniform)
  float add = 0;              // added after sampling (+1: MLX-folded zero-centred norms)
  int64_t rows = 0, cols = 0;  // this output's values as [rows, cols] (cols = last logical dim)
  // Logical row of output row r: base + (r / block) * stride + r % block (block == 0: base + r).
  int64_t block = 0, stride = 0, base = 0;
  SynthRole role = SynthRole::Plain;
  int bits = 0, group = 0;    // quantised roles
  std::string module;         // quantised roles: module path ("language_model.model.layers.0.mlp.gate")
};

struct SynthPlan {
  std::vector<SynthTensor> tensors;  // declared (checkpoint) order
  int64_t param_count = 0;           // logical parameters (quantised weights count their full size)
  Json config;                       // config.json
  Json generation_config;            // generation_config.json
  Json tokenizer;                    // tokenizer.json
  Json tokenizer_config;             // tokenizer_config.json
};

// Builds names, shapes, init rules and JSON files for the options; no I/O. Throws on invalid
// options (dtype, bits, group size, geometry).
SynthPlan synth_plan(const SynthOptions& opt);

// Values of output rows [r0, r0 + n) of t as fp32 (before dtype rounding; for quantised roles the
// logical weight rows), into out [n, t.cols].
void synth_rows(const SynthTensor& t, int64_t r0, int64_t n, float* out);

struct SynthFile {
  std::string name;
  int64_t bytes = 0;
};
struct SynthResult {
  std::string out_dir;
  std::vector<SynthFile> files;
  int64_t bytes = 0;         // all files
  int64_t tensor_bytes = 0;  // safetensors data (the index's total_size)
  int64_t tensor_count = 0;
  int64_t param_count = 0;
  double seconds = 0;
  Json summary() const;  // {"out", "files":[{name,bytes}], "bytes", "tensor_bytes", "tensors", "parameters", ...}
};

// Writes the checkpoint to opt.out_dir: safetensors shard(s) (+ index when sharded), tokenizer
// files, generation_config.json and, last, config.json. Refuses an existing non-empty directory
// unless opt.force (then only files synth writes, and stale shards, are replaced).
SynthResult write_synth_checkpoint(const SynthOptions& opt);

}  // namespace mere
