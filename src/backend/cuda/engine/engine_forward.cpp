// CudaEngine forward / mtp_forward / replay_gdn: the wiring of Qwen35Model (src/model/qwen35.cpp)
// op for op, every op on the device. Every pass of <= 9 rows (decode steps, verification widths,
// traced or not) and the MTP head's passes run as graphs owned by the sequence, one per kind of
// pass: positions and ids are read on the device, so a graph is replayed pass after pass and
// captured again only when a KV cache moves.
#include <chrono>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <initializer_list>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/engine/engine.h"
#include "backend/cuda/kernel_trace.h"

#include "backend/cuda/engine/kernels.h"
#include "backend/cuda/env_choice.h"
#include "backend/cuda/gdn.h"
#include "backend/cuda/norm.h"

namespace mere::cuda {

CudaSeqState& CudaEngine::state(SequenceMemory& mem) {
  auto* st = dynamic_cast<CudaSeqState*>(mem.device());
  MERE_CHECK(st != nullptr, "cuda engine", "sequence memory does not belong to a CUDA model");
  return *st;
}

void CudaEngine::download(void* host, const void* src, size_t bytes) {
  MERE_CUDA_CHECK(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, dev_.stream()));
}

void CudaEngine::linear(const DMat& W, const float* x, int64_t T, float* y) {
  if (W.quantized() && W.count == 1) {
    const QMatvecOut o{W.qview(), y, false};
    qlinear(dev_, W.qview(), x, T, qws_, y, mv_shapes_.get(&o, 1, T));
  } else {
    k::gemv(dev_.stream(), W, x, T, 1, nullptr, y);
  }
}

int CudaEngine::common_bits(const DMat* const* ms, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!ms[i]->quantized() || ms[i]->count != 1 || ms[i]->bits != ms[0]->bits || ms[i]->cols != ms[0]->cols) return 0;
  return n ? ms[0]->bits : 0;
}

int CudaEngine::common_bits(std::initializer_list<std::pair<const DMat*, float*>> outs) {
  MERE_CHECK(outs.size() <= static_cast<size_t>(kMaxMultiMatrices), "cuda engine", "too many matrices over one input: ",
             outs.size());
  const DMat* ms[kMaxMultiMatrices];
  size_t n = 0;
  for (const auto& o : outs) ms[n++] = o.first;
  return common_bits(ms, n);
}

// Bit width of qmatvec's prepared input when every matrix of `ms` can run on one prepare produced by
// a fused producer (quantised, one matrix, same bits and width, SIMT kernel, fusion on); else 0.
int CudaEngine::fuse_bits(std::initializer_list<const DMat*> ms) const {
  return fuse_ ? common_bits(ms.begin(), ms.size()) : 0;
}

bool CudaEngine::src_in_launch(std::initializer_list<const DMat*> ms, const QMatvecSource& in, int64_t T) const {
  const bool norm = in.kind == QMatvecSource::Kind::RmsNorm;
  if (T != 1 || !(norm ? norm_mv_fused_ && kept(kAblNorm) : prep_mv_fused_ && kept(kAblPrep)) || !kept(kAblMv) ||
      fuse_bits(ms) != 4 || ms.size() > static_cast<size_t>(kMaxMultiMatrices))
    return false;
  QMatvecOut o[kMaxMultiMatrices];
  int n = 0;
  for (const DMat* m : ms) o[n++] = QMatvecOut{m->qview(), nullptr, false};
  return qmatvec_src_supported(o, n, in);
}

void CudaEngine::linear_shared(std::initializer_list<std::pair<const DMat*, float*>> outs, const float* x, int64_t T,
                               bool prepared, const QMatvecSource* norm) {
  const int bits = common_bits(outs);
  MERE_CHECK(bits || !prepared, "cuda engine", "a prepared input needs quantised matrices of one bit width");
  if (!kept(kAblMv)) return;
  if (norm != nullptr) {  // the input computed inside the launch (src_in_launch said yes)
    QMatvecOut o[kMaxMultiMatrices];
    int n = 0;
    for (const auto& [W, y] : outs) o[n++] = QMatvecOut{W->qview(), y, false};
    qmatvec_src_multi(dev_, o, n, *norm, mv_shapes_.get_register(o, n, T));
    return;
  }
  if (!bits) {
    for (const auto& [W, y] : outs) linear(*W, x, T, y);
    return;
  }
  if (!prepared) qmatvec_prepare(dev_, x, T, outs.begin()->first->cols, bits, qws_);
  if (fuse_) {  // one launch for all of them
    QMatvecOut o[kMaxMultiMatrices];
    int n = 0;
    for (const auto& [W, y] : outs) o[n++] = QMatvecOut{W->qview(), y, false};
    qmatvec_multi(dev_, o, n, qws_, T, mv_shapes_.get(o, n, T));
    return;
  }
  for (const auto& [W, y] : outs) {
    const QMatvecOut o{W->qview(), y, false};
    qmatvec(dev_, W->qview(), qws_, T, y, mv_shapes_.get(&o, 1, T));
  }
}

void CudaEngine::accumulate_prepared(const DMat& W, int64_t T, float* x, const QMatvecSource* src) {
  if (!kept(kAblMv)) return;
  const QMatvecOut o{W.qview(), x, true};
  if (src != nullptr) {
    qmatvec_src_multi(dev_, &o, 1, *src, mv_shapes_.get_register(&o, 1, T));
    return;
  }
  qmatvec_multi(dev_, &o, 1, qws_, T, mv_shapes_.get(&o, 1, T));
}

