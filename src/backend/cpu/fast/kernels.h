// Internal interface of the fast CPU backend: the kernels behind FastCpuBackend, each in an AVX2/FMA
// version (runtime-dispatched) and a portable one. Every kernel is batch-width invariant: a row's
// result is computed by the same instruction sequence whatever T is (fixed reduction orders, per-row
// activation quantisation), so row t of a T-row call equals that row alone, bitwise.
// Reference for all of them: ops.h (tests/ops/ compares against it).
#pragma once
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "model/matrix.h"

namespace mere::fast {

enum class Isa { Generic, Avx2 };
Isa detect_isa();  // Avx2 when the CPU has AVX2, FMA and F16C
const char* isa_name(Isa isa);

// Whether the AVX2 linear kernels serve this matrix (float, or affine 4/8-bit with 32/64/128 groups);
// other bit widths take the portable dequantise-and-dot path.
bool avx2_supports(const Matrix& W);

// y[t] = W x[t]            W: [rows, cols]; x: [T, cols] f32; y: [T, rows] f32
void linear_avx2(const Matrix& W, const float* x, int64_t T, float* y, ThreadPool& pool);
void linear_generic(const Matrix& W, const float* x, int64_t T, float* y, ThreadPool& pool);

// GatedDeltaNet over T tokens (Backend::gated_delta): recurrent token by token, or chunked (chunk C).
// S: [Hv, Dv, Dk]; q, k: [T, Hk, Dk]; v: [T, Hv, Dv]; g, beta: [T, Hv]; o: [T, Hv, Dv]
struct GdnArgs {
  float* S;
  const float *q, *k, *v, *g, *beta;
  int64_t T, Hk, Hv, Dk, Dv;
  float* o;
};
void gated_delta_avx2(const GdnArgs& a, bool chunked, int64_t chunk, ThreadPool& pool);
void gated_delta_generic(const GdnArgs& a, bool chunked, int64_t chunk, ThreadPool& pool);

// Causal GQA attention (Backend::attention). q: [T, nh, hd]; k, v: [len, nkv, hd]; out: [T, nh, hd]
struct AttnArgs {
  const float *q, *k, *v;
  int64_t T, first_len, nh, nkv, hd;
  float scale;
  float* out;
};
void attention_avx2(const AttnArgs& a, ThreadPool& pool);
void attention_generic(const AttnArgs& a, ThreadPool& pool);

}  // namespace mere::fast
