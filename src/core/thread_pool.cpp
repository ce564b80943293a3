// ThreadPool: generation-counter fork-join with spin-then-futex waiting (see thread_pool.h), and
// the physical-core count read from /sys topology (unique (package, core) pairs within the
// process's CPU affinity mask).
#include "core/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <utility>

namespace mere {

namespace {

std::atomic<int> g_default_threads{0};

int read_int(const std::string& path) {
  std::ifstream f(path);
  int v = -1;
  if (f) f >> v;
  return v;
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

constexpr int kSpin = 4000;  // pause iterations (tens of microseconds) before sleeping

}  // namespace

int physical_core_count() {
  static const int n = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    int allowed = 0;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) allowed = CPU_COUNT(&set);
    std::set<std::pair<int, int>> cores;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (allowed > 0 && !CPU_ISSET(cpu, &set)) continue;
      const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
      int core = read_int(base + "core_id");
      if (core < 0) {
        if (allowed == 0) break;
        continue;
      }
      cores.insert({read_int(base + "physical_package_id"), core});
    }
    int count = static_cast<int>(cores.size());
    if (count <= 0) count = allowed > 0 ? allowed : static_cast<int>(std::thread::hardware_concurrency());
    return count > 0 ? count : 1;
  }();
  return n;
}

void set_default_threads(int n) { g_default_threads.store(n); }
int default_threads() {
  int n = g_default_threads.load();
  return n > 0 ? n : physical_core_count();
}

ThreadPool::ThreadPool(int threads) : n_(threads > 0 ? threads : default_threads()) {
  for (int w = 1; w < n_; ++w) threads_.emplace_back([this, w] { worker_loop(w); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::worker_loop(int w) {
  uint32_t seen = 0;
  while (true) {
    uint32_t g = generation_.load(std::memory_order_acquire);
    for (int i = 0; g == seen && i < kSpin; ++i) {
      cpu_relax();
      g = generation_.load(std::memory_order_acquire);
    }
    while (g == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      g = generation_.load(std::memory_order_acquire);
    }
    seen = g;
    if (stop_.load()) return;
    try {
      (*job_)(w, n_);
    } catch (...) {
      std::lock_guard<std::mutex> lk(err_mu_);
      if (!error_) error_ = std::current_exception();
    }
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  if (n_ == 1) {
    fn(0, 1);
    return;
  }
  std::lock_guard<std::mutex> lk(run_mu_);
  job_ = &fn;
  error_ = nullptr;
  pending_.store(n_ - 1, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  std::exception_ptr mine;
  try {
    fn(0, n_);
  } catch (...) {
    mine = std::current_exception();
  }
  int p = pending_.load(std::memory_order_acquire);
  for (int i = 0; p != 0 && i < kSpin; ++i) {
    cpu_relax();
    p = pending_.load(std::memory_order_acquire);
  }
  while (p != 0) {
    pending_.wait(p, std::memory_order_acquire);
    p = pending_.load(std::memory_order_acquire);
  }
  job_ = nullptr;
  if (mine) std::rethrow_exception(mine);
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (n_ == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  std::atomic<int64_t> next{0};
  run([&](int, int) {
    while (true) {
      int64_t b = next.fetch_add(grain, std::memory_order_relaxed);
      if (b >= n) return;
      fn(b, std::min(n, b + grain));
    }
  });
}

}  // namespace mere
