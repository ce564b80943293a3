#include "runtime/pipelined_decode.h"

namespace mere {

int64_t decode_pipelined(DeviceEngine& engine, SequenceMemory& mem, int32_t first, int64_t remaining,
                         const std::function<bool(int32_t)>& emit) {
  if (remaining <= 0) return 0;
  engine.submit_greedy(mem, &first);  // step computing the token after `first`
  int64_t pending = 1, emitted = 0;
  try {
    for (;;) {
      // one step ahead: the token it computes is wanted only if it can still be emitted
      if (emitted + pending < remaining) {
        engine.submit_greedy(mem, nullptr);
        ++pending;
      }
      const int32_t id = engine.collect_greedy(mem);
      --pending;
      if (!emit(id)) break;
      if (++emitted >= remaining) break;
    }
  } catch (...) {
    while (pending-- > 0) engine.collect_greedy(mem);
    throw;
  }
  while (pending-- > 0) engine.collect_greedy(mem);  // computed past the end: thrown away
  return emitted;
}

}  // namespace mere
