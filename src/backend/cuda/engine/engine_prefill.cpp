// CudaEngine prefill (T >= kGemmRows, untraced calls): the whole model over up to kPrefillChunk rows
// a pass on the tensor-core kernels of docs/cuda-kernels.md §5 — every MLX 4/8-bit g64 projection as
// one GEMM over all rows (cuBLASLt on the dequantised matrix, or qgemm; X rounded to bf16 once per
// input, shared by the projections of that input), MoE experts through moe_sort_pairs +
// moe_stream_gate_up + moe_stream (gemm_moe.h; qgemm_grouped with MERE_CUDA_MOE_PREFILL=grouped, the
// wgmma expert kernels of gemm_wgmma.h with =wgmma) +
// moe_combine, a row-parallel conv, GatedDeltaNet through gdn_prefill_c4 (128-wide heads, 4 tokens an
// exchange; MERE_CUDA_GDN_PREFILL=recurrent: gdn_prefill, =lazy: the lazy-decay form, =chunked: the
// WY/UT chunk form, gdn_chunked.h; the engine's generic recurrent kernel for other head sizes),
// attention through attention_prefill (head_dim 256; the engine's split kernel otherwise). Float matrices (the bundled tiny models) keep the engine's exact fp32 gemv. The
// logits (lm_head) stay on the exact matvec path, 9 rows at a time, so only the last row's are
// computed when only those are asked for. Numerics differ from the sliced path (bf16 activations
// in the GEMM): docs/cuda-kernels.md "Engine prefill v2". MERE_CUDA_PREFILL=exact keeps the exact
// sliced path for every width; the dense projections run, each shape on whichever was faster at the
// first prompt (=auto, the default on sm_90; prefill_choice.h), on the warp-specialised wgmma GEMM
// that dequantises per group or as whole-matrix dequantisation + cuBLASLt (gemm_blas.h, the same bf16
// operands; =blas for all), on qgemm (=gemm), or all on a chosen wgmma form (=wgmma, gemm_wgmma.h).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/attention_prefill.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/engine/engine.h"
#include "backend/cuda/engine/k_prefill.h"
#include "backend/cuda/engine/kernels.h"
#include "backend/cuda/env_choice.h"
#include "backend/cuda/gdn.h"
#include "backend/cuda/gdn_chunked.h"
#include "backend/cuda/gdn_prefill.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/gemm_blas.h"
#include "backend/cuda/gemm_moe.h"
#include "backend/cuda/gemm_wgmma.h"
#include "backend/cuda/prefill_choice.h"

