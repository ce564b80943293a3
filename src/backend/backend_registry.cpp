// Backend selection by name: "ref" is the CPU reference (ops.h), "cpu" the fast CPU backend
// (AVX2/FMA when the CPU has it, portable kernels otherwise; default_threads() workers).
#include "backend/backend.h"
#include "backend/cpu/fast/fast_backend.h"
#include "core/error.h"

namespace mere {

#ifdef MERE_HAVE_CUDA
namespace {
// The reference ops under another name: the CUDA model's Backend (the engine does the real work).
class NamedBackend final : public Backend {
 public:
  NamedBackend(std::string name, std::unique_ptr<Backend> inner) : name_(std::move(name)), inner_(std::move(inner)) {}
  std::string name() const override { return name_; }
  void linear(const Matrix& W, const float* x, int64_t T, float* y) const override { inner_->linear(W, x, T, y); }
  void embed(const Matrix& E, const int32_t* ids, int64_t T, float* out) const override { inner_->embed(E, ids, T, out); }
  void gated_delta(float* S, const float* q, const float* k, const float* v, const float* g, const float* beta,
                   int64_t T, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, bool chunked, int64_t chunk,
                   float* o) const override {
    inner_->gated_delta(S, q, k, v, g, beta, T, Hk, Hv, Dk, Dv, chunked, chunk, o);
  }
  void attention(const float* q, const float* k, const float* v, int64_t T, int64_t first_len, int64_t nh,
                 int64_t nkv, int64_t hd, float scale, float* out) const override {
    inner_->attention(q, k, v, T, first_len, nh, nkv, hd, scale, out);
  }

 private:
  std::string name_;
  std::unique_ptr<Backend> inner_;
};
std::unique_ptr<Backend> make_named_reference_backend(const std::string& name) {
  return std::make_unique<NamedBackend>(name, make_cpu_reference_backend());
}
}  // namespace
#endif

std::unique_ptr<Backend> make_backend(const std::string& name) {
  if (name == "ref") return make_cpu_reference_backend();
  if (name == "cpu" || name.empty()) return make_cpu_fast_backend();
#ifdef MERE_HAVE_CUDA
  // The CUDA engine (model/device_engine.h) runs the whole forward; this backend only names it and
  // serves the host-side calls that never reach it (the reference ops).
  if (name == "cuda") return make_named_reference_backend("cuda");
#else
  if (name == "cuda")
    fail("backend", "backend \"cuda\" is not available: this binary was built without CUDA (build with "
                    "scripts/build-cuda.sh or -DMERE_CUDA=ON)");
#endif
  fail("backend", cat("unknown backend \"", name, "\": expected ref, cpu or cuda"));
}

}  // namespace mere
