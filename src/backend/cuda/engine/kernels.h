// The engine's small kernels (everything but the quantised dense matvec, the GDN step for 128-wide
// heads and RMSNorm, which live one directory up). Every launch goes on `s`; nothing synchronises.
// Every kernel computes each row (token) alone with a fixed order: a T-row launch gives every row
// bitwise the 1-row result (batch-width invariance, mtp.md §6). Positions come from device memory
// (`pos`: the first row's position), so a captured decode graph stays valid from step to step.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/engine/dmatrix.h"
#include "backend/cuda/l2_ahead.h"

namespace mere::cuda::k {

// out[t] = E[ids[t]] (dequantised)          ids: [T] device; out: [T, H]
void embed(cudaStream_t s, const DMat& E, const int32_t* ids, int64_t T, float* out);

// y[t*ys..] = rmsnorm(x[t*xs..]) * w        x: [T, n] row stride xs; y: row stride ys; w: [n]
void rms_norm(cudaStream_t s, const float* x, int64_t xs, const float* w, int64_t T, int64_t n, float eps, float* y,
              int64_t ys);

// x[t] += o[t]; y[t] = rmsnorm(x[t]) * w (bitwise add then rms_norm; one launch)   x, o, y: [T, n]
void add_rms_norm(cudaStream_t s, float* x, const float* o, const float* w, int64_t T, int64_t n, float eps, float* y);

// Prefill: x += add (when add is not null); y = rmsnorm(x) * w; xq = y rounded to bf16 in
// qgemm_prepare_x's layout (gemm.h), bitwise the unfused pair, in one launch. false (nothing
// launched) where the vectorised norm does not apply (alignment, n % 128): the caller runs the pair.
// x, add, y: [T, n] f32; xq: [T, n] bf16
bool rms_norm_xq(cudaStream_t s, float* x, const float* add, const float* w, int64_t T, int64_t n, float eps, float* y,
                 uint16_t* xq);

// ---- producers fused with qmatvec's prepare step (qmatvec_prep.cuh) ----
// Each writes `ws` (qmatvec_workspace_floats(T, width, bits), bits 4 or 8, width % 64 == 0) bitwise
// as its unfused kernel followed by qmatvec_prepare of its output would, in one launch.
// x += add (when add is not null); y = rmsnorm(x) * w; ws = prepare(y)      x, add, y: [T, n]
void rms_norm_prep(cudaStream_t s, float* x, const float* add, const float* w, int64_t T, int64_t n, float eps, float* y,
                   int bits, float* ws);
// ws = prepare(silu(g) * u)                       g, u: [T, n] (the product is not stored)
void swiglu_prep(cudaStream_t s, const float* g, const float* u, int64_t T, int64_t n, int bits, float* ws);
// ws = prepare(out * sigmoid(gate))               out: [T, nh, hd]; qg: [T, nh, 2, hd] (gate = qg[.., 1, ..])
void sigmoid_gate_prep(cudaStream_t s, const float* out, const float* qg, int64_t T, int64_t nh, int64_t hd, int bits,
                       float* ws);
// y = gated_rms_norm(x, z) (as below, y written); ws = prepare(y) over the width Hv*Dv; Dv % 64 == 0
void gated_rms_norm_prep(cudaStream_t s, const float* x, const float* z, const float* w, int64_t T, int64_t Hv,
                         int64_t Dv, float eps, float* y, int bits, float* ws);
// gdn_decode (gdn.h) and gated_rms_norm_prep in one launch (decode fusion; same bits as the two):
// the block finishing a head last runs its norm. done: [Hv] u32, zero before the first launch (each
// launch leaves it zero). Needs Dk = Dv = 128 (gdn_step_norm_supported), else mere::Error.
bool gdn_step_norm_supported(int64_t Hk, int64_t Dk, int64_t Hv, int64_t Dv);
void gdn_step_norm_prep(cudaStream_t s, float* S, const float* q, const float* k, const float* v, const float* g,
                        const float* beta, int64_t T, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, float* o,
                        const float* z, const float* w, float eps, float* y, int bits, float* ws, unsigned* done);

void add(cudaStream_t s, float* x, const float* y, int64_t n);        // x += y
void swiglu(cudaStream_t s, float* g, const float* u, int64_t n);     // g = silu(g) * u

// Generic matvec, warp per output: y[p, r] = W_{sel[p]}[r, :] . x[p / x_div, :] for p < P.
// sel: [P] device expert ids (null: matrix 0); x: [P / x_div, cols]; y: [P, rows]
void gemv(cudaStream_t s, const DMat& W, const float* x, int64_t P, int64_t x_div, const int32_t* sel, float* y);

// Argmax of each row of logits [rows, V] into out[rows] (lowest index on ties; NaN never wins; 0 when
// a row holds only NaN). ws.data null: one block a row (v1); else the split form (several blocks a
// row and a last-block merge; the same ids; the engine's default, MERE_CUDA_ARGMAX).
// The split form's workspace: argmax_split_floats(V, ws.rows) floats, zero before the first launch,
// shared by launches of any rows <= ws.rows: row r's ticket (leading, [ws.rows]) and partials sit at
// the same place whatever the launch's row count, and every launch leaves its tickets zero. (Session
// 26's layout put the tickets after `rows` rows of partials, so a 1-row pass's ticket was a 9-row
// pass's partial: MTP generations on CUDA went wrong from the first verification on, session 28.)
struct ArgmaxWs {
  float* data = nullptr;
  int64_t rows = 0;  // the row capacity data was sized for
};
int64_t argmax_split_floats(int64_t V, int64_t rows);
void argmax(cudaStream_t s, const float* logits, int64_t V, int32_t* out, int64_t rows = 1, const ArgmaxWs& ws = {});

// ---- GatedDeltaNet ----
// Causal depthwise conv + SiLU over T rows, shifting the raw rows into the history.
// state: [K-1, C]; w: [C, K]; raw, out: [T, C]
void conv_silu(cudaStream_t s, float* state, const float* w, const float* raw, int64_t T, int64_t C, int64_t K,
               float* out);
// From the conv output: q, k l2-normalised (q scaled by 1/sqrt(Dk)), v copied, gates; a warp per
// (row, head), its sums in the order of the former 128-thread block's (k_gdn.cu).
// mixed: [T, C]; a, b: [T, Hv]; q, k: [T, Hk, Dk]; v: [T, Hv, Dv]; g, beta: [T, Hv]
void gdn_prepare(cudaStream_t s, const float* mixed, const float* a, const float* b, const float* neg_a,
                 const float* dt_bias, int64_t T, int64_t Hk, int64_t Dk, int64_t Hv, int64_t Dv, float* q, float* k,
                 float* v, float* g, float* beta);
// conv_silu + gdn_prepare in one launch, bitwise the same outputs and conv state (decode fusion);
// needs Dk, Dv <= 128 and K <= 8 (conv_gdn_prepare_supported), else mere::Error.
bool conv_gdn_prepare_supported(int64_t Hk, int64_t Dk, int64_t Hv, int64_t Dv, int64_t K);
// Second copies of a traced pass's rows (MTP rollback replay), each already at the pass's first trace
// row: raw [T, C], q, k [T, Hk, Dk], v [T, Hv, Dv], g, beta [T, Hv]; all null when not tracing.
struct GdnTraceOut {
  float *raw = nullptr, *q = nullptr, *k = nullptr, *v = nullptr, *g = nullptr, *beta = nullptr;
};
// side_by_side: v4's kernel (a block runs up to 8 tokens side by side; the engine's choice for T > 1), the
// same outputs and conv state bitwise; else v3's (a block's tokens one after another).
void conv_gdn_prepare(cudaStream_t s, float* state, const float* w, const float* raw, int64_t T, int64_t K,
                      const float* a, const float* b, const float* neg_a, const float* dt_bias, int64_t Hk, int64_t Dk,
                      int64_t Hv, int64_t Dv, float* q, float* k, float* v, float* g, float* beta,
                      const GdnTraceOut& trace = {}, bool side_by_side = false);
// The middle of a GDN layer's decode step for ONE token in one launch (k_gdn_block.cu;
// MERE_CUDA_GDN_BLOCK): conv_gdn_prepare, gdn_decode and gated_rms_norm_prep (out_proj's prepared
// input into ws at `bits`), bitwise their q, k, v, g, beta, conv state, S, o, y and workspace. Its blocks
// meet at grid-wide barriers, so the grid comes from gdn_mid_grid (0: these shapes do not take it:
// Dk = Dv = 128, Hv a multiple of Hk, K <= 8, 4 or 8 bits).
struct GdnMidWeights {
  const float* conv_w;   // [C, K]
  const float* neg_a;    // [Hv]
  const float* dt_bias;  // [Hv]
  const float* norm_w;   // [Dv] the gated norm's weight
};
struct GdnMidIo {
  float* conv_state;                 // [K-1, C]
  const float *raw, *a, *b;          // the projections: [C], [Hv], [Hv]
  float *q, *k, *v, *g, *beta;       // [Hk, Dk], [Hk, Dk], [Hv, Dv], [Hv], [Hv]
  float* S;                          // [Hv, Dv, Dk]
  float* o;                          // [Hv, Dv] the step's output
  const float* z;                    // [Hv, Dv]
  float* y;                          // [Hv, Dv] the gated norm's output
  GdnTraceOut tr;                    // a traced pass's copies (all null: none)
};
int gdn_mid_grid(int64_t Hk, int64_t Dk, int64_t Hv, int64_t Dv, int64_t K, int bits, int sms);
void gdn_mid(cudaStream_t s, int grid, const GdnMidWeights& m, const GdnMidIo& io, int64_t K, int64_t Hk, int64_t Hv,
             float eps, int bits, float* ws, unsigned* bar);
// Recurrent GDN step for any Dk, Dv <= 1024 (thread per state row, the CPU's order).
void gdn_generic(cudaStream_t s, float* S, const float* q, const float* k, const float* v, const float* g,
                 const float* beta, int64_t T, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, float* o);
// y = w * rmsnorm(x) * silu(z) per (row, head)   x, z, y: [T, Hv, Dv]; w: [Dv]
// (T >= 16: a warp per (row, head); fewer rows: a 128-thread block each, as gated_rms_norm_prep; same bits)
// xq (null: none): as sigmoid_gate's, written only by the prefill form (T >= 16, Dv % 8 == 0); returns
// whether it was.                                       xq: [T, Hv * Dv] bf16
bool gated_rms_norm(cudaStream_t s, const float* x, const float* z, const float* w, int64_t T, int64_t Hv,
                    int64_t Dv, float eps, float* y, uint16_t* xq = nullptr);

// ---- full attention ----
// Per head: q = rope(rmsnorm(qg[q part]) * q_norm) -> q: [T, nh, hd]; k = rope(rmsnorm(k) * k_norm)
// and v are written to the cache rows pos+t. qg: [T, nh, 2, hd]; k, v: [T, nkv, hd];
// kc, vc: [cap, nkv, hd]
void attn_prepare(cudaStream_t s, const float* qg, const float* k, const float* v, const float* q_norm,
                  const float* k_norm, const int32_t* pos, int64_t T, int64_t nh, int64_t nkv, int64_t hd,
                  int64_t rotary_dim, double theta, float eps, float* q, float* kc, float* vc);
// Causal attention: row t attends to cache rows [0, pos+t+1). Split over `spans` position ranges
// (fixed by the caller, not by the length), then merged in order. ws: attention_ws_floats.
int64_t attention_ws_floats(int64_t T, int64_t nh, int64_t hd, int spans);
// combine_v2: the merge as attn_combine_v2_kernel (16 spans; the engine's default, MERE_CUDA_ATTN_COMBINE;
// the same bits as attn_combine_kernel). ahead (v2 only; may be null): a later launch's weights the merge's
// blocks ask the L2 for (l2_ahead.h; the engine's MERE_CUDA_L2_AHEAD: o_proj); no value changes.
void attention(cudaStream_t s, const float* q, const float* kc, const float* vc, const int32_t* pos, int64_t T,
               int64_t nh, int64_t nkv, int64_t hd, float scale, int spans, float* ws, float* out,
               bool combine_v2 = false, const L2Ahead* ahead = nullptr);
// The same contract and result layout (same ws, same spans, same merge), GQA-aware: a block per
// (KV head, span, row) scores and accumulates all nh/nkv (<= 8) query heads of that KV head, so K
// and V are read once per KV head instead of once per query head; coalesced K and V rows.
// head_dim 64, 128 or 256. The engine's default where supported (MERE_CUDA_ATTN=split: the split kernel).
// Whether attention_gqa takes these heads (the engine's default decode attention where it does).
bool attention_gqa_supported(int64_t nh, int64_t nkv, int64_t hd);
void attention_gqa(cudaStream_t s, const float* q, const float* kc, const float* vc, const int32_t* pos, int64_t T,
                   int64_t nh, int64_t nkv, int64_t hd, float scale, int spans, float* ws, float* out,
                   bool combine_v2 = false, const L2Ahead* ahead = nullptr);
// out[t, h, :] *= sigmoid(qg[t, h, 1, :]). xq (prefill; null: none): the result also rounded to bf16
// in qgemm_prepare_x's layout (gemm.h), bitwise that launch after this one; returns whether xq was
// written (needs nh * hd % 8 == 0).                   out: [T, nh, hd]; xq: [T, nh * hd] bf16
bool sigmoid_gate(cudaStream_t s, float* out, const float* qg, int64_t T, int64_t nh, int64_t hd,
                  uint16_t* xq = nullptr);

// ---- MoE ----
// Softmax over E router logits, top K (lowest index first on ties), optionally renormalised; a warp
// per token (fixed reduction order: batch-width invariant). sorted: the top-k from each lane's sorted
// entries and warp reductions (E <= 256; the form the routing gate/up launch uses by default,
// MERE_CUDA_MOE_TOPK), else K rounds of scans and shuffles: the same ids and weights.
// logits: [T, E]; idx: [T, K] int32; w: [T, K]
void moe_route(cudaStream_t s, const float* logits, int64_t T, int64_t E, int64_t K, bool renorm, int32_t* idx,
               float* w, bool sorted = false);
// Fused expert FFN (k_moe.cu) for 4/8-bit g64 experts of one width: whether these shapes run on it.
// gate, up: stacked [E x Ie, H]; down: stacked [E x H, Ie]; sgate, sup: [Is, H]; sdown: [H, Is].
bool moe_fused_supported(const DMat& gate, const DMat& up, const DMat& down, const DMat& sgate, const DMat& sup,
                         const DMat& sdown, int64_t K);
// One launch: h[t,k] = silu(gate_{idx[t,k]} x[t]) * (up_{idx[t,k]} x[t]) for all K selected experts
// and hs[t] = silu(sgate x[t]) * (sup x[t]).   x: [T, H]; h: [T, K, Ie]; hs: [T, Is]
// sets (MERE_CUDA_MOE_LOADS, read by the engine; true the default): each warp's weight chunks and their
// group scales asked for at once (rows that fit the kernel's chunk sets; others take the old order);
// false: as the dot reaches them. The same bits either way (here, in moe_route_gate_up, moe_down and
// moe_norm_router).
void moe_gate_up(cudaStream_t s, const DMat& gate, const DMat& up, const DMat& sgate, const DMat& sup,
                 const int32_t* idx, const float* x, int64_t T, int64_t K, float* h, float* hs, bool sets = true);
// moe_route + moe_gate_up in one launch (the routing computed by each expert block for its token,
// with moe_route's code: bitwise the same ids, weights and h): whether E, K and the width fit.
bool moe_route_gate_up_supported(const DMat& gate, int64_t E, int64_t K);
// logits: [T, E] router logits; writes idx [T, K] and w [T, K] (for moe_down) and h, hs as moe_gate_up.
// down_l2 (with the quantised down / sdown moe_down will read): each block asks the L2 for its share of
// its expert's down matrix, 1 right after asking for its own weights, 2 after storing its h rows; 0 none.
// A hint: the same values. 4-bit gate/up only.
void moe_route_gate_up(cudaStream_t s, const DMat& gate, const DMat& up, const DMat& sgate, const DMat& sup,
                       const float* logits, int64_t E, bool renorm, int32_t* idx, float* w, const float* x, int64_t T,
                       int64_t K, float* h, float* hs, bool sets = true, const DMat* down = nullptr,
                       const DMat* sdown = nullptr, int down_l2 = 0);
// One launch: y = sum_k w[t,k] down_{idx[t,k]} h[t,k] + sigmoid(sg[t]) sdown hs[t] (in that order);
// out[t] = residual ? out[t] + y : y.   out: [T, H]
// ahead (may be null): a later launch's weights every block asks the L2 for once its own rows are asked
// for (l2_ahead.h; the engine's MERE_CUDA_L2_AHEAD: the next layer's input projections); no value changes.
void moe_down(cudaStream_t s, const DMat& down, const DMat& sdown, const int32_t* idx, const float* w, const float* sg,
              const float* h, const float* hs, int64_t T, int64_t K, bool residual, float* out, bool sets = true,
              const L2Ahead* ahead = nullptr);
// out[t] = sum_k w[t,k] y[t,k] + sigmoid(sg[t]) shared[t]   (in that order)
// y: [T, K, H]; shared: [T, H]; sg: [T]; out: [T, H]
void moe_combine(cudaStream_t s, const float* y, const float* w, const float* shared, const float* sg, int64_t T,
                 int64_t K, int64_t H, float* out);

// The post-attention norm and the router in one launch (k_moe_router.cu; MERE_CUDA_MOE_NORM=fused):
// y = rmsnorm(x) * norm_w, logits = router y, sg = shared_gate y, bitwise rms_norm_prep (8-bit, no
// residual add) followed by the 8-bit router + shared-gate matvec. Whether the shapes take it (an
// 8-bit router and shared gate of one row, H <= 4096, 16-byte aligned rows):
// x, y: [T, H]; norm_w: [H]; router: [E, H]; shared_gate: [1, H]; logits: [T, E]; sg: [T]
bool moe_norm_router_supported(const DMat& router, const DMat& shared_gate, const float* x, const float* norm_w,
                               const float* y);
void moe_norm_router(cudaStream_t s, const float* x, const float* norm_w, float eps, const DMat& router,
                     const DMat& shared_gate, int64_t T, float* y, float* logits, float* sg, bool sets = true);

// The MoE half of a decoder layer for ONE token in one launch (k_moe_block.cu; MERE_CUDA_MOE_BLOCK):
// xn = rmsnorm(x) * norm_w; the router and shared-gate logits (RB = router.bits, 4 or 8); the routing;
// SwiGLU of the K experts and the shared expert; down + combine; x += the result. Bitwise the same x
// as rms_norm_prep + the router launch + moe_route_gate_up + moe_down, and the same logits, ids,
// weights, h and hs in the scratch. Its blocks meet at grid-wide barriers: the grid must be resident
// at once, so it comes from moe_block_grid (0: these shapes or this device do not take it). x: [H]
struct MoeBlockWeights {
  const float* norm_w;        // [H] the post-attention norm
  DMat router, shared_gate;   // [E, H], [1, H]
  DMat gate, up, down;        // stacked experts: [E x Ie, H], [E x Ie, H], [E x H, Ie]
  DMat sgate, sup, sdown;     // the shared expert: [Is, H], [Is, H], [H, Is]
};
struct MoeBlockScratch {
  float* logits;   // [E]
  float* sg;       // [1]
  int32_t* idx;    // [K]
  float* w;        // [K]
  float* h;        // [K, Ie]
  float* hs;       // [Is]
  unsigned* bar;   // [2] zeroed once: the grid barrier (grid_sync.cuh)
};
int moe_block_grid(const MoeBlockWeights& m, int64_t E, int64_t K, int sms);
void moe_block(cudaStream_t s, int grid, const MoeBlockWeights& m, float eps, int64_t E, int64_t K, bool renorm,
               float* x, const MoeBlockScratch& ws);
// MERE_CUDA_MOE_TOPK (read once per process): the routing's top-k form inside the gate/up launches
// (route_token `sorted`; the same ids and weights either way). Unset or sorted: true; rounds: false.
bool moe_topk_sorted();
// moe_route_gate_up + moe_down for ONE token in one launch (k_moe_fused.cu; MERE_CUDA_MOE_FUSED=on): the
// gate/up blocks meet at a grid-wide barrier, then run down + combine + the residual add. The same ids,
// weights, h, hs and out as the two launches, bit for bit (ws: logits unused; idx, w, h, hs written as
// they leave them). The grid must be resident at once: moe_gate_up_down_grid gives it (0: these shapes
// or this device do not take it: 4-bit experts whose rows fit gate/up's two chunk sets and down's one).
struct MoeFusedWeights {
  DMat gate, up, down;     // stacked experts: [E x Ie, H], [E x Ie, H], [E x H, Ie]
  DMat sgate, sup, sdown;  // the shared expert: [Is, H], [Is, H], [H, Is]
};
int moe_gate_up_down_grid(const MoeFusedWeights& m, int64_t E, int64_t K, int sms);
// logits: [E]; x: [H] the normalised row; sg: [1]; out: [H] the residual (out += the MoE result)
void moe_gate_up_down(cudaStream_t s, int grid, const MoeFusedWeights& m, const float* logits, int64_t E, bool renorm,
                      const float* x, const float* sg, int64_t K, float* out, const MoeBlockScratch& ws);

}  // namespace mere::cuda::k