bool CudaEngine::attention_block(const DAttn& a, const float* xn, bool xn_prepared, int64_t T, float* kc, float* vc,
                                 const int32_t* pos, float* x, const QMatvecSource* norm_in) {
  const int64_t nh = cfg_.num_heads, nkv = cfg_.num_kv_heads, hd = cfg_.head_dim;
  cudaStream_t s = dev_.stream();
  linear_shared({{&a.q, qg_}, {&a.k, kk_}, {&a.v, vv_}}, xn, T, xn_prepared, norm_in);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  if (kept(kAblAttn)) {
    k::attn_prepare(s, qg_, kk_, vv_, a.q_norm, a.k_norm, pos, T, nh, nkv, hd, cfg_.rotary_dim, cfg_.rope_theta,
                    static_cast<float>(cfg_.rms_norm_eps), q_, kc, vc);
    if (attn_gqa_)
      k::attention_gqa(s, q_, kc, vc, pos, T, nh, nkv, hd, scale, kSpans, aws_, att_, attn_combine_v2_, &a.o_ahead);
    else k::attention(s, q_, kc, vc, pos, T, nh, nkv, hd, scale, kSpans, aws_, att_, attn_combine_v2_, &a.o_ahead);
  }
  if (const int ob = fuse_bits({&a.o})) {  // gate + prepare in one launch, o_proj added to x by its matvec
    const QMatvecSource gate{QMatvecSource::Kind::SigmoidGate, att_, nullptr, qg_, 0.0f, static_cast<int>(hd)};
    if (src_in_launch({&a.o}, gate, T)) {  // or the gate inside o_proj's launch
      accumulate_prepared(a.o, T, x, &gate);
      return true;
    }
    if (kept(kAblPrep)) k::sigmoid_gate_prep(s, att_, qg_, T, nh, hd, ob, qws_);
    accumulate_prepared(a.o, T, x);
    return true;
  }
  k::sigmoid_gate(s, att_, qg_, T, nh, hd);
  linear(a.o, att_, T, o_);
  return false;
}

bool CudaEngine::gdn_block(const DGdn& g, CudaSeqState& st, int64_t li, const float* xn, bool xn_prepared, int64_t T,
                           int64_t trace_row0, float* x, const QMatvecSource* norm_in) {
  const int64_t C = cfg_.conv_dim(), K = cfg_.conv_kernel, Hk = cfg_.lin_k_heads, Dk = cfg_.lin_k_dim;
  const int64_t Hv = cfg_.lin_v_heads, Dv = cfg_.lin_v_dim, kd = Hk * Dk, vd = Hv * Dv;
  cudaStream_t s = dev_.stream();
  linear_shared({{&g.qkv, raw_}, {&g.z, z_}, {&g.b, gb_}, {&g.a, ga_}}, xn, T, xn_prepared, norm_in);
  const bool one_launch = fuse_ && k::conv_gdn_prepare_supported(Hk, Dk, Hv, Dv, K);
  k::GdnTraceOut tr;
  if (one_launch && trace_row0 >= 0) {
    const CudaSeqState::TraceRows rows = st.trace(li);
    tr = k::GdnTraceOut{rows.raw + trace_row0 * C, rows.q + trace_row0 * kd, rows.k + trace_row0 * kd,
                        rows.v + trace_row0 * vd, rows.g + trace_row0 * Hv, rows.beta + trace_row0 * Hv};
  }
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  const int ob = Dv % 64 == 0 ? fuse_bits({&g.out}) : 0;
  if (gdn_mid_grid_ > 0 && T == 1 && one_launch && ob) {  // MERE_CUDA_GDN_BLOCK=on: conv to prepare, one launch
    k::gdn_mid(s, gdn_mid_grid_, k::GdnMidWeights{g.conv, g.neg_a, g.dt_bias, g.norm},
               k::GdnMidIo{st.conv(li), raw_, ga_, gb_, gq_, gk_, gv_, gg_, gbeta_, st.S(li), core_, z_, gout_, tr}, K,
               Hk, Hv, eps, ob, qws_, gdn_bar_);
    accumulate_prepared(g.out, T, x);
    return true;
  }
  if (one_launch && kept(kAblGdn)) {  // one launch, the same bits; a traced pass's copies are stored by it too
    k::conv_gdn_prepare(s, st.conv(li), g.conv, raw_, T, K, ga_, gb_, g.neg_a, g.dt_bias, Hk, Dk, Hv, Dv, gq_, gk_,
                        gv_, gg_, gbeta_, tr,
                        conv_mode_ == ConvMode::Tokens || (conv_mode_ == ConvMode::Width && T > 1));
  } else if (kept(kAblGdn)) {
    k::conv_silu(s, st.conv(li), g.conv, raw_, T, C, K, mixed_);
    k::gdn_prepare(s, mixed_, ga_, gb_, g.neg_a, g.dt_bias, T, Hk, Dk, Hv, Dv, gq_, gk_, gv_, gg_, gbeta_);
  }
  if (trace_row0 >= 0 && !one_launch) {
    const CudaSeqState::TraceRows tr = st.trace(li);
    auto cp = [&](float* dst, const float* src, int64_t w) {
      MERE_CUDA_CHECK(cudaMemcpyAsync(dst + trace_row0 * w, src, static_cast<size_t>(T * w) * 4,
                                      cudaMemcpyDeviceToDevice, s));
    };
    cp(tr.raw, raw_, C);
    cp(tr.q, gq_, kd);
    cp(tr.k, gk_, kd);
    cp(tr.v, gv_, vd);
    cp(tr.g, gg_, Hv);
    cp(tr.beta, gbeta_, Hv);
  }
  if (ob && step_norm_fused_ && k::gdn_step_norm_supported(Hk, Dk, Hv, Dv)) {  // step + norm + prepare, one launch
    k::gdn_step_norm_prep(s, st.S(li), gq_, gk_, gv_, gg_, gbeta_, T, Hk, Hv, Dk, Dv, core_, z_, g.norm, eps, gout_,
                          ob, qws_, gdn_done_);
    accumulate_prepared(g.out, T, x);
    return true;
  }
  if (kept(kAblGdn)) gdn_recurrent(st.S(li), gq_, gk_, gv_, gg_, gbeta_, T, core_, &g.out_ahead);
  if (ob) {  // norm + prepare, out_proj added to x
    const QMatvecSource gn{QMatvecSource::Kind::GatedRmsNorm, core_, g.norm, z_, eps, static_cast<int>(Dv)};
    if (src_in_launch({&g.out}, gn, T)) {  // or the norm inside out_proj's launch
      accumulate_prepared(g.out, T, x, &gn);
      return true;
    }
    if (kept(kAblPrep)) k::gated_rms_norm_prep(s, core_, z_, g.norm, T, Hv, Dv, eps, gout_, ob, qws_);
    accumulate_prepared(g.out, T, x);
    return true;
  }
  k::gated_rms_norm(s, core_, z_, g.norm, T, Hv, Dv, eps, gout_);
  linear(g.out, gout_, T, o_);
  return false;
}

