// GatedDeltaNet over a whole prompt on the device (prefill): the same recurrence and layouts as
// gdn_decode (gdn.h), written for T in the hundreds to thousands.
//   per value head h (key head h / (Hv / Hk)) and token t, in order:
//   S <- e^g S;  m = S k;  d = beta (v - m);  S <- S + d k^T;  o = S q
// S: [Hv, Dv, Dk] f32 (in/out); q, k: [T, Hk, Dk] (l2-normalised, q scaled); v, o: [T, Hv, Dv];
// g, beta: [T, Hv]. Dk = Dv = 128 (every Qwen3.5 size).
// Recurrent form, not the chunked (WY) one: the rows of S are independent, so a block takes 16 rows
// of one head (8 lanes a row, 16 state values a lane, kept in registers for all T tokens) and
// walks the tokens with q/k/v/g/beta staged through shared memory 32 tokens at a time (cp.async,
// double-buffered). Work is 6 flops a state element a token (27B: 48 heads x 128 x 128 x 512 tokens
// = 2.4 GFLOP a layer), issue-bound on the fp32 pipe, ~Hv*8 blocks in flight.
// CPU reference: ops::gdn_step per head and token (and ops::gdn_chunked agrees with it).
#pragma once
#include <cstdint>

#include "backend/cuda/device.h"

namespace mere::cuda {

void gdn_prefill(CudaDevice& dev, float* S, const float* q, const float* k, const float* v, const float* g,
                 const float* beta, int64_t T, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, float* o);

// The same recurrence and arguments with the state held as S = c R (c a scalar a head, folded into R
// below 2^-60): a token costs three FMA passes over the state instead of four, its two dot products
// (R k, R q) reduce together (o = c' R q + d (k.q)), and a warp's lanes each hold 4 columns of
// rows_per_warp (4 or 8) rows, so k and q are read once a warp. Equal to gdn_prefill up to fp32
// reassociation (session 19; MERE_CUDA_GDN_PREFILL=lazy, gdn_prefill.cu v3). Measured no faster than
// gdn_prefill (4 rows a warp: equal at 27B, -1% at 35B-A3B; 8 rows: +24% / +16%), so opt-in.
void gdn_prefill_lazy(CudaDevice& dev, float* S, const float* q, const float* k, const float* v, const float* g,
                      const float* beta, int64_t T, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, float* o,
                      int rows_per_warp = 4);

// The same recurrence with 4 tokens an exchange (gdn_prefill_c4.cu has the math): the dot products of
// 4 consecutive tokens against the state at their block's start are reduced together, then a 4 x 4
// triangular recurrence a row gives their d from the tokens' Gram entries (k_i.k_j, k_i.q_j: one small
// kernel a call, into `scratch`, gdn_c4_scratch_floats(T, Hk) floats owned by the caller). Equal to
// gdn_prefill up to fp32 reassociation (session 19; MERE_CUDA_GDN_PREFILL=c4).
int64_t gdn_c4_scratch_floats(int64_t T, int64_t Hk);
// The first step of gdn_prefill_c4 and gdn_prefill_tc: checks their arguments (errors name `who`) and
// launches the Gram entries' kernel into scratch [(T + 3) / 4, Hk, 16].
void gdn_c4_prepare(CudaDevice& dev, const char* who, const float* q, const float* k, int64_t T, int64_t Hk, int64_t Hv,
                    int64_t Dk, int64_t Dv, float* scratch);
void gdn_prefill_c4(CudaDevice& dev, float* S, const float* q, const float* k, const float* v, const float* g,
                    const float* beta, int64_t T, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, float* scratch,
                    float* o);

// gdn_prefill_c4's math and scratch with the 4-token blocks' products on the tensor cores: `warps`
// warps share 16 rows of S (the mma's M), each a slice of the columns, and the dot products
// R [k_0..3 q_0..3] and the update R += F K^T run as 3xTF32 mma.sync (m16n8k8 and m16n8k4: hi/lo tf32
// halves, the lo x lo product dropped), so each product keeps ~20 of fp32's 24 bits. Equal to
// gdn_prefill up to that and fp32 reassociation (session 20; MERE_CUDA_GDN_PREFILL=tc). warps: 1, 2
// or 4; 0 = MERE_CUDA_GDN_TC_WARPS, else 1 where the value heads give more than 2 blocks of 16 rows an
// SM, 4 elsewhere.
void gdn_prefill_tc(CudaDevice& dev, float* S, const float* q, const float* k, const float* v, const float* g,
                    const float* beta, int64_t T, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, float* scratch,
                    float* o, int warps = 0);

}  // namespace mere::cuda
