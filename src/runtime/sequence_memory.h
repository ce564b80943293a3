// Per-sequence memory: KV caches of the full-attention layers (and of the MTP head), GatedDeltaNet
// recurrent state and conv history, behind one interface with checkpoint, rollback and fork.
// Speculative verification rolls back to a checkpoint; the prefix cache forks.
#pragma once
#include <cstdint>
#include <vector>

#include "model/config.h"
#include "runtime/device_state.h"

namespace mere {

// Append-only KV cache of one attention layer. k, v: [capacity, nkv, hd] f32, `length` rows valid.
struct KvCache {
  int64_t nkv = 0, hd = 0, length = 0;
  std::vector<float> k, v;
  void append(const float* k_row /*[nkv*hd]*/, const float* v_row /*[nkv*hd]*/);
  void truncate(int64_t n);
  size_t bytes() const { return (k.capacity() + v.capacity()) * sizeof(float); }
};

// GatedDeltaNet layer state. S: [Hv, Dv, Dk] f32; conv: [K-1, C] raw (pre-conv) inputs, oldest first.
struct GdnState {
  std::vector<float> S;
  std::vector<float> conv;
};

class SequenceMemory {
 public:
  SequenceMemory() = default;
  explicit SequenceMemory(const ModelConfig& cfg, bool with_mtp);
  // A sequence whose KV caches and recurrent state live on a device (the CUDA engine): the host
  // keeps only the lengths; kv()/gdn() are empty and the device state does the work.
  SequenceMemory(const ModelConfig& cfg, bool with_mtp, std::unique_ptr<DeviceSequenceState> device);

  int64_t length() const { return length_; }          // tokens committed to the main model
  int64_t mtp_length() const { return mtp_.length; }  // rows in the MTP head's KV cache
  void advance(int64_t n) { length_ += n; }

  KvCache& kv(int64_t layer) { return kv_[static_cast<size_t>(layer)]; }
  GdnState& gdn(int64_t layer) { return gdn_[static_cast<size_t>(layer)]; }
  KvCache& mtp_kv() { return mtp_; }
  void advance_mtp(int64_t n) { mtp_.length += n; }  // device sequences: rows the device appended
  DeviceSequenceState* device() const { return dev_.get(); }  // null for host sequences

  // A checkpoint holds the lengths and a copy of the recurrent state; KV entries below the lengths
  // are never modified, so rollback truncates them and restores the state bitwise.
  struct Checkpoint {
    int64_t length = 0, mtp_length = 0;
    std::vector<GdnState> gdn;
    std::shared_ptr<const DeviceCheckpoint> device;  // device sequences: the recurrent state
  };
  Checkpoint checkpoint() const;
  void rollback(const Checkpoint& cp);
  // Keeps the first n rows appended since cp in the KV caches (they were computed from the same
  // inputs) and restores the recurrent state of cp; the caller then replays n rows of GatedDeltaNet
  // (Qwen35Model::replay_gdn). The MTP cache is left alone.
  void rollback_keep(const Checkpoint& cp, int64_t n);
  SequenceMemory fork() const { return *this; }  // deep copy (device state too): shares nothing
  void reset();

  size_t bytes() const;

 private:
  void restore_device(const Checkpoint& cp);
  int64_t length_ = 0;
  std::vector<KvCache> kv_;    // per layer (empty for linear layers)
  std::vector<GdnState> gdn_;  // per layer (empty for full layers)
  KvCache mtp_;
  DeviceStateHandle dev_;
};

}  // namespace mere