namespace {
k::MoeFusedWeights moe_fused_weights(const DLayer& L) {
  return k::MoeFusedWeights{L.experts.gate, L.experts.up, L.experts.down, L.shared.gate, L.shared.up, L.shared.down};
}
}  // namespace

// x += ffn(xn). MoE with 4/8-bit experts: router + shared-expert gate (one prepare), routing (a
// warp per token; with MERE_CUDA_MOE_ROUTE=fused inside the gate/up launch), one launch for
// gate+up+SwiGLU of the K experts and the shared expert, one for down + combine + residual add
// (k_moe.cu); other formats take the generic gathered matvec.
void CudaEngine::ffn_block(const DLayer& L, const float* xn, bool xn_prepared, int64_t T, float* x, bool routed,
                           const QMatvecSource* norm_in) {
  cudaStream_t s = dev_.stream();
  const int64_t H = cfg_.hidden_size;
  MERE_CHECK(norm_in == nullptr || !cfg_.is_moe, "cuda engine", "the MoE block reads the normalised row: no norm inside a launch");
  if (!cfg_.is_moe) {
    linear_shared({{&L.mlp.gate, f1_}, {&L.mlp.up, f2_}}, xn, T, xn_prepared, norm_in);
    if (const int db = fuse_bits({&L.mlp.down})) {  // SwiGLU + prepare in one launch, down added to x
      if (kept(kAblPrep)) k::swiglu_prep(s, f1_, f2_, T, L.mlp.gate.rows, db, qws_);
      accumulate_prepared(L.mlp.down, T, x);
      return;
    }
    k::swiglu(s, f1_, f2_, T * L.mlp.gate.rows);
    linear(L.mlp.down, f1_, T, o_);
    k::add(s, x, o_, T * H);
    return;
  }
  const int64_t E = cfg_.num_experts, K = cfg_.experts_per_tok, Ie = L.experts.gate.rows;
  if (!routed) linear_shared({{&L.router, rlog_}, {&L.shared_gate, sg_}}, xn, T, xn_prepared);
  const bool fused = k::moe_fused_supported(L.experts.gate, L.experts.up, L.experts.down, L.shared.gate,
                                            L.shared.up, L.shared.down, K);
  if (!kept(kAblMoe)) return;
  if (fused && moe_route_fused_ && k::moe_route_gate_up_supported(L.experts.gate, E, K)) {
    if (T == 1 && moe_fused_grid_ > 0) {  // MERE_CUDA_MOE_FUSED=on: routing to residual, one launch
      k::moe_gate_up_down(s, moe_fused_grid_, moe_fused_weights(L), rlog_, E, cfg_.norm_topk_prob, xn, sg_, K, x,
                          k::MoeBlockScratch{rlog_, sg_, ridx_, rw_, eg_, f1_, moe_fused_bar_});
      return;
    }
    k::moe_route_gate_up(s, L.experts.gate, L.experts.up, L.shared.gate, L.shared.up, rlog_, E, cfg_.norm_topk_prob,
                         ridx_, rw_, xn, T, K, eg_, f1_, moe_sets_ & kMoeSetsGateUp, &L.experts.down, &L.shared.down,
                         L.experts.gate.bits == 4 ? moe_down_l2_ : 0);
    k::moe_down(s, L.experts.down, L.shared.down, ridx_, rw_, sg_, eg_, f1_, T, K, true, x, moe_sets_ & kMoeSetsDown,
                &L.next_in);
    return;
  }
  k::moe_route(s, rlog_, T, E, K, cfg_.norm_topk_prob, ridx_, rw_);
  if (fused) {
    k::moe_gate_up(s, L.experts.gate, L.experts.up, L.shared.gate, L.shared.up, ridx_, xn, T, K, eg_, f1_,
                   moe_sets_ & kMoeSetsGateUp);
    k::moe_down(s, L.experts.down, L.shared.down, ridx_, rw_, sg_, eg_, f1_, T, K, true, x, moe_sets_ & kMoeSetsDown,
                &L.next_in);
    return;
  }
  k::gemv(s, L.experts.gate, xn, T * K, K, ridx_, eg_);
  k::gemv(s, L.experts.up, xn, T * K, K, ridx_, eu_);
  k::swiglu(s, eg_, eu_, T * K * Ie);
  k::gemv(s, L.experts.down, eg_, T * K, 1, ridx_, ey_);
  linear_shared({{&L.shared.gate, f1_}, {&L.shared.up, f2_}}, xn, T);
  k::swiglu(s, f1_, f2_, T * L.shared.gate.rows);
  linear(L.shared.down, f1_, T, sh_);
  k::moe_combine(s, ey_, rw_, sh_, sg_, T, K, H, o_);
  k::add(s, x, o_, T * H);
}

namespace {
k::MoeBlockWeights moe_block_weights(const DLayer& L) {
  return k::MoeBlockWeights{L.post_norm,    L.router,      L.shared_gate, L.experts.gate, L.experts.up,
                            L.experts.down, L.shared.gate, L.shared.up,   L.shared.down};
}
}  // namespace

