// The compute backend the model's wiring calls for its heavy ops. The CPU reference backend is
// ops.h verbatim; fast backends (AVX2 CPU, CUDA) implement the same contract and are tested
// against it. Every implementation must be batch-width invariant: row t of a T-row call equals
// the same row computed alone, bitwise (mtp.md §6).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "model/matrix.h"

namespace mere {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  // Called once per weight matrix at load, before any op (never in the forward pass). A backend may
  // move the storage (e.g. into huge pages) and point W at it; W keeps its shape and format and the
  // backend owns the new storage for its lifetime. The default leaves W as it is.
  virtual void prepare(Matrix& W) { (void)W; }

  // y[t] = W x[t]                       W: [rows, cols]; x: [T, cols]; y: [T, rows]
  virtual void linear(const Matrix& W, const float* x, int64_t T, float* y) const = 0;

  // out[t] = E[ids[t]]                  E: [V, H]; out: [T, H]
  virtual void embed(const Matrix& E, const int32_t* ids, int64_t T, float* out) const = 0;

  // GatedDeltaNet over T tokens for Hv value heads (see ops::gdn_step); chunked selects the
  // chunked algorithm (prefill), otherwise the recurrence runs token by token.
  // S: [Hv, Dv, Dk]; q, k: [T, Hk, Dk] (normalised, q scaled); v: [T, Hv, Dv]; g, beta: [T, Hv];
  // o: [T, Hv, Dv]. Value head h reads key head h / (Hv / Hk).
  virtual void gated_delta(float* S, const float* q, const float* k, const float* v, const float* g, const float* beta,
                           int64_t T, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, bool chunked, int64_t chunk,
                           float* o) const = 0;

  // Causal GQA attention for T query rows; row t sees cached keys [0, first_len + t).
  // q: [T, nh, hd]; k, v: [len, nkv, hd]; out: [T, nh, hd]
  virtual void attention(const float* q, const float* k, const float* v, int64_t T, int64_t first_len, int64_t nh,
                         int64_t nkv, int64_t hd, float scale, float* out) const = 0;
};

// "ref": the CPU reference (ops.h); "cpu": the fastest CPU backend built in (falls back to
// nothing: an unknown name is an error).
std::unique_ptr<Backend> make_backend(const std::string& name);
std::unique_ptr<Backend> make_cpu_reference_backend();

}  // namespace mere
