// FastCpuBackend: dispatches each Backend op to the AVX2 or portable kernels (kernels.h) and owns
// the thread pool. Embedding rows are dequantised with the reference formula (Matrix::row_f32), so
// embeddings match the reference bitwise. prepare() moves each weight matrix out of the 4 KiB-page
// file mapping into transparent-huge-page memory (decode streams every weight once per token; in a
// VM each 4 KiB page costs a nested page walk) and drops the file pages behind it, so the resident
// size stays that of the checkpoint.
#include "backend/cpu/fast/fast_backend.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"

namespace mere {

namespace fast {

Isa detect_isa() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
    return Isa::Avx2;
#endif
  return Isa::Generic;
}

const char* isa_name(Isa isa) { return isa == Isa::Avx2 ? "avx2" : "generic"; }

}  // namespace fast

namespace {

constexpr size_t kHugePage = size_t{2} << 20, kChunk = size_t{64} << 20, kPage = 4096;

// Whether copying into madvise(MADV_HUGEPAGE) memory gets huge pages here (THP "always" or
// "madvise"); MERE_CPU_HUGEPAGES=0 turns the copy off.
bool huge_pages_available() {
  if (const char* e = std::getenv("MERE_CPU_HUGEPAGES")) return std::atoi(e) != 0;
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string s;
  std::getline(f, s);
  return s.find("[always]") != std::string::npos || s.find("[madvise]") != std::string::npos;
}

size_t mem_available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  size_t kb = 0;
  while (f >> key >> kb) {
    if (key == "MemAvailable:") return kb * 1024;
    f.ignore(256, '\n');
  }
  return 0;
}

// Bump allocator over 2 MiB-aligned anonymous mappings advised as huge pages.
class HugeArena {
 public:
  HugeArena() = default;
  HugeArena(const HugeArena&) = delete;
  HugeArena& operator=(const HugeArena&) = delete;
  ~HugeArena() {
    for (auto& [p, n] : maps_) ::munmap(p, n);
  }
  size_t used() const { return used_; }

  void* alloc(size_t n) {
    const size_t n64 = (n + 63) / 64 * 64;
    if (n64 > left_) {
      const size_t sz = std::max(kChunk, (n64 + kHugePage - 1) / kHugePage * kHugePage);
      void* raw = ::mmap(nullptr, sz + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (raw == MAP_FAILED) return nullptr;
      maps_.push_back({raw, sz + kHugePage});
      auto a = (reinterpret_cast<uintptr_t>(raw) + kHugePage - 1) / kHugePage * kHugePage;
      cur_ = reinterpret_cast<uint8_t*>(a);
      left_ = sz;
      ::madvise(cur_, sz, MADV_HUGEPAGE);
    }
    void* p = cur_;
    cur_ += n64;
    left_ -= n64;
    used_ += n64;
    return p;
  }

 private:
  std::vector<std::pair<void*, size_t>> maps_;
  uint8_t* cur_ = nullptr;
  size_t left_ = 0, used_ = 0;
};

// MERE_CPU_PROFILE=1: wall time per op kind, printed to stderr when the backend is destroyed.
struct OpProfile {
  bool on = [] {
    const char* e = std::getenv("MERE_CPU_PROFILE");
    return e && std::atoi(e) != 0;
  }();
  double sec[4] = {0, 0, 0, 0};
  int64_t calls[4] = {0, 0, 0, 0}, rows[4] = {0, 0, 0, 0};
  static constexpr const char* kNames[4] = {"linear", "embed", "gated_delta", "attention"};
  ~OpProfile() {
    if (!on) return;
    for (int i = 0; i < 4; ++i)
      std::fprintf(stderr, "[cpu profile] %-12s %10.3f s %9lld calls %11lld rows\n", kNames[i], sec[i],
                   static_cast<long long>(calls[i]), static_cast<long long>(rows[i]));
  }
};

class ScopedOp {
 public:
  ScopedOp(OpProfile& p, int kind, int64_t rows) : p_(p), kind_(kind) {
    if (p_.on) {
      t0_ = std::chrono::steady_clock::now();
      p_.calls[kind] += 1;
      p_.rows[kind] += rows;
    }
  }
  ~ScopedOp() {
    if (p_.on) p_.sec[kind_] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }

 private:
  OpProfile& p_;
  int kind_;
  std::chrono::steady_clock::time_point t0_;
};

class FastCpuBackend final : public Backend {
 public:
  explicit FastCpuBackend(const FastCpuOptions& o)
      : isa_(o.force_generic ? fast::Isa::Generic : fast::detect_isa()), pool_(o.threads), huge_(huge_pages_available()),
        budget_(mem_available_bytes() / 2) {}