void CudaEngine::init_moe_block() {
  if (env_choice("MERE_CUDA_MOE_BLOCK", {"off", "on"}) != 1 || !cfg_.is_moe) return;
  const int64_t E = cfg_.num_experts, K = cfg_.experts_per_tok;
  MERE_CHECK(fuse_, "MERE_CUDA_MOE_BLOCK=on", "the one-launch MoE block needs the fused producers (MERE_CUDA_FUSE)");
  int grid = -1;
  auto check = [&](const DLayer& L) {  // every MoE layer (the MTP head's too) on the same grid
    const int g = k::moe_block_grid(moe_block_weights(L), E, K, dev_.sm_count());
    MERE_CHECK(g > 0 && (grid < 0 || g == grid) && fuse_bits({&L.router, &L.shared_gate}) != 0,
               "MERE_CUDA_MOE_BLOCK=on", "the one-launch MoE block does not take this model's MoE layers (",
               E, " experts, top-", K, ", ", L.experts.gate.bits, "-bit experts, a ", L.router.bits,
               "-bit router, hidden ", cfg_.hidden_size, ")");
    grid = g;
  };
  for (const DLayer& L : layers_) check(L);
  if (has_mtp_) check(mtp_layer_);
  moe_block_grid_ = grid;
}

void CudaEngine::init_moe_fused() {
  if (env_choice("MERE_CUDA_MOE_FUSED", {"off", "on"}) != 1 || !cfg_.is_moe) return;
  MERE_CHECK(moe_route_fused_, "MERE_CUDA_MOE_FUSED=on", "the one-launch experts route inside the launch: it needs "
             "MERE_CUDA_MOE_ROUTE=fused");
  const int64_t E = cfg_.num_experts, K = cfg_.experts_per_tok;
  int grid = -1;
  auto check = [&](const DLayer& L) {  // every MoE layer (the MTP head's too) on the same grid
    const int g = k::moe_gate_up_down_grid(moe_fused_weights(L), E, K, dev_.sm_count());
    MERE_CHECK(g > 0 && (grid < 0 || g == grid), "MERE_CUDA_MOE_FUSED=on",
               "the one-launch experts do not take this model's MoE layers (", E, " experts, top-", K, ", ",
               L.experts.gate.bits, "-bit experts, hidden ", cfg_.hidden_size, ", expert width ", L.experts.gate.rows,
               ", shared width ", L.shared.gate.rows, ") or their grid is not resident at once on this GPU");
    grid = g;
  };
  for (const DLayer& L : layers_) check(L);
  if (has_mtp_) check(mtp_layer_);
  moe_fused_grid_ = grid;
}

void CudaEngine::init_gdn_mid() {
  if (env_choice("MERE_CUDA_GDN_BLOCK", {"off", "on"}) != 1) return;
  MERE_CHECK(fuse_, "MERE_CUDA_GDN_BLOCK=on", "the one-launch GDN middle needs the fused producers (MERE_CUDA_FUSE)");
  const int64_t Hk = cfg_.lin_k_heads, Dk = cfg_.lin_k_dim, Hv = cfg_.lin_v_heads, Dv = cfg_.lin_v_dim;
  int bits = 0;
  for (const DLayer& L : layers_)
    if (L.kind == LayerKind::Linear) {
      const int b = fuse_bits({&L.gdn.out});
      MERE_CHECK(b != 0 && (bits == 0 || b == bits), "MERE_CUDA_GDN_BLOCK=on",
                 "the one-launch GDN middle needs every out_proj quantised at one bit width (4 or 8)");
      bits = b;
    }
  if (bits == 0) return;  // no linear-attention layers
  const int grid = k::gdn_mid_grid(Hk, Dk, Hv, Dv, cfg_.conv_kernel, bits, dev_.sm_count());
  MERE_CHECK(grid > 0 && k::conv_gdn_prepare_supported(Hk, Dk, Hv, Dv, cfg_.conv_kernel), "MERE_CUDA_GDN_BLOCK=on",
             "the one-launch GDN middle does not take this model's linear attention (", Hk, " key heads of ", Dk,
             ", ", Hv, " value heads of ", Dv, ", conv width ", cfg_.conv_kernel, "; it needs heads of 128)");
  gdn_mid_grid_ = grid;
}

// With fusion (MERE_CUDA_FUSE, default on with the SIMT matvec): each norm also prepares the next
// projections' input, the projections sharing it run as one launch, and the output projections add
// into x in their epilogue, and the GDN conv runs with the q/k/v/gate preparation (conv_gdn_prepare);
// MERE_CUDA_FUSE=0 launches the unfused sequence. Same bits either way.
void CudaEngine::decoder_layer(const DLayer& L, CudaSeqState& st, float* x, int64_t T, float* kc, float* vc,
                               const int32_t* pos, int64_t trace_row0) {
  const int64_t H = cfg_.hidden_size;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  cudaStream_t s = dev_.stream();
  const bool full = L.kind == LayerKind::Full;
  const int in_bits = full ? fuse_bits({&L.attn.q, &L.attn.k, &L.attn.v})
                           : fuse_bits({&L.gdn.qkv, &L.gdn.z, &L.gdn.b, &L.gdn.a});
  const QMatvecSource in_norm{QMatvecSource::Kind::RmsNorm, x, L.input_norm, nullptr, eps, 0};
  const bool in_inside = in_bits && (full ? src_in_launch({&L.attn.q, &L.attn.k, &L.attn.v}, in_norm, T)
                                          : src_in_launch({&L.gdn.qkv, &L.gdn.z, &L.gdn.b, &L.gdn.a}, in_norm, T));
  if (!in_bits) k::rms_norm(s, x, H, L.input_norm, T, H, eps, xn_, H);
  else if (!in_inside && kept(kAblNorm)) k::rms_norm_prep(s, x, nullptr, L.input_norm, T, H, eps, xn_, in_bits, qws_);
  const QMatvecSource* nin = in_inside ? &in_norm : nullptr;
  const bool added = full ? attention_block(L.attn, xn_, in_bits != 0, T, kc, vc, pos, x, nin)
                          : gdn_block(L.gdn, st, L.index, xn_, in_bits != 0, T, trace_row0, x, nin);
  const int ffn_bits = cfg_.is_moe ? fuse_bits({&L.router, &L.shared_gate}) : fuse_bits({&L.mlp.gate, &L.mlp.up});
  if (moe_block_grid_ > 0 && T == 1 && ffn_bits && added) {  // MERE_CUDA_MOE_BLOCK=on: norm to residual, one launch
    k::moe_block(s, moe_block_grid_, moe_block_weights(L), eps, cfg_.num_experts, cfg_.experts_per_tok,
                 cfg_.norm_topk_prob, x, k::MoeBlockScratch{rlog_, sg_, ridx_, rw_, eg_, f1_, moe_bar_});
    return;
  }
  if (ffn_bits && cfg_.is_moe && added && moe_norm_fused_ && kept(kAblNorm) && kept(kAblMv) &&
      k::moe_norm_router_supported(L.router, L.shared_gate, x, L.post_norm, xn_)) {  // norm + router, one launch
    k::moe_norm_router(s, x, L.post_norm, eps, L.router, L.shared_gate, T, xn_, rlog_, sg_, moe_sets_ & kMoeSetsRouter);
    ffn_block(L, xn_, true, T, x, true);
    return;
  }
  const QMatvecSource post_norm{QMatvecSource::Kind::RmsNorm, x, L.post_norm, nullptr, eps, 0};
  if (ffn_bits && !cfg_.is_moe && added && src_in_launch({&L.mlp.gate, &L.mlp.up}, post_norm, T)) {
    ffn_block(L, xn_, true, T, x, false, &post_norm);  // dense: the norm inside gate + up's launch
    return;
  }
  if (ffn_bits) {
    if (kept(kAblNorm)) k::rms_norm_prep(s, x, added ? nullptr : o_, L.post_norm, T, H, eps, xn_, ffn_bits, qws_);
  } else if (added) {
    k::rms_norm(s, x, H, L.post_norm, T, H, eps, xn_, H);
  } else {
    k::add_rms_norm(s, x, o_, L.post_norm, T, H, eps, xn_);  // x += o; xn = rmsnorm(x) * w
  }
  ffn_block(L, xn_, ffn_bits != 0, T, x);
}

