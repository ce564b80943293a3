// The CPU reference backend: ops.h loops, single-threaded.
#include <algorithm>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "ops/ops.h"

namespace mere {
namespace {

class CpuReferenceBackend final : public Backend {
 public:
  std::string name() const override { return "ref"; }
  void linear(const Matrix& W, const float* x, int64_t T, float* y) const override { ops::linear(W, x, T, y); }
  void embed(const Matrix& E, const int32_t* ids, int64_t T, float* out) const override { ops::embed(E, ids, T, out); }

  void gated_delta(float* S, const float* q, const float* k, const float* v, const float* g, const float* beta, int64_t T,
                   int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, bool chunked, int64_t chunk, float* o) const override {
    const int64_t ratio = Hv / Hk;
    std::vector<float> qh(static_cast<size_t>(T * Dk)), kh(static_cast<size_t>(T * Dk)), vh(static_cast<size_t>(T * Dv)),
        gh(static_cast<size_t>(T)), bh(static_cast<size_t>(T)), oh(static_cast<size_t>(T * Dv));
    for (int64_t h = 0; h < Hv; ++h) {
      const int64_t kh_idx = h / ratio;
      for (int64_t t = 0; t < T; ++t) {
        std::copy_n(q + (t * Hk + kh_idx) * Dk, Dk, qh.data() + t * Dk);
        std::copy_n(k + (t * Hk + kh_idx) * Dk, Dk, kh.data() + t * Dk);
        std::copy_n(v + (t * Hv + h) * Dv, Dv, vh.data() + t * Dv);
        gh[static_cast<size_t>(t)] = g[t * Hv + h];
        bh[static_cast<size_t>(t)] = beta[t * Hv + h];
      }
      float* Sh = S + h * Dv * Dk;
      if (chunked) {
        ops::gdn_chunked(Sh, qh.data(), kh.data(), vh.data(), gh.data(), bh.data(), T, Dk, Dv, chunk, oh.data());
      } else {
        for (int64_t t = 0; t < T; ++t)
          ops::gdn_step(Sh, qh.data() + t * Dk, kh.data() + t * Dk, vh.data() + t * Dv, gh[static_cast<size_t>(t)],
                        bh[static_cast<size_t>(t)], Dk, Dv, oh.data() + t * Dv);
      }
      for (int64_t t = 0; t < T; ++t) std::copy_n(oh.data() + t * Dv, Dv, o + (t * Hv + h) * Dv);
    }
  }

  void attention(const float* q, const float* k, const float* v, int64_t T, int64_t first_len, int64_t nh, int64_t nkv,
                 int64_t hd, float scale, float* out) const override {
    for (int64_t t = 0; t < T; ++t)
      ops::attention(q + t * nh * hd, k, v, first_len + t, nh, nkv, hd, scale, out + t * nh * hd);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_reference_backend() { return std::make_unique<CpuReferenceBackend>(); }

}  // namespace mere
