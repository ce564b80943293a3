// GatedDeltaNet recurrent decode on the device, T tokens in order (T = 1: one decode step), for
// Hv value heads; value head h reads key head h / (Hv / Hk). Per head and token:
//   S <- e^g S;  m = S k;  d = beta (v - m);  S <- S + d k^T;  o = S q
// S: [Hv, Dv, Dk] f32 (in/out); q, k: [T, Hk, Dk] (l2-normalised, q scaled); v, o: [T, Hv, Dv];
// g, beta: [T, Hv]. Dk = Dv = 128 (every Qwen3.5 size) or 64 (the bundled tiny models). A warp (half a
// warp at 64) owns one row of S for all T tokens, so token t's result is bitwise the t-th of T
// single-token calls.
// CPU reference: ops::gdn_step applied per head and token (src/backend/cpu/ref_ops.cpp).
#pragma once
#include <cstdint>

#include "backend/cuda/device.h"
#include "backend/cuda/l2_ahead.h"

namespace mere::cuda {

bool gdn_decode_supported(int64_t Dk, int64_t Dv);
// ahead (may be null): a later launch's weights, asked of the L2 by every block after its own S loads
// (l2_ahead.h; the engine's MERE_CUDA_L2_AHEAD: the layer's out_proj). MERE_CUDA_GDN_STATE=early: the S rows
// are loaded before the PDL wait (launch.cuh gdn_state_early). Neither changes a value.
void gdn_decode(CudaDevice& dev, float* S, const float* q, const float* k, const float* v, const float* g,
                const float* beta, int64_t T, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, float* o,
                const L2Ahead* ahead = nullptr);

}  // namespace mere::cuda
