// Causal GQA attention for a block of T new query rows over the KV cache (prefill), fp32 softmax.
//   out[t, h] = sum_{j <= pos0 + t} softmax_j(scale * q[t, h] . k[j, h/G]) v[j, h/G],   G = nh / nkv
// q, out: [T, nh, 256] f32; k, v: [len, nkv, 256] f32 or bf16 (len >= pos0 + T: the T new keys are
// already in the cache at positions pos0 .. pos0+T-1). Flash-style, one pass: a block takes one kv
// head and 8 consecutive query positions for all G heads of the group (a warp a head), walks the
// keys in tiles of 32 through shared memory (each K/V tile read once per block, for G x 8 rows) with
// an online softmax; blocks with the most keys are scheduled first. SIMT fp32 (no tensor cores):
// 27B, T = 512: 3.2 GFLOP a layer. Row t's result does not depend on T or on the other rows.
// CPU reference: ops::attention per query row with len = pos0 + t + 1.
#pragma once
#include <cstdint>

#include "backend/cuda/attention.h"  // KvType
#include "backend/cuda/device.h"

namespace mere::cuda {

// head_dim must be 256; nh / nkv in 1..8.
void attention_prefill(CudaDevice& dev, const float* q, const void* k, const void* v, KvType kv, int64_t T,
                       int64_t pos0, int64_t nh, int64_t nkv, int64_t hd, float scale, float* out);

// The same on the tensor cores (attention_prefill_tc.cu; session 22): the (position, head) rows of a
// kv head flattened, 16 a warp, 64 a block; tiles of 16 keys; FlashAttention-2's loop on
// mma.m16n8k16 with every fp32 operand as a bf16 hi + lo pair (three products a pair: ~2^-16
// relative per product, fp32 accumulation). Same arguments and limits as attention_prefill.
void attention_prefill_tc(CudaDevice& dev, const float* q, const void* k, const void* v, KvType kv, int64_t T,
                          int64_t pos0, int64_t nh, int64_t nkv, int64_t hd, float scale, float* out);

// Throws (naming `where`) unless the shapes are ones both kernels take.
void attention_prefill_check_args(int64_t T, int64_t pos0, int64_t nh, int64_t nkv, int64_t hd, const char* where);

}  // namespace mere::cuda