namespace mere::cuda {
namespace {
// MERE_CUDA_GDN_PREFILL, for 128-wide heads: tc (the default since session 20: on an H100 27B +0.6%,
// 35B-A3B +3.3% prefill over c4) runs gdn_prefill_tc (c4's math with its products on the tensor
// cores), c4 gdn_prefill_c4 (4 tokens an exchange; the default in session 19), recurrent gdn_prefill,
// lazy gdn_prefill_lazy (the state as c R: gdn_prefill.h), chunked the WY/UT chunk form (gdn_chunked.h).
enum class GdnPrefillForm { Recurrent, Lazy, C4, Chunked, Tc };
GdnPrefillForm gdn_prefill_form() {
  switch (env_choice("MERE_CUDA_GDN_PREFILL", {"recurrent", "lazy", "c4", "chunked", "tc"})) {
    case 0: return GdnPrefillForm::Recurrent;
    case 1: return GdnPrefillForm::Lazy;
    case 2: return GdnPrefillForm::C4;
    case 3: return GdnPrefillForm::Chunked;
    default: return GdnPrefillForm::Tc;
  }
}
}  // namespace

// Scratch of one prefill pass (kPrefillChunk rows), allocated on the first prefill call.
struct CudaEngine::Prefill {
  DeviceBuffer buf;
  int64_t rows = 0, ws_floats = 0, xq_elems = 0;
  bool generic_attn = false;  // head_dim != 256 or > 8 query heads a KV head: the engine's split kernel
  bool attn_tc = true;        // MERE_CUDA_ATTN_PREFILL: attention_prefill_tc (default) or the SIMT kernel
  bool glue = true;           // MERE_CUDA_PREFILL_GLUE: producers write the GEMMs' bf16 X (default)
  bool glue_combine = true;   // ... and the MoE combine runs as one launch (default)
  int64_t xn_cols = -1;       // xq holds xn prepared (its width) since the last norm, else -1
  float *x, *xn, *o, *h, *ws;
  float* cat;  // [rows, 2H]: head_prefill's [norm_e(embedding) | norm_h(hidden)] (null without MTP)
  // MERE_CUDA_GDN_PREFILL for 128-wide heads (recurrent, i.e. gdn_decode's 64-wide rows or the
  // engine's generic kernel, for other sizes) and its scratch (chunked: gdn_chunked_scratch_floats,
  // c4 and tc: the Gram entries), else null
  GdnPrefillForm gdn_form = GdnPrefillForm::Recurrent;
  float* gdn_scratch;
  uint16_t* xq;
  float *raw, *mixed, *z, *ga, *gb, *gq, *gk, *gv, *gg, *gbeta, *core, *gout;
  float *qg, *kk, *vv, *q, *att, *aws;
  float *f1, *f2, *rlog, *rw, *eg, *eu, *ey, *sh, *sg;
  int32_t *ridx, *offsets, *row_token, *pair_row, *ids, *pos;
  std::unique_ptr<BlasGemm> blas;  // MERE_CUDA_PREFILL=blas: dense projections through cuBLASLt
  bool wgmma = false;               // MERE_CUDA_PREFILL=wgmma / auto: 4-bit MLX projections through wgemm
  bool wgmma_auto = false;          // ... only the shapes measured faster there (auto: choices)
  PrefillGemmChoices choices;       // auto: ws or cuBLASLt a shape, measured at the first prompt
  std::unique_ptr<WgemmStreamK> streamk;  // ... split stream-K (MERE_CUDA_WGEMM=streamk), else whole tiles
};

namespace {
enum class PrefillMode { Auto, Gemm, Blas, Exact, Wgmma };
// MERE_CUDA_BLAS_OVERLAP=N: SMs the cuBLASLt GEMMs leave to the next matrix's dequantisation on a
// side stream (gemm_blas.h "Overlap"); 0 (the default) dequantises each matrix just before its GEMM.
int blas_overlap_sms(int sms) {
  const char* e = std::getenv("MERE_CUDA_BLAS_OVERLAP");
  if (!e || !*e) return 0;
  char* end = nullptr;
  const long v = std::strtol(e, &end, 10);
  MERE_CHECK(end != e && *end == 0 && v >= 0 && v < sms, "cuda engine",
             "MERE_CUDA_BLAS_OVERLAP: expected an SM count in 0..", sms - 1, ", got '", e, "'");
  return static_cast<int>(v);
}

// MERE_CUDA_MOE_PREFILL: stream (the default since session 13: engine_check 43/43 on it, +13% 35B-A3B
// prefill) runs 4-bit routed experts through the weight-stream kernels of gemm_moe.h (gate + up +
// SwiGLU in one launch), grouped through qgemm_grouped.
// wgmma: gemm_wgmma.h's expert kernels (MoE prefill v3; correct, 4-9% slower than the stream on an
// H100, so opt-in).
enum class MoePrefill { Stream, Grouped, Wgmma };
MoePrefill moe_prefill_mode() {
  const int v = env_choice("MERE_CUDA_MOE_PREFILL", {"stream", "grouped", "wgmma"});
  return v == 1 ? MoePrefill::Grouped : v == 2 ? MoePrefill::Wgmma : MoePrefill::Stream;
}

// MERE_CUDA_ATTN_PREFILL: tc (the default since session 22: attention_prefill_tc, FlashAttention-2 on
// mma.sync with bf16 hi + lo operands) or simt (the fp32 SIMT kernel of session 8).
bool attn_prefill_tc() { return env_choice("MERE_CUDA_ATTN_PREFILL", {"tc", "simt"}) != 1; }

// MERE_CUDA_PREFILL_GLUE: fused (the default since session 23) lets the producers of a GEMM input
// (the RMSNorms, the gated RMSNorm, the attention's sigmoid gate) write its bf16 X themselves, and
// combines the shared and the routed experts in one launch; separate runs qgemm_prepare_x and the
// two combine launches as before; combine only the latter. Bitwise the same in every form
// (engine_check pairs them). 0: fused, 1: separate, 2: combine.
int prefill_glue() { return std::max(0, env_choice("MERE_CUDA_PREFILL_GLUE", {"fused", "separate", "combine"})); }

// MERE_CUDA_MOE_STREAM: how the stream keeps bytes in flight (gemm_moe.h MoeStreamLoads): tight (128
// registers, 4 blocks an SM; the default since session 13), regs or ring; bitwise the same results.
// (Measured and removed: session 22's deep / deep3 loads, "MoE prefill v2d", and the persistent chain /
// chain3 grid, "v2e", in session 23: docs/cuda-kernels.md.)
MoeStreamLoads moe_stream_loads() {
  const int v = env_choice("MERE_CUDA_MOE_STREAM", {"tight", "regs", "ring"});
  return v == 1 ? MoeStreamLoads::Registers : v == 2 ? MoeStreamLoads::Ring : MoeStreamLoads::Tight;
}


// MERE_CUDA_WGEMM: how the wgmma prefill GEMM runs: tiles (v6a: 128-token tiles in rounds, the
// default), streamk (v6b: the same tiles split evenly over a resident grid; H100: 5% faster on the
// largest 27B matrices, slower on the rest), wide (v6c: 256-token tiles with the weights
// dequantised into shared memory under the previous group's wgmmas, stream-K), ws (v6d: v6c fed
// by a TMA producer warp), wst (v6d with tiles of 256 weight rows x 128 tokens) or wsd (v6f: v6d with
// the producer warpgroup dequantising, bitwise ws). 0 .. 5.
int wgemm_form() { return env_choice("MERE_CUDA_WGEMM", {"tiles", "streamk", "wide", "ws", "wst", "wsd"}); }

// Which matrices the wgmma path takes under MERE_CUDA_PREFILL=wgmma: the ones it supports with at
// least 2,048 rows; smaller ones (the GDN b/a [48, 5120], k/v [1024, 5120]) do not fill the GPU with
// 128-row tiles (s17 H100: wide k/v 98.9 µs at T = 512) and take the cuBLASLt path. (auto measures
// each shape instead: prefill_choice.h.)
bool wgemm_takes(const CudaDevice& dev, const QWeightView& W) { return W.rows >= 2048 && wgemm_supported(dev, W); }

// MERE_CUDA_WS_GROUP: auto (the default) times, at the first prompt, each set of matrices a layer
// multiplies by one X as ONE ws launch against one launch each (prefill_choice.h) and keeps the
// faster; off: one launch a matrix (session 20's behaviour).
bool ws_group_enabled() { return env_choice("MERE_CUDA_WS_GROUP", {"auto", "off"}) != 1; }

// MERE_CUDA_WS_GRID: auto (the default since session 22: also time each ws shape and group on whole
// tiles a block, WsGrid::WholeTiles, and keep the faster grid; checked and measured in s22a: prefill
// +3% 27B, +2% 35B-A3B on an H100) or streamk (every ws launch on stream-K, session 21's behaviour).
// Unset is -1, so the default is "not streamk" (env_choice.h).
bool ws_whole_tiles_enabled() { return env_choice("MERE_CUDA_WS_GRID", {"auto", "streamk"}) != 1; }

// The sets of projections a layer multiplies by one X (one gemm_shared call each below): the
// candidates for one grouped launch.
std::vector<std::vector<const DMat*>> shared_sets(const DLayer& L) {
  return {{&L.attn.q, &L.attn.k, &L.attn.v},
          {&L.gdn.qkv, &L.gdn.z, &L.gdn.b, &L.gdn.a},
          {&L.mlp.gate, &L.mlp.up},
          {&L.router, &L.shared_gate, &L.shared.gate, &L.shared.up}};
}

PrefillMode prefill_mode() {
  // auto (the default since session 18): on sm_90 each dense 4-bit shape through the warp-specialised
  // wgmma GEMM (v6d) or cuBLASLt, whichever was faster at the first prompt (prefill_choice.h);
  // blas: every projection through cuBLASLt (docs/cuda-kernels.md "prefill v4"); gemm: qgemm; exact:
  // the sliced exact path; wgmma: every 4-bit MLX projection of >= 2,048 rows through the form
  // MERE_CUDA_WGEMM names (the experiments of "Prefill v6" .. "v6f")
  const int v = env_choice("MERE_CUDA_PREFILL", {"auto", "blas", "gemm", "exact", "wgmma"});
  return v == 1   ? PrefillMode::Blas
         : v == 2 ? PrefillMode::Gemm
         : v == 3 ? PrefillMode::Exact
         : v == 4 ? PrefillMode::Wgmma
                  : PrefillMode::Auto;
}
}  // namespace

bool CudaEngine::prefill_gemm_enabled() { return prefill_mode() != PrefillMode::Exact; }

void CudaEngine::alloc_prefill() {
  if (pf_) return;
  auto p = std::make_shared<Prefill>();
  const ModelConfig& c = cfg_;
  const int64_t R = kPrefillChunk, H = c.hidden_size;
  const int64_t C = c.conv_dim(), kd = c.lin_key_dim(), vd = c.lin_value_dim(), Hv = c.lin_v_heads;
  const int64_t nh = c.num_heads, nkv = c.num_kv_heads, hd = c.head_dim;
  const int64_t I = std::max(c.intermediate_size, c.shared_intermediate_size);
  const bool moe = c.is_moe;
  const int64_t E = moe ? c.num_experts : 0, K = moe ? c.experts_per_tok : 0, Ie = moe ? c.moe_intermediate_size : 0;
  // qgemm split-K workspace and the prepared-X buffer: the largest any projection needs at R rows
  int64_t ws = 0, xq = std::max({R * H, R * vd, R * nh * hd, R * I, R * K * H, R * K * Ie, has_mtp_ ? R * 2 * H : 0});
  const PrefillMode mode = prefill_mode();
  // auto takes the wgmma path on sm_90 only (elsewhere it is the blas mode)
  const bool wg = mode == PrefillMode::Wgmma || (mode == PrefillMode::Auto && dev_.props().major == 9);
  const bool wg_auto = mode == PrefillMode::Auto;
  // every dense quantised projection a prompt pass multiplies (one matrix each), the MTP head's
  // (head_prefill) included
  std::vector<QWeightView> dense;
  std::vector<const DLayer*> passes;
  for (const DLayer& L : layers_) passes.push_back(&L);
  if (has_mtp_) passes.push_back(&mtp_layer_);
  for (const DLayer* L : passes)
    for (const DMat* W : {&L->attn.q, &L->attn.k, &L->attn.v, &L->attn.o, &L->gdn.qkv, &L->gdn.z, &L->gdn.b,
                          &L->gdn.a, &L->gdn.out, &L->mlp.gate, &L->mlp.up, &L->mlp.down, &L->router, &L->shared_gate,
                          &L->shared.gate, &L->shared.up, &L->shared.down})
      if (W->quantized() && W->count == 1) dense.push_back(W->qview());
  if (has_mtp_ && mtp_fc_.quantized() && mtp_fc_.count == 1) dense.push_back(mtp_fc_.qview());
  // the largest projection the cuBLASLt path may run (its bf16 scratch): under auto any of them
  // until the choice is measured
  auto blas_weights = [&](auto&& takes_ws) {
    int64_t m = 0;
    for (const QWeightView& W : dense)
      if (!takes_ws(W)) m = std::max(m, W.rows * W.cols);
    return m;
  };
  const int64_t max_weights =
      blas_weights([&](const QWeightView& W) { return wg && !wg_auto && wgemm_takes(dev_, W); });
  for (const QWeightView& W : dense)
    for (int64_t t = kGemmRows; t <= R; t *= 2) ws = std::max(ws, qgemm_workspace_floats(dev_, W, t));
  const bool generic_attn = !(hd == 256 && nkv >= 1 && nh % nkv == 0 && nh / nkv <= 8);
  const GdnPrefillForm gdn_form =
      c.lin_k_dim == 128 && c.lin_v_dim == 128 ? gdn_prefill_form() : GdnPrefillForm::Recurrent;
  int64_t used = 0;
  char* base = nullptr;
  auto take = [&](int64_t floats) {
    const int64_t n = (floats + 63) / 64 * 64;
    float* r = base ? reinterpret_cast<float*>(base) + used : nullptr;
    used += n;
    return r;
  };
  for (int pass = 0; pass < 2; ++pass) {
    used = 0;
    p->x = take(R * H), p->xn = take(R * H), p->o = take(R * H), p->h = take(R * H), p->ws = take(ws);
    p->cat = take(has_mtp_ ? R * 2 * H : 0);
    p->xq = reinterpret_cast<uint16_t*>(take((xq + 1) / 2));
    p->raw = take(R * C), p->mixed = take(R * C), p->z = take(R * vd), p->ga = take(R * Hv), p->gb = take(R * Hv);
    p->gq = take(R * kd), p->gk = take(R * kd), p->gv = take(R * vd), p->gg = take(R * Hv), p->gbeta = take(R * Hv);
    p->core = take(R * vd), p->gout = take(R * vd);
    p->qg = take(R * nh * hd * 2), p->kk = take(R * nkv * hd), p->vv = take(R * nkv * hd), p->q = take(R * nh * hd);
    p->att = take(R * nh * hd), p->aws = take(generic_attn ? k::attention_ws_floats(R, nh, hd, kSpans) : 0);
    p->f1 = take(R * I), p->f2 = take(R * I), p->sh = take(moe ? R * H : 0), p->sg = take(R);
    p->rlog = take(R * E), p->rw = take(R * K), p->eg = take(R * K * Ie), p->eu = take(R * K * Ie),
    p->ey = take(R * K * H);
    p->ridx = reinterpret_cast<int32_t*>(take(R * K)), p->offsets = reinterpret_cast<int32_t*>(take(E + 1));
    p->row_token = reinterpret_cast<int32_t*>(take(R * K)), p->pair_row = reinterpret_cast<int32_t*>(take(R * K));
    p->ids = reinterpret_cast<int32_t*>(take(R)), p->pos = reinterpret_cast<int32_t*>(take(1));
    p->gdn_scratch = gdn_form == GdnPrefillForm::Chunked ? take(gdn_chunked_scratch_floats(R, Hv))
                     : gdn_form == GdnPrefillForm::C4 || gdn_form == GdnPrefillForm::Tc
                         ? take(gdn_c4_scratch_floats(R, c.lin_k_heads))
                                                         : nullptr;
    if (pass == 0) {
      p->buf = dev_.alloc(static_cast<size_t>(used) * 4, "prefill scratch (tensor-core path)");
      base = static_cast<char*>(p->buf.get());
    }
  }
  p->rows = R;
  p->gdn_form = gdn_form;
  p->generic_attn = generic_attn;
  p->attn_tc = attn_prefill_tc();
  const int glue = prefill_glue();
  p->glue = glue == 0;
  p->glue_combine = glue != 1;
  p->ws_floats = ws;
  p->xq_elems = xq;
  if ((mode == PrefillMode::Blas || mode == PrefillMode::Wgmma || mode == PrefillMode::Auto) && max_weights > 0)
    p->blas = std::make_unique<BlasGemm>(dev_, max_weights, blas_overlap_sms(dev_.sm_count()));
  p->wgmma = wg;
  p->wgmma_auto = wg_auto;
  // the form: MERE_CUDA_WGEMM, else tiles under =wgmma and ws under auto
  if (const int f = !wg ? 0 : wg_auto && wgemm_form() < 0 ? 3 : wgemm_form(); f > 0) {
    p->streamk = std::make_unique<WgemmStreamK>(
        dev_, f == 1   ? WgemmForm::StreamK
              : f == 2 ? WgemmForm::Wide
              : f == 3 ? WgemmForm::WarpSpecialized
              : f == 4 ? WgemmForm::WarpSpecializedTall
                       : WgemmForm::WarpSpecializedDequant);
  }
  MERE_CHECK(!(wg_auto && wg) || (p->streamk && p->streamk->ws()), "cuda prefill",
             "MERE_CUDA_PREFILL=auto chooses between cuBLASLt and a warp-specialised wgmma form: MERE_CUDA_WGEMM must be "
             "ws, wst or wsd (or unset), not a v6a-v6c form");
  if (wg_auto && wg && p->blas) {
    // time both paths on each shape at a full pass; then the cuBLASLt scratch only as large as the
    // matrices left to it need
    dev_.fill_bytes(p->xq, 0, static_cast<size_t>(xq) * 2);
    p->choices.allow_whole_tiles(ws_whole_tiles_enabled());
    p->choices.measure(dev_, dense, *p->blas, *p->streamk, p->xq, R);
    if (ws_group_enabled()) {
      std::vector<std::vector<QWeightView>> groups;  // each set's matrices the ws GEMM reads
      for (const DLayer& L : layers_)
        for (const std::vector<const DMat*>& set : shared_sets(L)) {
          std::vector<QWeightView> g;
          for (const DMat* W : set)
            if (W->quantized() && W->count == 1 && wgemm_supported(dev_, W->qview())) g.push_back(W->qview());
          if (g.size() >= 2) groups.push_back(std::move(g));
        }
      p->choices.measure_groups(dev_, groups, p->blas.get(), *p->streamk, p->xq, R);
    }
    const int64_t left = blas_weights([&](const QWeightView& W) { return p->choices.ws(dev_, W); });
    if (left == 0) p->blas.reset();
    else if (left < max_weights) p->blas = std::make_unique<BlasGemm>(dev_, left, blas_overlap_sms(dev_.sm_count()));
  }
  pf_ = std::move(p);
}

std::string CudaEngine::prefill_gemms_summary() const { return pf_ ? pf_->choices.summary() : std::string(); }

// y_i = x · W_i^T for each (W_i, y_i): quantised single matrices through one bf16-prepared X and
// qgemm; anything else through the exact generic gemv. prepared_cols >= 0: p.xq already holds x
// prepared with that many columns.
void CudaEngine::gemm_shared(std::initializer_list<std::pair<const DMat*, float*>> outs, const float* x,
                             int64_t T, int64_t prepared_cols) {
  Prefill& p = *pf_;
  int64_t prepared = prepared_cols;  // cols of the X currently in p.xq
  // the matrices the ws GEMM reads, as one launch where the group was measured faster (auto)
  WgemmOut group[kWgemmMaxGroup];
  int ng = 0;
  WsGrid grid = WsGrid::StreamK;
  if (p.wgmma_auto && p.choices.any_grouped()) {
    for (const auto& [W, y] : outs)
      if (ng < kWgemmMaxGroup && W->quantized() && W->count == 1 && wgemm_supported(dev_, W->qview()))
        group[ng++] = WgemmOut{W->qview(), y, W->rows};
    if (ng < 2 || !p.choices.grouped(group, ng, &grid)) ng = 0;
  }
  if (ng > 0) {
    if (prepared != group[0].W.cols) {
      qgemm_prepare_x(dev_, x, T, group[0].W.cols, group[0].W.cols, p.xq);
      prepared = group[0].W.cols;
    }
    wgemm_group(dev_, group, ng, p.xq, T, *p.streamk, grid);
  }
  auto in_group = [&](const DMat* W) {
    for (int i = 0; i < ng; ++i)
      if (group[i].W.codes == W->qview().codes) return true;
    return false;
  };
  for (const auto& [W, y] : outs) {
    if (ng > 0 && in_group(W)) continue;
    if (!W->quantized() || W->count != 1) {
      k::gemv(dev_.stream(), *W, x, T, 1, nullptr, y);
      continue;
    }
    if (prepared != W->cols) {
      qgemm_prepare_x(dev_, x, T, W->cols, W->cols, p.xq);
      prepared = W->cols;
    }
    const QWeightView v = W->qview();
    if (p.wgmma && (p.wgmma_auto ? p.choices.ws(dev_, v) : wgemm_takes(dev_, v))) {
      wgemm(dev_, v, p.xq, T, y, W->rows, p.streamk.get(), p.wgmma_auto ? p.choices.grid(v) : WsGrid::StreamK);
      continue;
    }
    if (p.blas) {
      p.blas->run(v, p.xq, T, y, W->rows);
      continue;
    }
    float* ws = qgemm_workspace_floats(dev_, v, T) <= p.ws_floats ? p.ws : nullptr;
    qgemm(dev_, v, p.xq, T, y, W->rows, ws);
  }
}

void CudaEngine::prefill_attention(const DAttn& a, float* kc, float* vc, int64_t T, int64_t pos0, float* out) {
  Prefill& p = *pf_;
  const int64_t nh = cfg_.num_heads, nkv = cfg_.num_kv_heads, hd = cfg_.head_dim;
  cudaStream_t s = dev_.stream();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  gemm_shared({{&a.q, p.qg}, {&a.k, p.kk}, {&a.v, p.vv}}, p.xn, T, p.xn_cols);
  k::attn_prepare(s, p.qg, p.kk, p.vv, a.q_norm, a.k_norm, p.pos, T, nh, nkv, hd, cfg_.rotary_dim, cfg_.rope_theta,
                  static_cast<float>(cfg_.rms_norm_eps), p.q, kc, vc);
  if (!p.generic_attn)
    (p.attn_tc ? attention_prefill_tc : attention_prefill)(dev_, p.q, kc, vc, KvType::F32, T, pos0, nh, nkv, hd, scale,
                                                           p.att);
  else k::attention(s, p.q, kc, vc, p.pos, T, nh, nkv, hd, scale, kSpans, p.aws, p.att);
  const bool gated_xq = k::sigmoid_gate(s, p.att, p.qg, T, nh, hd, p.glue ? p.xq : nullptr);
  gemm_shared({{&a.o, out}}, p.att, T, gated_xq ? nh * hd : -1);
}

void CudaEngine::prefill_gdn(const DGdn& g, CudaSeqState& st, int64_t li, int64_t T, float* out) {
  Prefill& p = *pf_;
  const int64_t C = cfg_.conv_dim(), K = cfg_.conv_kernel, Hk = cfg_.lin_k_heads, Dk = cfg_.lin_k_dim;
  const int64_t Hv = cfg_.lin_v_heads, Dv = cfg_.lin_v_dim;
  cudaStream_t s = dev_.stream();
  gemm_shared({{&g.qkv, p.raw}, {&g.z, p.z}, {&g.b, p.gb}, {&g.a, p.ga}}, p.xn, T, p.xn_cols);
  k::conv_silu_rows(s, st.conv(li), g.conv, p.raw, T, C, K, p.mixed);
  k::gdn_prepare(s, p.mixed, p.ga, p.gb, g.neg_a, g.dt_bias, T, Hk, Dk, Hv, Dv, p.gq, p.gk, p.gv, p.gg, p.gbeta);
  float* const S = st.S(li);
  switch (p.gdn_form) {
    case GdnPrefillForm::Chunked:
      gdn_prefill_chunked(dev_, S, p.gq, p.gk, p.gv, p.gg, p.gbeta, T, Hk, Hv, Dk, Dv, p.gdn_scratch, p.core);
      break;
    case GdnPrefillForm::C4:
      gdn_prefill_c4(dev_, S, p.gq, p.gk, p.gv, p.gg, p.gbeta, T, Hk, Hv, Dk, Dv, p.gdn_scratch, p.core);
      break;
    case GdnPrefillForm::Tc:
      gdn_prefill_tc(dev_, S, p.gq, p.gk, p.gv, p.gg, p.gbeta, T, Hk, Hv, Dk, Dv, p.gdn_scratch, p.core);
      break;
    case GdnPrefillForm::Lazy: gdn_prefill_lazy(dev_, S, p.gq, p.gk, p.gv, p.gg, p.gbeta, T, Hk, Hv, Dk, Dv, p.core); break;
    case GdnPrefillForm::Recurrent:
      if (Dk == 128 && Dv == 128) gdn_prefill(dev_, S, p.gq, p.gk, p.gv, p.gg, p.gbeta, T, Hk, Hv, Dk, Dv, p.core);
      else gdn_recurrent(S, p.gq, p.gk, p.gv, p.gg, p.gbeta, T, p.core);
      break;
  }
  const bool normed_xq = k::gated_rms_norm(s, p.core, p.z, g.norm, T, Hv, Dv, static_cast<float>(cfg_.rms_norm_eps),
                                           p.gout, p.glue ? p.xq : nullptr);
  gemm_shared({{&g.out, out}}, p.gout, T, normed_xq ? Hv * Dv : -1);
}

// out = down(silu(g) * u): a quantised down projection reads the product straight from the prepared X
// (qgemm_prepare_x_swiglu: the same bf16 values, without writing g); g is overwritten otherwise.
void CudaEngine::swiglu_gemm(const DMat& down, float* g, const float* u, int64_t T, float* out) {
  // MERE_CUDA_PREFILL_SWIGLU: fused (the default since session 18: engine_check 49/49, 27B prefill
  // +3.3% in an alternating A/B, bench/cuda/s18/h100-a) or separate (the SwiGLU launch, then the prepare)
  // (unset is -1: until session 21 this read `== 0`, so the fused form ran only when named — the
  // intended default was never the default)
  static const bool fused = env_choice("MERE_CUDA_PREFILL_SWIGLU", {"fused", "separate"}) != 1;
  if (fused && down.quantized() && down.count == 1 && down.cols % 64 == 0) {
    qgemm_prepare_x_swiglu(dev_, g, u, T, down.cols, pf_->xq);
    gemm_shared({{&down, out}}, nullptr, T, down.cols);
    return;
  }
  k::swiglu(dev_.stream(), g, u, T * down.cols);
  gemm_shared({{&down, out}}, g, T);
}

void CudaEngine::prefill_ffn(const DLayer& L, int64_t T, float* out) {
  Prefill& p = *pf_;
  cudaStream_t s = dev_.stream();
  const int64_t H = cfg_.hidden_size;
  if (!cfg_.is_moe) {
    gemm_shared({{&L.mlp.gate, p.f1}, {&L.mlp.up, p.f2}}, p.xn, T, p.xn_cols);
    swiglu_gemm(L.mlp.down, p.f1, p.f2, T, out);
    return;
  }
  const int64_t E = cfg_.num_experts, K = cfg_.experts_per_tok, Ie = L.experts.gate.rows, P = T * K;
  gemm_shared({{&L.router, p.rlog}, {&L.shared_gate, p.sg}, {&L.shared.gate, p.f1}, {&L.shared.up, p.f2}}, p.xn, T,
              p.xn_cols);
  k::moe_route(s, p.rlog, T, E, K, cfg_.norm_topk_prob, p.ridx, p.rw);
  swiglu_gemm(L.shared.down, p.f1, p.f2, T, p.sh);
  const DMlp& X = L.experts;
  const bool grouped = X.gate.quantized() && X.up.quantized() && X.down.quantized();
  if (!grouped) {  // float experts: the exact gemv over the selected experts, as the sliced path
    k::gemv(s, X.gate, p.xn, P, K, p.ridx, p.eg);
    k::gemv(s, X.up, p.xn, P, K, p.ridx, p.eu);
    k::swiglu(s, p.eg, p.eu, P * Ie);
    k::gemv(s, X.down, p.eg, P, 1, p.ridx, p.ey);
    k::moe_combine(s, p.ey, p.rw, p.sh, p.sg, T, K, H, out);
    return;
  }
  auto stacked = [](const DMat& W) {
    return QWeightView{static_cast<const uint32_t*>(W.data), W.scales, W.biases, W.rows * W.count, W.cols, W.bits};
  };
  const QWeightView Wg = stacked(X.gate), Wu = stacked(X.up), Wd = stacked(X.down);
  const MoePrefill mode = moe_prefill_mode();
  const bool wg = mode == MoePrefill::Wgmma && wgemm_moe_supported(dev_, Wg, Ie) && wgemm_moe_supported(dev_, Wu, Ie) &&
                  wgemm_moe_supported(dev_, Wd, H);
  const bool stream = !wg && mode != MoePrefill::Grouped && moe_stream_supported(Wg, Ie) &&
                      moe_stream_supported(Wu, Ie) && moe_stream_supported(Wd, H);
  moe_sort_pairs(dev_, p.ridx, T, K, E, p.offsets, p.row_token, p.pair_row);
  qgemm_prepare_x_gather(dev_, p.xn, p.row_token, P, H, H, p.xq);
  if (wg) {
    wgemm_moe_gate_up(dev_, Wg, Wu, E, Ie, p.xq, p.offsets, P, p.eg, Ie);
  } else if (stream) {
    moe_stream_gate_up(dev_, Wg, Wu, E, Ie, p.xq, p.offsets, P, p.eg, Ie, moe_stream_loads());
  } else {
    qgemm_grouped(dev_, Wg, E, Ie, p.xq, p.offsets, P, p.eg, Ie);
    qgemm_grouped(dev_, Wu, E, Ie, p.xq, p.offsets, P, p.eu, Ie);
    k::swiglu(s, p.eg, p.eu, P * Ie);
  }
  qgemm_prepare_x(dev_, p.eg, P, Ie, Ie, p.xq);
  if (wg) wgemm_moe(dev_, Wd, E, H, p.xq, p.offsets, P, p.ey, H);
  else if (stream) moe_stream(dev_, Wd, E, H, p.xq, p.offsets, P, p.ey, H, moe_stream_loads());
  else qgemm_grouped(dev_, Wd, E, H, p.xq, p.offsets, P, p.ey, H);
  // out = sigmoid(sg) * shared, then += sum_j w[t, j] * y[pair (t, j)] in slot order
  if (p.glue_combine) {
    moe_combine(dev_, p.ey, H, p.pair_row, p.rw, T, K, H, out, false, p.sh, p.sg);
    return;
  }
  k::moe_combine(s, nullptr, p.rw, p.sh, p.sg, T, 0, H, out);
  moe_combine(dev_, p.ey, H, p.pair_row, p.rw, T, K, H, out, true);
}

// Each residual add runs fused with the RMSNorm after it (add_rms_norm: bitwise add, then norm):
// x += add (when not null); xn = rmsnorm(x) * w, with xq = xn's bf16 X where the glue is fused.
void CudaEngine::prefill_norm(int64_t T, const float* add, const float* w) {
  Prefill& p = *pf_;
  cudaStream_t s = dev_.stream();
  const int64_t H = cfg_.hidden_size;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  p.xn_cols = p.glue && k::rms_norm_xq(s, p.x, add, w, T, H, eps, p.xn, p.xq) ? H : -1;
  if (p.xn_cols >= 0) return;
  if (add) k::add_rms_norm(s, p.x, add, w, T, H, eps, p.xn);
  else k::rms_norm(s, p.x, H, w, T, H, eps, p.xn, H);
}

void CudaEngine::prefill(CudaSeqState& st, const int32_t* ids, int64_t T, int64_t pos0, float* hidden, float* logits,
                         LogitsMode mode, int32_t* argmax_out) {
  alloc_prefill();
  Prefill& p = *pf_;
  cudaStream_t s = dev_.stream();
  const int64_t H = cfg_.hidden_size, V = cfg_.vocab_size;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  const bool all = logits && mode == LogitsMode::All, last = logits && mode == LogitsMode::Last;
  for (int64_t c0 = 0; c0 < T; c0 += p.rows) {
    const int64_t Tc = std::min(p.rows, T - c0);
    const bool final_chunk = c0 + Tc == T;
    const int32_t pc = static_cast<int32_t>(pos0 + c0);
    MERE_CUDA_CHECK(cudaMemcpyAsync(p.ids, ids + c0, static_cast<size_t>(Tc) * 4, cudaMemcpyHostToDevice, s));
    MERE_CUDA_CHECK(cudaMemcpyAsync(p.pos, &pc, 4, cudaMemcpyHostToDevice, s));
    k::embed(s, embed_, p.ids, Tc, p.x);
    if (p.blas) p.blas->begin_pass();
    auto norm = [&](const float* add, const float* w) { prefill_norm(Tc, add, w); };
    norm(nullptr, layers_.front().input_norm);
    for (size_t li = 0; li < layers_.size(); ++li) {
      const DLayer& L = layers_[li];
      if (L.kind == LayerKind::Full) prefill_attention(L.attn, st.k(L.index), st.v(L.index), Tc, pos0 + c0, p.o);
      else prefill_gdn(L.gdn, st, L.index, Tc, p.o);
      norm(p.o, L.post_norm);
      prefill_ffn(L, Tc, p.o);
      if (li + 1 < layers_.size()) norm(p.o, layers_[li + 1].input_norm);
      else k::add(s, p.x, p.o, Tc * H);
    }
    p.xn_cols = -1;
    const bool rows_all = hidden || all;
    if (rows_all) k::rms_norm(s, p.x, H, final_norm_, Tc, H, eps, p.h, H);
    else if (final_chunk && (last || argmax_out))
      k::rms_norm(s, p.x + (Tc - 1) * H, H, final_norm_, 1, H, eps, p.h + (Tc - 1) * H, H);
    if (hidden) download(hidden + c0 * H, p.h, static_cast<size_t>(Tc * H) * 4);
    if (all) {  // exact matvec lm_head, kRows rows at a time through the pass scratch
      for (int64_t r0 = 0; r0 < Tc; r0 += kRows) {
        const int64_t n = std::min(kRows, Tc - r0);
        linear(lm_head_, p.h + r0 * H, n, logits_);
        download(logits + (c0 + r0) * V, logits_, static_cast<size_t>(n * V) * 4);
      }
    }
    if (final_chunk && (last || argmax_out)) {
      linear(lm_head_, p.h + (Tc - 1) * H, 1, logits_);
      if (last) download(logits, logits_, static_cast<size_t>(V) * 4);
      if (argmax_out) {
        k::argmax(s, logits_, V, st.argmax(), 1, argmax_ws());
        download(argmax_out, st.argmax(), 4);
      }
    }
  }
}

// The MTP head over T >= kGemmRows confirmed rows on the prompt's path (draft_greedy's catch-up pass
// when it holds the prompt: head priming): head_pass's ops with the projections as the prompt's GEMMs,
// kPrefillChunk rows a pass, the head's KV rows at positions pos0.. of its cache. Leaves the last row's
// post-norm head hidden in h_ row 0. The GEMMs round differently from the 9-row passes, which moves
// the head's cache (so its drafts) by rounding only: verification decides every token.
void CudaEngine::head_prefill(CudaSeqState& st, const float* hidden, const int32_t* ids, int64_t T, int64_t pos0) {
  alloc_prefill();
  Prefill& p = *pf_;
  cudaStream_t s = dev_.stream();
  const int64_t H = cfg_.hidden_size;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  const DLayer& L = mtp_layer_;
  for (int64_t c0 = 0; c0 < T; c0 += p.rows) {
    const int64_t Tc = std::min(p.rows, T - c0);
    const int32_t pc = static_cast<int32_t>(pos0 + c0);
    MERE_CUDA_CHECK(cudaMemcpyAsync(p.ids, ids + c0, static_cast<size_t>(Tc) * 4, cudaMemcpyHostToDevice, s));
    MERE_CUDA_CHECK(cudaMemcpyAsync(p.pos, &pc, 4, cudaMemcpyHostToDevice, s));
    MERE_CUDA_CHECK(cudaMemcpyAsync(p.h, hidden + c0 * H, static_cast<size_t>(Tc * H) * 4, cudaMemcpyHostToDevice, s));
    k::embed(s, embed_, p.ids, Tc, p.x);
    if (p.blas) p.blas->begin_pass();
    // concat order: [norm_e(embedding of the next token) | norm_h(hidden)], then the fc projection
    k::rms_norm(s, p.x, H, mtp_norm_e_, Tc, H, eps, p.cat, 2 * H);
    k::rms_norm(s, p.h, H, mtp_norm_h_, Tc, H, eps, p.cat + H, 2 * H);
    gemm_shared({{&mtp_fc_, p.x}}, p.cat, Tc);
    prefill_norm(Tc, nullptr, L.input_norm);
    prefill_attention(L.attn, st.mtp_k(), st.mtp_v(), Tc, pos0 + c0, p.o);
    prefill_norm(Tc, p.o, L.post_norm);
    prefill_ffn(L, Tc, p.o);
    k::add(s, p.x, p.o, Tc * H);
    p.xn_cols = -1;
    if (c0 + Tc == T) k::rms_norm(s, p.x + (Tc - 1) * H, H, mtp_norm_, 1, H, eps, h_, H);
  }
}

size_t CudaEngine::prefill_scratch_bytes() const {
  return pf_ ? pf_->buf.bytes() + (pf_->blas ? pf_->blas->device_bytes() : 0) : 0;
}

}  // namespace mere::cuda
