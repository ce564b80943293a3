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

// A worker joins generation g only while open_ == g; active_ is raised before that check and the
// caller closes the job (open_ = 0) before waiting for active_ == 0, so (seq_cst) the caller either
// waits for the worker or the worker never touches the job.
void ThreadPool::worker_loop(int w) {
  uint32_t seen = 0;
  while (true) {
    uint32_t g = generation_.load();
    for (int i = 0; g == seen && i < kSpin; ++i) {
      cpu_relax();
      g = generation_.load();
    }
    while (g == seen) {
      generation_.wait(seen);
      g = generation_.load();
    }
    seen = g;
    if (stop_.load()) return;
    active_.fetch_add(1);
    if (open_.load() == g) {
      try {
        (*job_)(w, n_);
      } catch (...) {
        std::lock_guard<std::mutex> lk(err_mu_);
        if (!error_) error_ = std::current_exception();
      }
    }
    if (active_.fetch_sub(1) == 1) active_.notify_all();
  }
}

void ThreadPool::publish(const std::function<void(int, int)>* job) {
  job_ = job;
  error_ = nullptr;
  const uint32_t g = generation_.load() + 1;
  open_.store(g == 0 ? 1 : g);
  generation_.store(g == 0 ? 1 : g);
  generation_.notify_all();
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  if (n_ == 1) {
    fn(0, 1);
    return;
  }
  std::lock_guard<std::mutex> lk(run_mu_);
  // every worker must run its share: count them in through a barrier on `done`
  std::atomic<int> done{0};
  const std::function<void(int, int)> counted = [&](int w, int n) {
    try {
      fn(w, n);
    } catch (...) {
      done.fetch_add(1);
      done.notify_all();
      throw;
    }
    done.fetch_add(1);
    done.notify_all();
  };
  publish(&counted);
  std::exception_ptr mine;
  try {
    fn(0, n_);
  } catch (...) {
    mine = std::current_exception();
  }
  int d = done.load();
  while (d < n_ - 1) {
    done.wait(d);
    d = done.load();
  }
  open_.store(0);
  int a = active_.load();
  while (a != 0) {
    active_.wait(a);
    a = active_.load();
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
  std::lock_guard<std::mutex> lk(run_mu_);
  std::atomic<int64_t> next{0};
  const std::function<void(int, int)> body = [&](int, int) {
    while (true) {
      const int64_t b = next.fetch_add(grain, std::memory_order_relaxed);
      if (b >= n) return;
      fn(b, std::min(n, b + grain));
    }
  };
  publish(&body);
  std::exception_ptr mine;
  try {
    body(0, n_);
  } catch (...) {
    mine = std::current_exception();
    next.store(n);  // stop handing out chunks
  }
  open_.store(0);  // late workers skip; wait only for those inside
  int a = active_.load();
  for (int i = 0; a != 0 && i < kSpin; ++i) {
    cpu_relax();
    a = active_.load();
  }
  while (a != 0) {
    active_.wait(a);
    a = active_.load();
  }
  job_ = nullptr;
  if (mine) std::rethrow_exception(mine);
  if (error_) std::rethrow_exception(error_);
}

}  // namespace mere
