// Per-sequence device state of the CUDA engine: KV caches of the full-attention layers and of the
// MTP head ([cap, nkv, hd] f32, grown by doubling), GatedDeltaNet S + conv history of every linear
// layer in one buffer (so a checkpoint is one device copy), the device trace of the last traced
// pass (for replay), the sequence's positions and token ids on the device, and its decode graph.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/cuda/device.h"
#include "model/config.h"
#include "runtime/device_state.h"

namespace mere::cuda {

inline constexpr int64_t kMaxTraceRows = 16;  // ForwardOptions::kMaxRecurrentRows

struct KvBuf {
  DeviceBuffer k, v;  // [cap, nkv, hd] f32
};

class CudaSeqState final : public DeviceSequenceState {
 public:
  CudaSeqState(CudaDevice& dev, const ModelConfig& cfg, bool with_mtp);
  ~CudaSeqState() override;

  std::unique_ptr<DeviceSequenceState> fork() const override;
  std::shared_ptr<const DeviceCheckpoint> checkpoint() const override;
  void restore(const DeviceCheckpoint& cp) override;
  void reset() override;
  size_t bytes() const override;

  // KV rows [0, rows) addressable in every cache (main: mtp = false); grows (and drops the graph).
  void ensure_kv(int64_t rows, bool mtp);
  float* k(int64_t full_index) const { return kv_[static_cast<size_t>(full_index)].k.as<float>(); }
  float* v(int64_t full_index) const { return kv_[static_cast<size_t>(full_index)].v.as<float>(); }
  float* mtp_k() const { return mtp_.k.as<float>(); }
  float* mtp_v() const { return mtp_.v.as<float>(); }
  float* S(int64_t lin_index) const { return gdn_.as<float>() + lin_index * (s_floats_ + conv_floats_); }
  float* conv(int64_t lin_index) const { return S(lin_index) + s_floats_; }

  // Trace rows of linear layer lin_index (allocated on first use): raw [16, C], q, k [16, Hk*Dk],
  // v [16, Hv*Dv], g, beta [16, Hv].
  struct TraceRows {
    float *raw, *q, *k, *v, *g, *beta;
  };
  TraceRows trace(int64_t lin_index);
  int64_t traced_rows = 0;

  int32_t* ids() const { return io_.as<int32_t>(); }        // [kMaxTraceRows] device
  int32_t* pos() const { return io_.as<int32_t>() + 16; }   // [0]: main position, [1]: MTP position
  int32_t* argmax() const { return io_.as<int32_t>() + 18; }  // [kRows]
  // [16]: CudaEngine::draft_greedy's draft ids [8], then its chained steps' MTP positions [8]
  int32_t* drafts() const { return io_.as<int32_t>() + 32; }

  // pipelined greedy steps (CudaEngine::submit_greedy): a ring of kMaxGreedyInFlight slots of pinned
  // host memory {id out, id in, position in} and an event each, used in submission order
  struct GreedySlot {
    int32_t out, id_in, pos_in;
  };
  GreedySlot* greedy_slot(int64_t n);  // slot of step n (allocates the ring on first use)
  cudaEvent_t greedy_event(int64_t n) const { return events_[static_cast<size_t>(n % kGreedySlots)]; }
  int64_t greedy_submitted = 0, greedy_collected = 0;
  static constexpr int kGreedySlots = 2;

  // captured passes of this sequence (CudaEngine::run_captured), keyed by what the pass does (rows,
  // trace, outputs, main or MTP); all dropped when a cache moves or the trace is first allocated
  std::vector<std::pair<uint64_t, cudaGraphExec_t>> graphs_cache;
  cudaGraphExec_t find_graph(uint64_t key) const;
  uint64_t kv_generation = 0;  // bumped when a cache moves (a graph holds its pointers)
  // uses of each kind of pass (a pass key's low bits, CudaEngine::pass_key) counted up to this one;
  // kept when the caches move, so a kind in use is captured again at its next use
  static constexpr uint64_t kKindBits = 0xffff;
  int count_use(uint64_t kind);
  void drop_graph();

 private:
  CudaDevice& dev_;
  const ModelConfig& cfg_;
  bool with_mtp_;
  int64_t cap_ = 0, mtp_cap_ = 0, rows_used_ = 0, mtp_rows_used_ = 0;
  int64_t s_floats_ = 0, conv_floats_ = 0, lin_layers_ = 0;
  std::vector<KvBuf> kv_;
  std::vector<std::pair<uint64_t, int>> uses_;  // count_use
  KvBuf mtp_;
  DeviceBuffer gdn_, trace_, io_;
  GreedySlot* pinned_ = nullptr;  // cudaHostAlloc'd ring
  cudaEvent_t events_[kGreedySlots] = {};
};

}  // namespace mere::cuda
