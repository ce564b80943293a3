// Internal to qmatvec.cu: the 4-bit integer-product matvec (IDP4A on exact base-256 digits of x),
// the 4-bit default (contract: qmatvec.h "4-bit, integer"; design and measurements:
// docs/cuda-kernels.md §1 "v6").
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "backend/cuda/qmatvec.h"

namespace mere::cuda::detail {

// cfg.rows_per_warp of the integer kernel that lets each launch pick R (2, 3 or 4 rows a batch, one
// chunk in flight) by how well its rows fill the batches.
inline constexpr int kIntFitRows = -1;
// cfg.integer of the cp.async-pipelined implementation (qmatvec_int_pipe.cu; rows_per_warp rows a
// batch, `stages` iterations in flight); 1 = the register kernel. Same contract, same bits.
inline constexpr int kIntPipelined = 2;
// cfg.stages of the register kernel (cfg.integer 1, cfg.unroll 1) that selects its double-buffered
// form (qmatvec_int_kernel with DB: two chunks of each row in flight; T = 1, rows_per_warp 2, 4 or 8;
// the tuner's "R<R>DB" shapes). Same contract, same bits.
inline constexpr int kIntDoubleBuffer = 2;
// cfg.integer of the tensor-core implementation (qmatvec_imma.cu; rows_per_warp 16 = one tile a warp,
// `stages` ring depth, 0: chosen per launch); T = 1..4, other T run on the register kernel.
inline constexpr int kIntMma = 3;
// cfg.integer of the group-integer tensor-core kernel (qmatvec_gmma.cu; its own contract, qmatvec.h
// "4-bit, group integer"): rows_per_warp 16 (a tile a warp), `stages` = groups in flight (4, 6, 8;
// 0: by T). Not bitwise the integer kernels: one kernel for every T.
inline constexpr int kGroupMma = 4;
// Which implementation a default 4-bit shape uses (GroupMma: the group-integer contract).
enum class IntImpl { Register, Pipelined, Mma, GroupMma };

// Whether an integer-kernel shape (cfg.rows_per_warp rows a batch, cfg.unroll chunks in flight) is
// compiled for T.
bool q4int_available(int64_t T, const QMatvecConfig& cfg);
// The default integer shape for T with that implementation.
QMatvecConfig q4int_default(int64_t T, IntImpl impl);
// y = W x (or y += W x) for up to kMaxMultiMatrices matrices of the same width over one prepared
// workspace `ws` (the whole workspace, qmatvec_prep.cuh), in one launch on `s`. The rows of all
// matrices are spread evenly over a grid of resident warps (at most one wave, so no tail wave).
void q4int_launch(cudaStream_t s, const QMatvecOut* outs, int n, const float* ws, int64_t T, int64_t cols,
                  const QMatvecConfig& cfg, int sms);
// The one-token launch that computes its input (qmatvec.h qmatvec_src_multi): the register kernel of
// cfg's shape (else the default register shape), each block computing the input and its integer
// layout into shared memory (q4int_src_smem bytes; cols % 64 == 0, cols <= kSrcMaxCols, at most
// kSrcMaxHeads heads).
inline constexpr int64_t kSrcMaxCols = 8192;
inline constexpr int kSrcMaxHeads = 64;
size_t q4int_src_smem(int64_t cols);
void q4int_src_launch(cudaStream_t s, const QMatvecOut* outs, int n, const QMatvecSource& in, int64_t cols,
                      const QMatvecConfig& cfg, int sms);
// MERE_CUDA_MV_PREFETCH=MB (default 16; 0 turns it off; integer 0..64, else mere::Error): bytes of
// weight codes the register kernel's warps ask the L2 for before the PDL wait, over the whole launch
// (each warp the start of its first rows; docs/cuda-kernels.md §1 "v10"; H100: +0.5-0.8% decode).
// Read once per process.
int64_t q4int_prefetch_bytes();
// MERE_CUDA_MV_SMALL=R,U (default 2,1; 4,1 = the general T = 1 shape): the default integer shape
// (qmatvec's default_config; explicit configs are kept) of T = 1 launches of at most kSmallRows
// rows in all (the 27B's out_proj and down, 5,120 rows, where 4-row batches leave ~10 warps an SM;
// H100: 27B decode 121.3 -> 124.6 tok/s, 35B-A3B 375 -> 380.5); a shape that is not compiled is a
// mere::Error. Same contract and bits whatever the shape. Read once per process.
inline constexpr int64_t kSmallRows = 8192;
std::pair<int, int> q4int_small_shape();

// The pipelined implementation (qmatvec_int_pipe.cu): whether a shape is compiled for T; whether
// the matrices allow it (cols % 128 == 0, 16-byte aligned codes, 4-byte aligned scales and biases);
// the launch (arguments as q4int_launch built them).
bool q4pipe_available(int64_t T, const QMatvecConfig& cfg);
bool q4pipe_supported(const QMatvecOut* outs, int n, int64_t cols);
namespace qi { struct IntArgs; }
// The tensor-core implementation (qmatvec_imma.cu): compiled for (T, cfg)?; the matrices allow it
// (16-byte aligned codes)?; the ring depth it picks for a launch of `tiles` 16-row tiles; the launch.
bool q4imma_available(int64_t T, const QMatvecConfig& cfg);
bool q4imma_supported(const QMatvecOut* outs, int n);
int q4imma_stages(int64_t tiles);
void q4imma_launch(cudaStream_t s, const QMatvecOut* outs, int n, const float* ws, int64_t T, int64_t cols,
                   const QMatvecConfig& cfg);
// The group-integer tensor-core kernel (qmatvec_gmma.cu): compiled for (T, cfg)?; the K-split count
// of a matrix (a function of its shape and the SM count only, never of T); the ring depth used for
// (T, cfg); the launch (8-byte aligned codes, else mere::Error).
bool q4gm_available(int64_t T, const QMatvecConfig& cfg);
int q4gm_splits(int64_t rows, int64_t cols, int sms);
int q4gm_ring(int64_t T, const QMatvecConfig& cfg);
// MERE_CUDA_GM=width|ring|ring2|ring4|db|db4: the group-integer kernel's shape: (width, the default
// since session 28) each width T its own shape from a table measured per width (docs/cuda-kernels.md
// §1 "v14"), or one shape for every width: the weights in flight as a ring or as two batches, with
// 1 (ring) / 2 (db) or the named number of groups a step.
// Every shape gives the same bits (the group-integer contract), so widths may differ in shape. Read
// once per process; anything else throws.
struct GmShape {
  bool db;         // two batches instead of a ring
  int groups;      // groups a step (0: the variant's default)
  int stages = 0;  // ring depth or batch size (0: by T, q4gm_ring)
};
GmShape q4gm_shape(int64_t T);
void q4gm_launch(cudaStream_t s, const QMatvecOut* outs, int n, const float* ws, int64_t T, int64_t cols,
                 const QMatvecConfig& cfg, int sms);
void q4pipe_launch(cudaStream_t s, const qi::IntArgs& args, const float* ws, int64_t T, int64_t cols,
                   const QMatvecConfig& cfg, int sms);

}  // namespace mere::cuda::detail
