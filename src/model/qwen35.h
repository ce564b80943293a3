// Qwen3.5 (dense and MoE) with its MTP head: the model as a wiring diagram over ops.h.
// forward() runs T tokens at positions memory.length()..; mtp_forward() runs the MTP head.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/weights.h"
#include "runtime/sequence_memory.h"

namespace mere {

enum class LogitsMode { None, Last, All };
class DeviceEngine;

// Per-row inputs of every GatedDeltaNet layer during a (verification) pass, so the recurrent and
// conv state of an accepted prefix can be rebuilt by replaying those rows with the same kernel
// (mtp.md §3 "save the row inputs and replay") instead of a second target pass.
struct GdnTrace {
  struct Layer {
    std::vector<float> raw;      // [T, C] conv inputs (pre-conv in_proj_qkv output)
    std::vector<float> q, k;     // [T, Hk, Dk] normalised (q scaled)
    std::vector<float> v;        // [T, Hv, Dv]
    std::vector<float> g, beta;  // [T, Hv]
  };
  std::vector<Layer> layers;  // by layer index; empty for full-attention layers
  int64_t rows = 0;
};

struct ForwardOptions {
  // GatedDeltaNet algorithm for multi-token calls. Auto: recurrent for T <= kMaxRecurrentRows (the
  // verification widths, so a width-k pass equals k single steps bitwise), chunked above.
  enum class Gdn { Auto, Recurrent, Chunked } gdn = Gdn::Auto;
  GdnTrace* trace = nullptr;  // when set, GatedDeltaNet inputs are recorded (recurrent mode only)
  // When set: the id of the largest logit of the last row (lowest id on ties) is written here, so a
  // device backend need return only the id (logits may then be null).
  int32_t* argmax = nullptr;
  // When set: the id of the largest logit of every row (lowest id on ties) is written here, T ids,
  // so a greedy verification pass needs no logits on the host (logits may then be null). At most
  // kMaxVerifyRows rows; not together with `argmax`.
  int32_t* row_argmax = nullptr;
  static constexpr int64_t kMaxVerifyRows = 9;
  static constexpr int64_t kMaxRecurrentRows = 16;
  static constexpr int64_t kChunk = 64;
};

class Qwen35Model {
 public:
  // backend: "ref" (the CPU reference), "cpu" (the fastest CPU backend built in) or "cuda" (the
  // whole forward on GPU 0; builds without CUDA reject it), "cuda:N" for GPU N.
  static std::unique_ptr<Qwen35Model> load(const std::string& model_dir, const std::string& backend = "cpu");
  ~Qwen35Model();

  const ModelConfig& config() const { return cfg_; }
  const ModelWeights& weights() const { return w_; }
  const TensorStore& store() const { return *store_; }
  const std::string& dir() const { return dir_; }
  const Backend& backend() const { return *backend_; }
  bool has_mtp() const { return w_.mtp.present; }
  SequenceMemory new_memory() const;
  DeviceEngine* device_engine() const { return engine_.get(); }  // null on CPU backends

  // ids: [T]; hidden: [T, H] post-final-norm (may be null); logits: [T, V] (All), [1, V] (Last)
  void forward(const int32_t* ids, int64_t T, SequenceMemory& mem, float* hidden, float* logits, LogitsMode mode,
               const ForwardOptions& opt = {}) const;

  // MTP rows i = (hidden[i], ids[i]) at positions mem.mtp_length()+i; appends to the MTP KV cache.
  // hidden: [T, H] (main post-final-norm hidden, or the previous MTP output when chaining);
  // mtp_hidden: [T, H] post-mtp.norm output (may be null); logits: [T, V] (may be null)
  void mtp_forward(const float* hidden, const int32_t* ids, int64_t T, SequenceMemory& mem, float* mtp_hidden,
                   float* logits, LogitsMode mode = LogitsMode::All) const;

  // After mem.rollback_keep(cp, n): applies the first n traced rows to the GatedDeltaNet states.
  void replay_gdn(const GdnTrace& trace, int64_t n, SequenceMemory& mem) const;

 private:
  Qwen35Model() = default;
  void decoder_layer(const LayerWeights& L, int64_t layer, float* x, int64_t T, SequenceMemory& mem, KvCache* kv,
                     int64_t pos0, const ForwardOptions& opt) const;
  void attention_block(const AttnWeights& a, KvCache& kv, const float* x, int64_t T, int64_t pos0, float* out) const;
  void gdn_block(const GdnWeights& g, GdnState& st, const float* x, int64_t T, const ForwardOptions& opt,
                 GdnTrace::Layer* trace, float* out) const;
  void ffn_block(const LayerWeights& L, const float* x, int64_t T, float* out) const;

  std::string dir_;
  ModelConfig cfg_;
  std::unique_ptr<TensorStore> store_;
  std::unique_ptr<Backend> backend_;
  ModelWeights w_;
  std::unique_ptr<DeviceEngine> engine_;  // "cuda": runs forward / mtp_forward / replay_gdn
};

}  // namespace mere