void CudaEngine::main_pass(CudaSeqState& st, int64_t T, int64_t trace_row0, bool want_all, bool last_logits,
                           bool want_argmax, bool want_row_argmax) {
  const bool all_logits = want_all || want_row_argmax;  // every row's logits, on the device
  const int64_t H = cfg_.hidden_size, V = cfg_.vocab_size;
  cudaStream_t s = dev_.stream();
  k::embed(s, embed_, st.ids(), T, x_);
  for (const DLayer& L : layers_) {
    const bool full = L.kind == LayerKind::Full;
    decoder_layer(L, st, x_, T, full ? st.k(L.index) : nullptr, full ? st.v(L.index) : nullptr, st.pos(),
                  trace_row0);
  }
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  const int head_bits = (all_logits || T == 1) && (last_logits || want_argmax || all_logits) ? fuse_bits({&lm_head_}) : 0;
  if (head_bits) {  // the final norm prepares the lm_head's input (every row is wanted)
    k::rms_norm_prep(s, x_, nullptr, final_norm_, T, H, eps, h_, head_bits, qws_);
    const QMatvecOut o{lm_head_.qview(), logits_, false};
    qmatvec(dev_, lm_head_.qview(), qws_, T, logits_, mv_shapes_.get(&o, 1, T));
  } else {
    k::rms_norm(s, x_, H, final_norm_, T, H, eps, h_, H);
    if (all_logits) linear(lm_head_, h_, T, logits_);
    else if (last_logits || want_argmax) linear(lm_head_, h_ + (T - 1) * H, 1, logits_ + (T - 1) * V);
  }
  if (want_argmax) k::argmax(s, logits_ + (T - 1) * V, V, st.argmax(), 1, argmax_ws());
  if (want_row_argmax) k::argmax(s, logits_, V, st.argmax(), T, argmax_ws());
  if (ablate_ && (want_argmax || want_row_argmax))  // a meaningless pass's ids: keep the next embedding in range
    MERE_CUDA_CHECK(cudaMemsetAsync(st.argmax(), 0, static_cast<size_t>(T) * 4, s));
}

namespace {
// An NVTX range around each forward call, named by its width ("mere.forward T=8", "mere.forward
// prompt"), so a profiler can take exactly the verification passes of one width
// (`ncu --nvtx --nvtx-include "mere.forward T=8/"`, tools/cuda/engine_run.sh ncuv27). Costs nothing
// without a profiler attached.
class ForwardRange {
 public:
  explicit ForwardRange(int64_t T) {
    static const char* const names[] = {"mere.forward T=0", "mere.forward T=1", "mere.forward T=2", "mere.forward T=3",
                                        "mere.forward T=4", "mere.forward T=5", "mere.forward T=6", "mere.forward T=7",
                                        "mere.forward T=8", "mere.forward T=9"};
    nvtxRangePushA(T >= 0 && T <= 9 ? names[T] : "mere.forward prompt");
  }
  ~ForwardRange() { nvtxRangePop(); }
  ForwardRange(const ForwardRange&) = delete;
  ForwardRange& operator=(const ForwardRange&) = delete;
};
}  // namespace

