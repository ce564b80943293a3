// GatedDeltaNet prefill in the chunked (WY/UT) form (qwen35.md §3.5.1, chunk C = 64): the same
// recurrence, layouts and results (up to fp32 reassociation) as gdn_prefill (gdn_prefill.h):
//   per value head h (key head h / (Hv / Hk)) and token t, in order:
//   S <- e^g S;  m = S k;  d = beta (v - m);  S <- S + d k^T;  o = S q
// S: [Hv, Dv, Dk] f32 (in/out); q, k: [T, Hk, Dk] (l2-normalised, q scaled); v, o: [T, Hv, Dv];
// g, beta: [T, Hv]; Dk = Dv = 128. scratch: gdn_chunked_scratch_floats(T, Hv) floats of device
// memory owned by the caller (no allocation here); o and scratch must not alias the inputs; every
// pointer 16-byte aligned.
//
// Math, per head and chunk (rows r = 0..63 are tokens t0 + r; a tail chunk of n < 64 tokens is padded
// with k = q = v = 0, beta = g = 0, so Γ_last = Γ_63 = Γ_{n-1} and the padded rows contribute 0):
//   Γ_r = Σ_{s<=r} g_s;  A[r,s] = β_r (k_r·k_s) e^{Γ_r-Γ_s} (s < r);  M[r,s] = (q_r·k_s) e^{Γ_r-Γ_s} (s <= r)
//   U = (I+A)^{-1} (β ⊙ V),  W = (I+A)^{-1} (β e^Γ ⊙ K)              (forward substitution)
//   with the incoming state S (rows i, columns j):  Vnew = U - W S^T,
//   O = e^Γ ⊙ (Q S^T) + M Vnew = M U + (e^Γ ⊙ Q - M W) S^T,
//   S <- e^{Γ_last} S + Σ_r Vnew[r]^T (k_r e^{Γ_last-Γ_r}).
// Two kernels:
//  1. gdn_chunk_prep (grid Hv x nchunks, 256 threads, fully parallel): stages k, q of the chunk
//     transposed in shared memory, the lower 4x4 tiles of K K^T and Q K^T (136 of 256 tiles), A and M,
//     then one thread a column of the 256 right-hand sides (128 of β v, 128 of β e^Γ k) solves the
//     unit-lower-triangular system by right-looking forward substitution in 64 registers and
//     multiplies the solution by M. It writes X = [-W ; e^Γ Q - M W] ([128][128]), B = [U ; M U]
//     ([128][128]) and Γ ([64]) to the scratch. Then Vnew = B[0:64] + X[0:64] S^T and
//     O = B[64:128] + X[64:128] S^T: ONE product with S gives both.
//  2. gdn_chunk_state (grid Hv x 4, 256 threads, sequential over chunks): a block owns 32 value rows
//     i of one head's S (in shared memory for all chunks) and per chunk computes
//     Y = B + X S^T ([128 x 32], 4x4 register tiles, X streamed in 4 column slices of 32), writes the
//     O half to o and the Vnew half (scaled by e^{Γ_last-Γ_r}) to shared memory, then
//     S <- e^{Γ_last} S + Vnew'^T K (K streamed in 2 slices of 32 tokens). Tiles stream through a
//     3-slot cp.async ring (18 KB a slot); shared memory 101 KB, 2 blocks an SM.
// Cost model (27B: Hv 48, T 512 = 8 chunks; fp32 SIMT, 4 warp-FMA issues/clk/SM at 1.98 GHz, 132 SMs):
//  prep: per (head, chunk) ~54k warp FMA instructions (Gram 20k on the 136 lower tiles, solve 16k,
//    M products 17k); 384 blocks -> 20.7M issues / (132 x 4) = 39k clk = 20 us at full rate, ~33 us
//    at 60%. It writes 128 KB a (head, chunk): 49 MB of scratch (mostly L2-resident).
//  state: the same 6 Hv D^2 flops a token as the recurrent form (2.4 GFLOP), but as register-tiled
//    GEMMs with no per-token latency chain: 8 warps x 3072 FMA a block a chunk. 192 blocks on 132
//    SMs: the busiest SMs run 2 blocks (2 x 8 chunks x 24.6k = 393k issues / 4 = 98k clk) -> 50 us
//    at full rate, ~66 us at 75%. Reads ~112 KB a block a chunk from L2 (X 64 KB, K 32 KB, B 16 KB):
//    172 MB in all.
//  Predicted ~100 us for 27B (gdn_prefill: 186 us on an H200) and ~55 us for 35B (Hv 32: 128 state
//  blocks, one an SM; gdn_prefill: 158 us). The 27B state phase is limited by 192 blocks on 132 SMs.
// CPU references: ops::gdn_step per token (checked against in tools/cuda/prefill_check.cu),
// ops::gdn_chunked (the same chunked math).
#pragma once
#include <cstdint>

#include "backend/cuda/device.h"

namespace mere::cuda {

// Scratch floats gdn_prefill_chunked needs for T tokens and Hv value heads:
// Hv * ceil(T / 64) * (2 * 128 * 128 + 64).
int64_t gdn_chunked_scratch_floats(int64_t T, int64_t Hv);

void gdn_prefill_chunked(CudaDevice& dev, float* S, const float* q, const float* k, const float* v, const float* g,
                         const float* beta, int64_t T, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, float* scratch,
                         float* o);

}  // namespace mere::cuda
