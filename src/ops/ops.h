// The op contract of the Qwen3.5 forward pass, one line of math per function. This is the CPU
// reference (plain loops, fp32 accumulation); fast CPU and CUDA kernels are tested against it.
// Row results never depend on how many rows a call holds (batch-width invariance, mtp.md §6).
#pragma once
#include <cstdint>

#include "model/matrix.h"

namespace mere::ops {

inline float silu(float x) { return x / (1.0f + __builtin_expf(-x)); }
inline float sigmoid(float x) { return 1.0f / (1.0f + __builtin_expf(-x)); }
float softplus(float x);  // log(1 + e^x), x > 20 -> x (torch threshold)

// y[t] = x[t] * rsqrt(mean(x[t]^2) + eps) * w        x, y: [T, n]; w: [n] (1+w already folded)
void rms_norm(const float* x, const float* w, int64_t T, int64_t n, float eps, float* y);

// y = w * (x * rsqrt(mean(x^2) + eps)) * silu(z)      x, z, y: [n]; w: [n] (plain weight)
void gated_rms_norm(const float* x, const float* z, const float* w, int64_t n, float eps, float* y);

// y[t] = W x[t]                                      W: [rows, cols]; x: [T, cols]; y: [T, rows]
void linear(const Matrix& W, const float* x, int64_t T, float* y);

// out[t] = E[ids[t]]                                 E: [V, H]; out: [T, H]; ids checked < V
void embed(const Matrix& E, const int32_t* ids, int64_t T, float* out);

// Rotate-half RoPE on the first `rotary_dim` dims of each head, at position `pos`.
// x: [heads, hd], pairs (i, i + rotary_dim/2), inv_freq[i] = theta^(-2i/rotary_dim)
void rope(float* x, int64_t heads, int64_t hd, int64_t rotary_dim, int64_t pos, double theta);

// Causal GQA attention for one query row over `len` cached keys, softmax in fp32.
// q: [nh, hd]; k, v: [len, nkv, hd]; out: [nh, hd]; query head h uses kv head h / (nh/nkv)
void attention(const float* q, const float* k, const float* v, int64_t len, int64_t nh, int64_t nkv, int64_t hd,
               float scale, float* out);

// x <- x * rsqrt(sum(x^2) + eps)                     x: [n]
void l2_normalize(float* x, int64_t n, float eps);

// Depthwise causal conv + SiLU for one token; shifts the raw input into the history.
// state: [K-1, C] raw inputs (oldest first); w: [C, K] (w[., K-1] hits the current token);
// x: [C] raw input; y: [C] = silu(sum_j w[c, j] * window[j][c])
void conv_step(float* state, const float* w, const float* x, int64_t C, int64_t K, float* y);

// One GatedDeltaNet recurrence step for one value head; S: [Dv, Dk] f32 state.
// S <- e^g S; m = S k; d = beta (v - m); S <- S + d k^T; o = S q   (q, k: [Dk]; v, o: [Dv])
void gdn_step(float* S, const float* q, const float* k, const float* v, float g, float beta, int64_t Dk, int64_t Dv,
              float* o);

// Chunked (WY/UT) form of the same recurrence over T tokens for one value head, chunk size C
// (qwen35.md §3.5.1). q, k: [T, Dk] (already l2-normalised and q scaled); v, o: [T, Dv];
// g, beta: [T]; S: [Dv, Dk] in/out. Agrees with T gdn_step calls up to rounding.
void gdn_chunked(float* S, const float* q, const float* k, const float* v, const float* g, const float* beta, int64_t T,
                 int64_t Dk, int64_t Dv, int64_t chunk, float* o);

}  // namespace mere::ops
