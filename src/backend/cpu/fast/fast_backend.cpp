// FastCpuBackend: dispatches each Backend op to the AVX2 or portable kernels (kernels.h) and owns
// the thread pool. Embedding rows are dequantised with the reference formula (Matrix::row_f32), so
// embeddings match the reference bitwise.
#include "backend/cpu/fast/fast_backend.h"

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

class FastCpuBackend final : public Backend {
 public:
  explicit FastCpuBackend(const FastCpuOptions& o)
      : isa_(o.force_generic ? fast::Isa::Generic : fast::detect_isa()), pool_(o.threads) {}

  std::string name() const override { return cat("cpu (", fast::isa_name(isa_), ", ", pool_.size(), " threads)"); }

  void linear(const Matrix& W, const float* x, int64_t T, float* y) const override {
    if (isa_ == fast::Isa::Avx2) fast::linear_avx2(W, x, T, y, pool_);
    else fast::linear_generic(W, x, T, y, pool_);
  }

  void embed(const Matrix& E, const int32_t* ids, int64_t T, float* out) const override {
    for (int64_t t = 0; t < T; ++t) {
      MERE_CHECK(ids[t] >= 0 && ids[t] < E.rows, "embed", "token id ", ids[t], " out of range: vocabulary has ", E.rows,
                 " entries");
      E.row_f32(ids[t], out + t * E.cols);
    }
  }

  void gated_delta(float* S, const float* q, const float* k, const float* v, const float* g, const float* beta, int64_t T,
                   int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, bool chunked, int64_t chunk, float* o) const override {
    MERE_CHECK(Hk > 0 && Hv % Hk == 0, "gated_delta", "value heads ", Hv, " must be a multiple of key heads ", Hk);
    const fast::GdnArgs a{S, q, k, v, g, beta, T, Hk, Hv, Dk, Dv, o};
    if (isa_ == fast::Isa::Avx2) fast::gated_delta_avx2(a, chunked, chunk, pool_);
    else fast::gated_delta_generic(a, chunked, chunk, pool_);
  }

  void attention(const float* q, const float* k, const float* v, int64_t T, int64_t first_len, int64_t nh, int64_t nkv,
                 int64_t hd, float scale, float* out) const override {
    MERE_CHECK(nkv > 0 && nh % nkv == 0, "attention", "query heads ", nh, " must be a multiple of kv heads ", nkv);
    const fast::AttnArgs a{q, k, v, T, first_len, nh, nkv, hd, scale, out};
    if (isa_ == fast::Isa::Avx2) fast::attention_avx2(a, pool_);
    else fast::attention_generic(a, pool_);
  }

 private:
  fast::Isa isa_;
  mutable ThreadPool pool_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_fast_backend(const FastCpuOptions& opt) { return std::make_unique<FastCpuBackend>(opt); }

}  // namespace mere
