// A device-resident forward pass behind Qwen35Model (docs/cuda-engine.md): the engine owns the
// uploaded weights and runs every op of forward / mtp_forward / replay_gdn on its device; the
// sequence's KV caches and recurrent state live in a DeviceSequenceState inside SequenceMemory.
// Qwen35Model::load(dir, "cuda") creates one; the host model keeps the wiring contract.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "model/qwen35.h"

namespace mere {

// Device memory at one moment: what the engine owns and what the whole device has in use
// (cudaMemGetInfo: includes the CUDA context, every sequence's KV caches and recurrent state, and
// any other process on the same GPU).
struct DeviceMemoryReport {
  size_t weights = 0;  // uploaded weights
  size_t scratch = 0;  // forward-pass scratch (decode + prefill), owned by the engine
  size_t used = 0;     // device-wide bytes in use (total - free)
  size_t total = 0;    // device memory
};

class DeviceEngine {
 public:
  virtual ~DeviceEngine() = default;
  virtual std::string describe() const = 0;       // device and what was uploaded
  virtual size_t weight_bytes() const = 0;         // bytes of weights on the device
  virtual std::unique_ptr<DeviceSequenceState> new_state() = 0;
  // Device-to-device copy bandwidth (bytes read + written per second / 1e9), measured now over
  // buffers well beyond the L2: the ceiling bench reports decode against.
  virtual double copy_bandwidth_gbs() = 0;
  virtual DeviceMemoryReport device_memory() = 0;
  // Same contracts as Qwen35Model's methods of the same names.
  virtual void forward(const int32_t* ids, int64_t T, SequenceMemory& mem, float* hidden, float* logits,
                       LogitsMode mode, const ForwardOptions& opt) = 0;
  virtual void mtp_forward(const float* hidden, const int32_t* ids, int64_t T, SequenceMemory& mem, float* mtp_hidden,
                           float* logits, LogitsMode mode) = 0;
  // Replays the first n rows of the sequence's last traced pass (the trace stays on the device).
  virtual void replay_gdn(int64_t n, SequenceMemory& mem) = 0;
  // Pipelined greedy decoding (mtp.md §4, runtime/pipelined_decode.h). submit_greedy enqueues one
  // T = 1 step of `mem` whose input is *host_id, or (host_id null) the id the previous step's device
  // argmax left on the device, and whose argmax (lowest id on ties) is copied to pinned host memory;
  // it returns without waiting and advances mem by one. collect_greedy waits for the oldest step not
  // yet collected and returns its id. At most kMaxGreedyInFlight steps may be outstanding; every
  // submitted step must be collected before any other call on `mem`.
  static constexpr int kMaxGreedyInFlight = 2;
  virtual void submit_greedy(SequenceMemory& mem, const int32_t* host_id) = 0;
  virtual int32_t collect_greedy(SequenceMemory& mem) = 0;
  // Greedy MTP drafting on the device (mtp.md §3 step 3): the head's pass over n >= 1 confirmed rows
  // (hidden [n, H], ids [n] from the host), then d - 1 chained head steps, each fed the previous
  // step's head hidden and draft without leaving the device; every draft is the argmax (lowest id on
  // ties) of the head's logits, as mtp_forward's logits would give. The MTP cache grows by n + d - 1
  // rows (the caller truncates the d - 1 speculative ones). One host wait, at the end. drafts: [d],
  // 1 <= d <= 8. Same head arithmetic as mtp_forward (the same passes, the logits left on the device).
  virtual void draft_greedy(const float* hidden, const int32_t* ids, int64_t n, int d, SequenceMemory& mem,
                            int32_t* drafts) = 0;
  // Whether the speculative loop should draft through draft_greedy where a request allows it
  // (greedy, no penalties); MERE_CUDA_DRAFTS=host keeps the host loop (mtp_forward + host argmax).
  virtual bool drafts_on_device() const = 0;
  // Whether mtp_forward of `rows` rows with no outputs (head priming) runs them as the prompt's GEMMs,
  // far cheaper than head passes: the host drafting loop then primes all confirmed rows but the last
  // that way before the last one's pass with its outputs.
  virtual bool head_rows_on_gemms(int64_t rows) const {
    (void)rows;
    return false;
  }
};

// Defined by the CUDA engine (src/backend/cuda/engine/) only when the build has CUDA (MERE_HAVE_CUDA);
// without it make_backend("cuda") fails before this is reached. Weights must
// outlive the engine only during the call (they are copied to the device).
std::unique_ptr<DeviceEngine> make_cuda_engine(const ModelConfig& cfg, const ModelWeights& w, int device_ordinal);

}  // namespace mere
