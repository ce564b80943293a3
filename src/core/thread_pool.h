// A small fork-join thread pool for the CPU backend. parallel_for hands out chunks dynamically and
// never waits for a worker that has not started: a worker that wakes after the caller has taken
// every chunk skips the job, so a descheduled worker on a busy machine costs nothing. run(fn)
// calls fn(w, n) on every worker (static shares) and waits for all. Workers spin briefly, then
// sleep on a futex (std::atomic::wait). One job at a time per pool (a mutex serialises them).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mere {

// Physical cores available to this process (SMT siblings counted once, affinity respected); >= 1.
int physical_core_count();

// Process-wide default for CPU backends created after the call (the CLI's --threads).
// 0 or negative: physical_core_count().
void set_default_threads(int n);
int default_threads();

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads <= 0: default_threads()
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_; }
  // Calls fn(w, size()) for w in [0, size()) concurrently; the calling thread runs w = 0.
  // An exception thrown by any worker is rethrown here (the first one).
  void run(const std::function<void(int, int)>& fn);
  // Splits [0, n) into chunks of `grain` items taken dynamically by the workers: fn(begin, end).
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);
  // Same, but runs inline when `work` (any cost unit, e.g. multiply-adds) is below `min_work`:
  // dispatch costs microseconds, a few thousand operations do not pay for it.
  void parallel_for(int64_t n, int64_t grain, double work, double min_work,
                    const std::function<void(int64_t, int64_t)>& fn) {
    if (work < min_work) fn(0, n);
    else parallel_for(n, grain, fn);
  }

 private:
  void worker_loop(int w);
  void publish(const std::function<void(int, int)>* job);

  int n_ = 1;
  std::vector<std::thread> threads_;
  std::mutex run_mu_;
  const std::function<void(int, int)>* job_ = nullptr;
  std::atomic<uint32_t> generation_{0};     // bumped per job (wakes workers)
  std::atomic<uint32_t> open_{0};           // generation of the job still accepting workers (0: none)
  std::atomic<int> active_{0};              // workers inside the current job
  std::atomic<bool> stop_{false};
  std::mutex err_mu_;
  std::exception_ptr error_;
};

}  // namespace mere
