// Per-sequence state that lives on an accelerator (the CUDA engine's KV caches, GatedDeltaNet
// state, decode graph). SequenceMemory holds one behind this interface, so checkpoint, rollback,
// rollback_keep, fork and reset keep their meaning with no change to the generator or to
// speculative decoding. Lengths stay on the host in SequenceMemory; the device keeps the data.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

namespace mere {

// A copy of the recurrent (GatedDeltaNet S + conv history) state, on the device.
class DeviceCheckpoint {
 public:
  virtual ~DeviceCheckpoint() = default;
};

class DeviceSequenceState {
 public:
  virtual ~DeviceSequenceState() = default;
  // A deep copy: shares no device memory with this state.
  virtual std::unique_ptr<DeviceSequenceState> fork() const = 0;
  virtual std::shared_ptr<const DeviceCheckpoint> checkpoint() const = 0;
  // Restores the recurrent state of cp bitwise (KV rows are truncated by the host lengths).
  virtual void restore(const DeviceCheckpoint& cp) = 0;
  virtual void reset() = 0;  // zero recurrent state
  virtual size_t bytes() const = 0;
  // Whether this request's T = 1 steps may run as a captured graph owned by the sequence
  // (MERERUN_Q35_SCOPED_COMPILE=0 turns it off: every kernel launched one by one).
  bool graphs = true;
  // Passes captured into a graph so far and the host seconds the captures took (capture + instantiate;
  // each costs several replays; --stats --json reports both), and passes launched kernel by kernel
  // because their kind had not been used often enough to capture yet. The speculative loop leaves
  // both kinds of pass out of its measured costs (runtime/speculative.cpp): neither is what the kind
  // costs from then on.
  uint64_t captures = 0;
  double capture_seconds = 0;
  uint64_t launched_before_capture = 0;
};

// Owning handle whose copy is a deep fork (so SequenceMemory's copy stays a deep copy).
class DeviceStateHandle {
 public:
  DeviceStateHandle() = default;
  explicit DeviceStateHandle(std::unique_ptr<DeviceSequenceState> p) : p_(std::move(p)) {}
  DeviceStateHandle(const DeviceStateHandle& o) : p_(o.p_ ? o.p_->fork() : nullptr) {}
  DeviceStateHandle& operator=(const DeviceStateHandle& o) {
    if (this != &o) p_ = o.p_ ? o.p_->fork() : nullptr;
    return *this;
  }
  DeviceStateHandle(DeviceStateHandle&&) noexcept = default;
  DeviceStateHandle& operator=(DeviceStateHandle&&) noexcept = default;
  DeviceSequenceState* get() const { return p_.get(); }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  std::unique_ptr<DeviceSequenceState> p_;
};

}  // namespace mere
