// Decode attention on the device: one query row over a long KV cache, GQA, fp32 softmax.
//   out[h] = sum_j softmax_j(scale * q[h] . k[j, h/G]) v[j, h/G],   G = nh / nkv, j < len
// q, out: [nh, 256] f32; k, v: [len, nkv, 256] f32 or bf16. Split-K (flash-decoding): a block per
// (kv head, span of positions) writes an unnormalised partial (max, sum, o); a second kernel merges
// the spans in order. The span depends only on len, nkv, G and the SM count, never on other rows.
// CPU reference: ops::attention (src/backend/cpu/ref_ops.cpp) on the same (bf16-widened) values.
#pragma once
#include <cstdint>

#include "backend/cuda/device.h"

namespace mere::cuda {

enum class KvType { F32, BF16 };

// Floats of workspace attention_decode needs (the per-span partials).
int64_t attention_decode_workspace_floats(const CudaDevice& dev, int64_t len, int64_t nh, int64_t nkv);

// head_dim must be 256; nh / nkv in {1, 2, 4, 6, 8, 16}.
void attention_decode(CudaDevice& dev, const float* q, const void* k, const void* v, KvType kv, int64_t len, int64_t nh,
                      int64_t nkv, int64_t hd, float scale, float* ws, float* out);

}  // namespace mere::cuda
