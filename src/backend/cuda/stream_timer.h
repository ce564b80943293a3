// Times work enqueued on a stream between two CUDA events it owns (freed on every path, errors
// included): the load-time tuners (qmatvec_tune.cpp, prefill_choice.cpp) and the engine's
// copy-bandwidth probe.
#pragma once
#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"

namespace mere::cuda {

class StreamTimer {
 public:
  StreamTimer() = default;
  StreamTimer(const StreamTimer&) = delete;
  StreamTimer& operator=(const StreamTimer&) = delete;

  // Milliseconds between an event recorded before work() and one after it (waits for the latter).
  template <class F>
  float ms(cudaStream_t s, F&& work) {
    MERE_CUDA_CHECK(cudaEventRecord(begin_.e, s));
    work();
    MERE_CUDA_CHECK(cudaEventRecord(end_.e, s));
    MERE_CUDA_CHECK(cudaEventSynchronize(end_.e));
    float t = 0;
    MERE_CUDA_CHECK(cudaEventElapsedTime(&t, begin_.e, end_.e));
    return t;
  }

 private:
  struct Event {
    cudaEvent_t e = nullptr;
    Event() { MERE_CUDA_CHECK(cudaEventCreate(&e)); }
    ~Event() { cudaEventDestroy(e); }
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
  };
  Event begin_, end_;
};

}  // namespace mere::cuda
