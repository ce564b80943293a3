// The pipelined greedy decoder (mtp.md §4) on a device engine: the device's argmax of step N is the
// input of step N+1 without a host round trip, and the host reads token N (a 4-byte copy into
// pinned memory) while the device already runs step N+1, so read-back latency is hidden. A token
// that ends generation (EOS, stop token, the callback) costs one step computed past the end and
// thrown away; the budget costs none (no step is submitted whose token could not be emitted).
// Only for greedy requests whose tokens depend on the argmax alone (no penalties).
#pragma once
#include <cstdint>
#include <functional>

#include "model/device_engine.h"
#include "runtime/sequence_memory.h"

namespace mere {

// `first` has just been emitted and is not yet in `mem`. Emits at most `remaining` further tokens
// through emit(id), which returns false when generation ends (that id is not counted as emitted).
// On return no step is in flight; `mem` may hold one position more than the emitted tokens need.
// Returns the number of tokens emit accepted.
int64_t decode_pipelined(DeviceEngine& engine, SequenceMemory& mem, int32_t first, int64_t remaining,
                         const std::function<bool(int32_t)>& emit);

}  // namespace mere