  std::string name() const override { return cat("cpu (", fast::isa_name(isa_), ", ", pool_.size(), " threads)"); }

  void prepare(Matrix& W) override {
    if (!huge_ || W.empty() || W.owner) return;  // owner: storage the loader built, not the file mapping
    const size_t data = W.quantized() ? static_cast<size_t>(W.rows * (W.cols * W.bits / 32)) * 4
                                      : static_cast<size_t>(W.rows * W.cols) * dtype_size(W.dtype);
    const size_t params = W.quantized() ? static_cast<size_t>(W.rows * (W.cols / W.group)) * dtype_size(W.scale_dtype) : 0;
    if (arena_.used() + data + 2 * params > budget_) return;  // keep big models on the page cache
    W.data = relocate(W.data, data);
    if (W.quantized()) {
      W.scales = relocate(W.scales, params);
      W.biases = relocate(W.biases, params);
    }
  }

  void linear(const Matrix& W, const float* x, int64_t T, float* y) const override {
    ScopedOp op(prof_, 0, T);
    // Prefill -> decode: hand the prefill's freed activation buffers back to the OS once, so decoding
    // runs at checkpoint + state size (glibc otherwise keeps tens of MB of freed heap resident).
    if (T == 1 && last_rows_ > 64) malloc_trim(0);
    last_rows_ = T;
    if (isa_ == fast::Isa::Avx2) fast::linear_avx2(W, x, T, y, pool_);
    else fast::linear_generic(W, x, T, y, pool_);
  }

  void embed(const Matrix& E, const int32_t* ids, int64_t T, float* out) const override {
    ScopedOp op(prof_, 1, T);
    for (int64_t t = 0; t < T; ++t) {
      MERE_CHECK(ids[t] >= 0 && ids[t] < E.rows, "embed", "token id ", ids[t], " out of range: vocabulary has ", E.rows,
                 " entries");
      E.row_f32(ids[t], out + t * E.cols);
    }
  }

  void gated_delta(float* S, const float* q, const float* k, const float* v, const float* g, const float* beta, int64_t T,
                   int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, bool chunked, int64_t chunk, float* o) const override {
    ScopedOp op(prof_, 2, T);
    MERE_CHECK(Hk > 0 && Hv % Hk == 0, "gated_delta", "value heads ", Hv, " must be a multiple of key heads ", Hk);
    const fast::GdnArgs a{S, q, k, v, g, beta, T, Hk, Hv, Dk, Dv, o};
    if (isa_ == fast::Isa::Avx2) fast::gated_delta_avx2(a, chunked, chunk, pool_);
    else fast::gated_delta_generic(a, chunked, chunk, pool_);
  }

  void attention(const float* q, const float* k, const float* v, int64_t T, int64_t first_len, int64_t nh, int64_t nkv,
                 int64_t hd, float scale, float* out) const override {
    ScopedOp op(prof_, 3, T);
    MERE_CHECK(nkv > 0 && nh % nkv == 0, "attention", "query heads ", nh, " must be a multiple of kv heads ", nkv);
    const fast::AttnArgs a{q, k, v, T, first_len, nh, nkv, hd, scale, out};
    if (isa_ == fast::Isa::Avx2) fast::attention_avx2(a, pool_);
    else fast::attention_generic(a, pool_);
  }

 private:
  // Copies [src, src + n) into the arena once (tied embeddings map to the same copy) and drops the
  // whole file pages of the source from this process (they stay in the page cache).
  const void* relocate(const void* src, size_t n) {
    if (auto it = moved_.find(src); it != moved_.end()) return it->second;
    void* dst = arena_.alloc(n);
    if (!dst) return src;
    std::memcpy(dst, src, n);
    const auto a = (reinterpret_cast<uintptr_t>(src) + kPage - 1) / kPage * kPage;
    const auto b = (reinterpret_cast<uintptr_t>(src) + n) / kPage * kPage;
    if (b > a) ::madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED);
    moved_[src] = dst;
    return dst;
  }

  fast::Isa isa_;
  mutable ThreadPool pool_;
  mutable OpProfile prof_;
  mutable int64_t last_rows_ = 0;  // rows of the previous linear call (prefill -> decode detection)
  bool huge_ = false;
  size_t budget_ = 0;
  HugeArena arena_;
  std::unordered_map<const void*, const void*> moved_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_fast_backend(const FastCpuOptions& opt) { return std::make_unique<FastCpuBackend>(opt); }

}  // namespace mere