void CudaEngine::forward(const int32_t* ids, int64_t T, SequenceMemory& mem, float* hidden, float* logits,
                         LogitsMode mode, const ForwardOptions& opt) {
  const ForwardRange range(T);
  CudaSeqState& st = state(mem);
  DeviceGuard guard(dev_.ordinal());
  cudaStream_t s = dev_.stream();
  const int64_t H = cfg_.hidden_size, V = cfg_.vocab_size, pos0 = mem.length();
  MERE_CHECK(opt.gdn != ForwardOptions::Gdn::Chunked, "cuda forward",
             "the chunked GatedDeltaNet algorithm is not implemented on CUDA (the recurrent one runs every width)");
  if (opt.trace) {
    MERE_CHECK(T <= kMaxTraceRows, "forward", "GatedDeltaNet tracing needs the recurrent algorithm (T <= ",
               kMaxTraceRows, ")");
    opt.trace->layers.clear();
    opt.trace->rows = T;
    st.traced_rows = T;
    st.trace(0);  // allocates the trace buffers now: never inside a graph capture
  }
  st.ensure_kv(pos0 + T, false);
  if (T >= kGemmRows && !opt.trace && prefill_gemm_enabled()) {  // tensor-core prefill (engine_prefill.cpp)
    prefill(st, ids, T, pos0, hidden, logits, mode, opt.argmax);
    dev_.synchronize("cuda forward (prefill)");
    mem.advance(T);
    return;
  }
  const bool all = logits && mode == LogitsMode::All, last = logits && mode == LogitsMode::Last;
  for (int64_t c0 = 0; c0 < T; c0 += kRows) {
    const int64_t Tc = std::min(kRows, T - c0);
    const bool final_chunk = c0 + Tc == T;
    const int32_t p = static_cast<int32_t>(pos0 + c0);
    MERE_CUDA_CHECK(cudaMemcpyAsync(st.ids(), ids + c0, static_cast<size_t>(Tc) * 4, cudaMemcpyHostToDevice, s));
    MERE_CUDA_CHECK(cudaMemcpyAsync(st.pos(), &p, 4, cudaMemcpyHostToDevice, s));
    const bool want_last = final_chunk && last, want_arg = final_chunk && opt.argmax != nullptr;
    const bool row_arg = opt.row_argmax != nullptr;  // T <= kRows (Qwen35Model::forward checks)
    if (T == 1 && !opt.trace) {
      step1(st, all, want_last, want_arg, row_arg);
    } else {  // verification widths (<= 9 rows, traced or not) are captured too; longer calls run in slices
      trace_pass(Tc);
      const int64_t row0 = opt.trace ? c0 : -1;
      run_captured(st, pass_key(st, Tc, opt.trace != nullptr, all, want_last, want_arg, false, row_arg),
                   graph_mode_ >= 2 && T <= kRows,
                   [&] { main_pass(st, Tc, row0, all, want_last, want_arg, row_arg); });
    }
    if (hidden) download(hidden + c0 * H, h_, static_cast<size_t>(Tc * H) * 4);
    if (all) download(logits + c0 * V, logits_, static_cast<size_t>(Tc * V) * 4);
    if (want_last) download(logits, logits_ + (Tc - 1) * V, static_cast<size_t>(V) * 4);
    if (want_arg) download(opt.argmax, st.argmax(), 4);
    if (row_arg) download(opt.row_argmax + c0, st.argmax(), static_cast<size_t>(Tc) * 4);
  }
  dev_.synchronize("cuda forward");
  mem.advance(T);
}

// Key of a captured pass: rows, trace, which outputs, main model or MTP head, cache generation.
uint64_t CudaEngine::pass_key(const CudaSeqState& st, int64_t T, bool trace, bool all, bool last, bool arg, bool mtp,
                              bool row_arg) {
  return static_cast<uint64_t>(T) | (trace ? 16u : 0u) | (all ? 32u : 0u) | (last ? 64u : 0u) | (arg ? 128u : 0u) |
         (mtp ? 256u : 0u) | (row_arg ? 512u : 0u) | (st.kv_generation << 16);
}

// Runs `pass` (device work only: no host copies, allocations or waits inside) as a graph owned by
// the sequence, captured on the graph_after_-th use of its kind (the key without the cache
// generation: a kind seen before a cache grew is captured again at once); a captured pass replays
// bitwise the same kernels with the same arguments (positions and ids are read from device memory),
// and the uses before the capture launch the same kernels one by one. `allowed` false (graphs off
// for the engine, MERE_CUDA_GRAPH, or for the request, MERERUN_Q35_SCOPED_COMPILE=0): the kernels
// are always launched one by one.
void CudaEngine::run_captured(CudaSeqState& st, uint64_t key, bool allowed, const std::function<void()>& pass) {
  if (!allowed || !st.graphs) {
    pass();
    return;
  }
  cudaStream_t s = dev_.stream();
  cudaGraphExec_t exec = st.find_graph(key);
  if (!exec && st.count_use(key & CudaSeqState::kKindBits) < graph_after_) {
    pass();  // a kind used once or rarely in a request costs less launched than captured
    ++st.launched_before_capture;
    return;
  }
  if (!exec) {
    const auto t0 = std::chrono::steady_clock::now();
    cudaGraph_t g = nullptr;
    MERE_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    try {
      pass();
    } catch (...) {
      cudaStreamEndCapture(s, &g);
      if (g) cudaGraphDestroy(g);
      throw;
    }
    MERE_CUDA_CHECK(cudaStreamEndCapture(s, &g));
    const cudaError_t err = cudaGraphInstantiate(&exec, g, 0);
    cudaGraphDestroy(g);
    MERE_CUDA_CHECK(err);
    st.graphs_cache.emplace_back(key, exec);
    ++st.captures;
    st.capture_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  MERE_CUDA_CHECK(cudaGraphLaunch(exec, s));
}

void CudaEngine::trace_pass(int64_t rows) {
#if defined(MERE_CUDA_TRACE)
  // trace builds: in-sequence kernel times of some passes (kernel_trace.h)
  if (!trace_out_path().empty() && trace_counts_rows(rows)) {
    MERE_CHECK(graph_mode_ == 0, "MERE_CUDA_TRACE_OUT",
               "the kernel trace needs MERE_CUDA_GRAPH=0 (a graph replay launches nothing)");
    trace_step(traced_steps_++);
  }
#else
  (void)rows;
#endif
}

// One T = 1 main pass (decode step), captured unless graphs are off.
void CudaEngine::step1(CudaSeqState& st, bool all, bool want_last, bool want_arg, bool row_arg) {
  trace_pass(1);
  run_captured(st, pass_key(st, 1, false, all, want_last, want_arg, false, row_arg), graph_mode_ >= 1,
               [&] { main_pass(st, 1, -1, all, want_last, want_arg, row_arg); });
}

// Pipelined greedy step (mtp.md §4): inputs staged through the slot's pinned memory (a pageable
// source could make the copy wait for the stream), the step, then the argmax copied back into the
// slot and the slot's event recorded. Nothing here waits for the device.
void CudaEngine::submit_greedy(SequenceMemory& mem, const int32_t* host_id) {
  CudaSeqState& st = state(mem);
  MERE_CHECK(st.greedy_submitted - st.greedy_collected < kMaxGreedyInFlight, "cuda submit_greedy",
             "too many steps in flight: collect one first (at most ", kMaxGreedyInFlight, ")");
  DeviceGuard guard(dev_.ordinal());
  cudaStream_t s = dev_.stream();
  const int64_t pos0 = mem.length();
  st.ensure_kv(pos0 + 1, false);
  const int64_t n = st.greedy_submitted;
  CudaSeqState::GreedySlot* slot = st.greedy_slot(n);
  slot->pos_in = static_cast<int32_t>(pos0);
  if (host_id) {
    slot->id_in = *host_id;
    MERE_CUDA_CHECK(cudaMemcpyAsync(st.ids(), &slot->id_in, 4, cudaMemcpyHostToDevice, s));
  } else {
    MERE_CUDA_CHECK(cudaMemcpyAsync(st.ids(), st.argmax(), 4, cudaMemcpyDeviceToDevice, s));
  }
  MERE_CUDA_CHECK(cudaMemcpyAsync(st.pos(), &slot->pos_in, 4, cudaMemcpyHostToDevice, s));
  step1(st, false, false, true);
  MERE_CUDA_CHECK(cudaMemcpyAsync(&slot->out, st.argmax(), 4, cudaMemcpyDeviceToHost, s));
  MERE_CUDA_CHECK(cudaEventRecord(st.greedy_event(n), s));
  ++st.greedy_submitted;
  mem.advance(1);
}

int32_t CudaEngine::collect_greedy(SequenceMemory& mem) {
  CudaSeqState& st = state(mem);
  MERE_CHECK(st.greedy_collected < st.greedy_submitted, "cuda collect_greedy", "no step in flight");
  DeviceGuard guard(dev_.ordinal());
  const int64_t n = st.greedy_collected++;
  const cudaError_t err = cudaEventSynchronize(st.greedy_event(n));
  MERE_CHECK(err == cudaSuccess, "cuda collect_greedy", "the device failed while decoding: ", cudaGetErrorString(err));
  return st.greedy_slot(n)->out;
}

void CudaEngine::mtp_forward(const float* hidden, const int32_t* ids, int64_t T, SequenceMemory& mem,
                             float* mtp_hidden, float* logits, LogitsMode mode) {
  MERE_CHECK(has_mtp_, "mtp", "this checkpoint has no MTP weights (mtp.*)");
  CudaSeqState& st = state(mem);
  DeviceGuard guard(dev_.ordinal());
  const int64_t H = cfg_.hidden_size, V = cfg_.vocab_size, pos0 = mem.mtp_length();
  st.ensure_kv(pos0 + T, true);
  if (!mtp_hidden && !logits && head_rows_on_gemms(T)) {
    // rows only written to the head's cache (the host drafting loop's priming): the prompt's GEMMs
    head_prefill(st, hidden, ids, T, pos0);
    dev_.synchronize("cuda mtp_forward");
    mem.advance_mtp(T);
    return;
  }
  for (int64_t c0 = 0; c0 < T; c0 += kRows) {
    const int64_t Tc = std::min(kRows, T - c0);
    upload_head_rows(st, hidden + c0 * H, ids + c0, Tc, pos0 + c0);
    const bool all = logits && mode == LogitsMode::All, last = logits && mode == LogitsMode::Last && c0 + Tc == T;
    run_captured(st, pass_key(st, Tc, false, all, last, false, true), graph_mode_ >= 2,
                 [&] { head_pass(st, Tc, all, last, false); });
    if (mtp_hidden) download(mtp_hidden + c0 * H, h_, static_cast<size_t>(Tc * H) * 4);
    if (all) download(logits + c0 * V, logits_, static_cast<size_t>(Tc * V) * 4);
    if (last) download(logits, logits_, static_cast<size_t>(V) * 4);
  }
  dev_.synchronize("cuda mtp_forward");
  mem.advance_mtp(T);
}

void CudaEngine::upload_head_rows(CudaSeqState& st, const float* hidden, const int32_t* ids, int64_t T, int64_t pos) {
  cudaStream_t s = dev_.stream();
  const int32_t p = static_cast<int32_t>(pos);
  MERE_CUDA_CHECK(cudaMemcpyAsync(st.ids(), ids, static_cast<size_t>(T) * 4, cudaMemcpyHostToDevice, s));
  MERE_CUDA_CHECK(cudaMemcpyAsync(st.pos() + 1, &p, 4, cudaMemcpyHostToDevice, s));
  MERE_CUDA_CHECK(
      cudaMemcpyAsync(hin_, hidden, static_cast<size_t>(T * cfg_.hidden_size) * 4, cudaMemcpyHostToDevice, s));
}

void CudaEngine::head_pass(CudaSeqState& st, int64_t T, bool all, bool last, bool arg) {
  cudaStream_t s = dev_.stream();
  const int64_t H = cfg_.hidden_size, V = cfg_.vocab_size;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  k::embed(s, embed_, st.ids(), T, xn_);
  // concat order: [norm_e(embedding of the next token) | norm_h(hidden)]
  k::rms_norm(s, xn_, H, mtp_norm_e_, T, H, eps, cat_, 2 * H);
  k::rms_norm(s, hin_, H, mtp_norm_h_, T, H, eps, cat_ + H, 2 * H);
  linear(mtp_fc_, cat_, T, x_);
  decoder_layer(mtp_layer_, st, x_, T, st.mtp_k(), st.mtp_v(), st.pos() + 1, -1);
  k::rms_norm(s, x_, H, mtp_norm_, T, H, eps, h_, H);
  if (all) linear(lm_head_, h_, T, logits_);
  if (last) linear(lm_head_, h_ + (T - 1) * H, 1, logits_);
  if (last && arg) k::argmax(s, logits_, V, st.argmax(), 1, argmax_ws());
}

// The host loop's drafting (speculative.cpp: mtp_forward, then each draft the argmax of the head's
// last logits row, fed back with the head's hidden) with the argmax and the feedback on the device:
// the catch-up pass over the confirmed rows, then d - 1 chained T = 1 head passes whose id and hidden
// are copied on the device from the previous pass's argmax and last hidden row. Each pass is the
// same captured kind as a head pass with its argmax (graphs as everywhere else).
void CudaEngine::draft_greedy(const float* hidden, const int32_t* ids, int64_t n, int d, SequenceMemory& mem,
                              int32_t* drafts) {
  MERE_CHECK(has_mtp_, "mtp", "this checkpoint has no MTP weights (mtp.*)");
  MERE_CHECK(n >= 1 && d >= 1 && d <= 8, "cuda draft_greedy",
             "expected n >= 1 confirmed rows and 1..8 drafts, got n = ", n, ", d = ", d);
  CudaSeqState& st = state(mem);
  DeviceGuard guard(dev_.ordinal());
  cudaStream_t s = dev_.stream();
  const int64_t H = cfg_.hidden_size, pos0 = mem.mtp_length();
  st.ensure_kv(pos0 + n + d - 1, true);
  // the chained steps' positions, uploaded once: a copy from pageable memory may wait for the stream,
  // so the chain itself copies only on the device
  int32_t chain_pos[8];
  for (int j = 1; j < d; ++j) chain_pos[j - 1] = static_cast<int32_t>(pos0 + n + j - 1);
  if (d > 1)
    MERE_CUDA_CHECK(
        cudaMemcpyAsync(st.drafts() + 8, chain_pos, static_cast<size_t>(d - 1) * 4, cudaMemcpyHostToDevice, s));
  int64_t last_rows = 0;  // rows of the latest pass: its last hidden row feeds the next step
  const bool gemms = head_rows_on_gemms(n);
  if (gemms) {  // the prompt's rows (head priming): the prompt's GEMMs, not n / 9 head passes
    head_prefill(st, hidden, ids, n, pos0);
    linear(lm_head_, h_, 1, logits_);
    k::argmax(s, logits_, cfg_.vocab_size, st.argmax(), 1, argmax_ws());
    last_rows = 1;
  }
  for (int64_t c0 = 0; !gemms && c0 < n; c0 += kRows) {
    const int64_t Tc = std::min(kRows, n - c0);
    upload_head_rows(st, hidden + c0 * H, ids + c0, Tc, pos0 + c0);
    const bool last = c0 + Tc == n;
    run_captured(st, pass_key(st, Tc, false, false, last, last, true), graph_mode_ >= 2,
                 [&] { head_pass(st, Tc, false, last, last); });
    last_rows = Tc;
  }
  for (int j = 1; j < d; ++j) {  // draft j - 1 is in st.argmax()[0]; its head hidden in h_'s last row
    MERE_CUDA_CHECK(cudaMemcpyAsync(st.drafts() + j - 1, st.argmax(), 4, cudaMemcpyDeviceToDevice, s));
    MERE_CUDA_CHECK(cudaMemcpyAsync(st.ids(), st.argmax(), 4, cudaMemcpyDeviceToDevice, s));
    MERE_CUDA_CHECK(cudaMemcpyAsync(hin_, h_ + (last_rows - 1) * H, static_cast<size_t>(H) * 4,
                                    cudaMemcpyDeviceToDevice, s));
    MERE_CUDA_CHECK(cudaMemcpyAsync(st.pos() + 1, st.drafts() + 8 + j - 1, 4, cudaMemcpyDeviceToDevice, s));
    run_captured(st, pass_key(st, 1, false, false, true, true, true), graph_mode_ >= 2,
                 [&] { head_pass(st, 1, false, true, true); });
    last_rows = 1;
  }
  MERE_CUDA_CHECK(cudaMemcpyAsync(st.drafts() + d - 1, st.argmax(), 4, cudaMemcpyDeviceToDevice, s));
  download(drafts, st.drafts(), static_cast<size_t>(d) * 4);
  dev_.synchronize("cuda draft_greedy");
  mem.advance_mtp(n + d - 1);
}

void CudaEngine::gdn_recurrent(float* S, const float* q, const float* k, const float* v, const float* g,
                               const float* beta, int64_t T, float* o, const L2Ahead* ahead) {
  const int64_t Hk = cfg_.lin_k_heads, Dk = cfg_.lin_k_dim, Hv = cfg_.lin_v_heads, Dv = cfg_.lin_v_dim;
  if (gdn_decode_supported(Dk, Dv)) gdn_decode(dev_, S, q, k, v, g, beta, T, Hk, Hv, Dk, Dv, o, ahead);
  else k::gdn_generic(dev_.stream(), S, q, k, v, g, beta, T, Hk, Hv, Dk, Dv, o);
}

void CudaEngine::replay_gdn(int64_t n, SequenceMemory& mem) {
  CudaSeqState& st = state(mem);
  MERE_CHECK(n >= 0 && n <= st.traced_rows, "replay", "cannot replay ", n, " of ", st.traced_rows,
             " rows traced on the device");
  if (n == 0) return;
  DeviceGuard guard(dev_.ordinal());
  cudaStream_t s = dev_.stream();
  const int64_t C = cfg_.conv_dim(), K = cfg_.conv_kernel;
  for (const DLayer& L : layers_) {
    if (L.kind != LayerKind::Linear) continue;
    const CudaSeqState::TraceRows tr = st.trace(L.index);
    k::conv_silu(s, st.conv(L.index), L.gdn.conv, tr.raw, n, C, K, raw_);
    gdn_recurrent(st.S(L.index), tr.q, tr.k, tr.v, tr.g, tr.beta, n, core_);
  }
  dev_.synchronize("cuda replay_gdn");
}

}  // namespace mere::cuda
