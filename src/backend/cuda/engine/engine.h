// CudaEngine: the Qwen3.5 forward pass on one GPU (model/device_engine.h). Owns the device, the
// uploaded weights and the scratch of one pass (at most kRows rows: longer calls run in slices of
// kRows tokens, which by batch-width invariance equals running them token by token). Sequences
// (CudaSeqState) own their caches, state and decode graph. One stream: calls are serialised.
#pragma once
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/device.h"
#include "backend/cuda/engine/dmatrix.h"
#include "backend/cuda/engine/kernels.h"
#include "backend/cuda/engine/state.h"
#include "backend/cuda/qmatvec_tune.h"
#include "model/device_engine.h"

namespace mere::cuda {

struct DAttn {
  DMat q, k, v, o;                 // q: [nh*hd*2, H] per head [q | gate]
  const float *q_norm = nullptr, *k_norm = nullptr;  // [hd]
  L2Ahead o_ahead;                 // o asked of the L2 by the span merge (MERE_CUDA_L2_AHEAD; n = 0: not)
};
struct DGdn {
  DMat qkv, z, b, a, out;
  const float *conv = nullptr, *dt_bias = nullptr, *neg_a = nullptr, *norm = nullptr;
  L2Ahead out_ahead;  // out asked of the L2 by the recurrent step (MERE_CUDA_L2_AHEAD; n = 0: not)
};
struct DMlp {
  DMat gate, up, down;  // count = E for stacked experts
};
struct DLayer {
  LayerKind kind = LayerKind::Linear;
  int64_t index = 0;  // among the layers of its kind (KV cache / GDN state slot)
  const float *input_norm = nullptr, *post_norm = nullptr;
  DAttn attn;
  DGdn gdn;
  DMlp mlp;                   // dense
  DMat router, shared_gate;   // MoE
  DMlp experts, shared;
  L2Ahead next_in;  // the next layer's input projections, asked of the L2 by moe_down (MERE_CUDA_L2_AHEAD)
};

class CudaEngine final : public DeviceEngine {
 public:
  static constexpr int64_t kRows = 9;  // rows of one pass (qmatvec's widest)
  static constexpr int kSpans = 16;    // attention split

  CudaEngine(const ModelConfig& cfg, const ModelWeights& w, int ordinal);
  std::string describe() const override;
  size_t weight_bytes() const override { return arena_.bytes(); }
  std::unique_ptr<DeviceSequenceState> new_state() override;
  double copy_bandwidth_gbs() override;
  DeviceMemoryReport device_memory() override;
  void forward(const int32_t* ids, int64_t T, SequenceMemory& mem, float* hidden, float* logits, LogitsMode mode,
               const ForwardOptions& opt) override;
  void mtp_forward(const float* hidden, const int32_t* ids, int64_t T, SequenceMemory& mem, float* mtp_hidden,
                   float* logits, LogitsMode mode) override;
  void replay_gdn(int64_t n, SequenceMemory& mem) override;
  void submit_greedy(SequenceMemory& mem, const int32_t* host_id) override;
  int32_t collect_greedy(SequenceMemory& mem) override;
  void draft_greedy(const float* hidden, const int32_t* ids, int64_t n, int d, SequenceMemory& mem,
                    int32_t* drafts) override;
  bool drafts_on_device() const override { return drafts_on_device_; }
  bool head_rows_on_gemms(int64_t rows) const override {
    return rows >= kGemmRows && head_prefill_ && prefill_gemm_enabled();
  }

 private:
  // device work of one MTP head pass of T <= kRows rows (inputs in st.ids(), st.pos()[1], hin_): the
  // head's hidden into h_ ([T, H]); all: every row's logits into logits_; last: the last row's into
  // logits_ row 0; arg (with last): its argmax into st.argmax()[0]
  void head_pass(CudaSeqState& st, int64_t T, bool all, bool last, bool arg);
  // a head pass's inputs from the host: hidden [T, H] into hin_, ids [T] into st.ids(), the MTP
  // position of the first row into st.pos()[1]
  void upload_head_rows(CudaSeqState& st, const float* hidden, const int32_t* ids, int64_t T, int64_t pos);
  DLayer upload_layer(const LayerWeights& L, int64_t index);
  void alloc_scratch();
  // T = 1 pass, graph when allowed
  void step1(CudaSeqState& st, bool all, bool want_last, bool want_arg, bool row_arg = false);
  // Trace builds with MERE_CUDA_TRACE_OUT: counts a decode or verification pass of `rows` rows about to
  // launch (only those of MERE_CUDA_TRACE_ROWS rows, where set) and starts / stops the kernel trace at
  // the configured passes (kernel_trace.h); otherwise nothing.
  void trace_pass(int64_t rows);
  static uint64_t pass_key(const CudaSeqState& st, int64_t T, bool trace, bool all, bool last, bool arg, bool mtp,
                           bool row_arg = false);
  void run_captured(CudaSeqState& st, uint64_t key, bool allowed, const std::function<void()>& pass);
  float* take(int64_t floats);
  CudaSeqState& state(SequenceMemory& mem);

  // device work of one pass of T <= kRows rows; x: [T, H] residual stream, updated in place.
  // want_argmax: the last row's argmax into st.argmax()[0]; want_row_argmax: every row's into
  // st.argmax()[0 .. T) (the logits of every row stay on the device)
  void main_pass(CudaSeqState& st, int64_t T, int64_t trace_row0, bool want_all_logits, bool want_last_logits,
                 bool want_argmax, bool want_row_argmax = false);
  void decoder_layer(const DLayer& L, CudaSeqState& st, float* x, int64_t T, float* kc, float* vc,
                     const int32_t* pos, int64_t trace_row0);
  // The mixers add their output projection into x and return true when it ran fused (fuse_bits),
  // else leave it in o_ and return false; xn_prepared: qws_ already holds xn prepared for them.
  // norm_in: the input projections compute their input, rmsnorm(x) * w, inside their launch
  // (qmatvec_src_multi; xn is not written then): see src_in_launch
  bool attention_block(const DAttn& a, const float* xn, bool xn_prepared, int64_t T, float* kc, float* vc,
                       const int32_t* pos, float* x, const QMatvecSource* norm_in = nullptr);
  bool gdn_block(const DGdn& g, CudaSeqState& st, int64_t li, const float* xn, bool xn_prepared, int64_t T,
                 int64_t trace_row0, float* x, const QMatvecSource* norm_in = nullptr);
  // x += ffn(xn); routed: the router and shared-gate logits are in rlog_ / sg_ already (moe_norm_router);
  // norm_in (dense): gate + up compute their input inside their launch
  void ffn_block(const DLayer& L, const float* xn, bool xn_prepared, int64_t T, float* x, bool routed = false,
                 const QMatvecSource* norm_in = nullptr);
  // Whether the launch of `ms` (one qmatvec_multi over one input) computes its input `in` inside it:
  // T = 1, fusion on, 4-bit matrices qmatvec_src_supported takes, the kind's switch on
  // (MERE_CUDA_NORM_MV for the RMSNorms, MERE_CUDA_PREP_MV for the gated norm and the attention gate)
  // and its kernels not ablated.
  bool src_in_launch(std::initializer_list<const DMat*> ms, const QMatvecSource& in, int64_t T) const;
  void linear(const DMat& W, const float* x, int64_t T, float* y);
  // several matrices over the same x: the quantised ones of one bit width share one prepare (and,
  // fused, one launch); prepared: qws_ already holds x prepared
  // norm: x is not read; the launch computes its input (*norm) itself (T = 1, src_in_launch)
  void linear_shared(std::initializer_list<std::pair<const DMat*, float*>> outs, const float* x, int64_t T,
                     bool prepared = false, const QMatvecSource* norm = nullptr);
  int fuse_bits(std::initializer_list<const DMat*> ms) const;
  // Bit width of one prepare shared by every matrix (quantised, a single matrix, same bits and
  // width), else 0: when linear_shared runs them on one prepared input (and, fused, one launch)
  static int common_bits(const DMat* const* ms, size_t n);
  static int common_bits(std::initializer_list<std::pair<const DMat*, float*>> outs);
  // x += W (qws_ input; src: the input computed inside the launch, src_in_launch)
  void accumulate_prepared(const DMat& W, int64_t T, float* x, const QMatvecSource* src = nullptr);
  // MERE_CUDA_MV_TUNE (default 1): times the 1-token matvec launches of the first layer of each kind, the
  // lm_head and the MTP head at load (engine_tune.cpp); linear / linear_shared / accumulate_prepared
  // and the lm_head launch with the measured shapes (same bits: qmatvec_tune.h)
  void tune_matvecs();
  std::string matvec_shapes_summary() const;  // "[rows,cols] shape us (default us); ..." ("" untuned)
  void download(void* host, const void* dev, size_t bytes);

  // Prefill (engine_prefill.cpp): untraced calls of T >= kGemmRows rows run in passes of up to
  // kPrefillChunk rows on the tensor-core kernels (qgemm, grouped MoE, gdn_prefill,
  // attention_prefill) instead of 9-row slices. MERE_CUDA_PREFILL=exact turns it off.
  static constexpr int64_t kGemmRows = 16, kPrefillChunk = 512;
  struct Prefill;
  static bool prefill_gemm_enabled();
  void alloc_prefill();
  // MERE_CUDA_PREFILL=auto: "[rows,cols] ws|blas us (other us); ..." measured at the first prompt
  // (prefill_choice.h; "" before it or in other modes)
  std::string prefill_gemms_summary() const;
  void prefill(CudaSeqState& st, const int32_t* ids, int64_t T, int64_t pos0, float* hidden, float* logits,
               LogitsMode mode, int32_t* argmax_out);
  void prefill_attention(const DAttn& a, float* kc, float* vc, int64_t T, int64_t pos0, float* out);
  void prefill_gdn(const DGdn& g, CudaSeqState& st, int64_t li, int64_t T, float* out);
  void prefill_ffn(const DLayer& L, int64_t T, float* out);
  void head_prefill(CudaSeqState& st, const float* hidden, const int32_t* ids, int64_t T, int64_t pos0);
  // x += add (when not null), then xn = rmsnorm(x) * w over the prefill scratch's T rows (prefill())
  void prefill_norm(int64_t T, const float* add, const float* w);
  // The recurrent GatedDeltaNet step over T tokens of one layer's state S (gdn.h's layout):
  // gdn_decode where it takes the heads (128 or 64 wide), else the generic kernel.
  void gdn_recurrent(float* S, const float* q, const float* k, const float* v, const float* g, const float* beta,
                     int64_t T, float* o, const L2Ahead* ahead = nullptr);
  // MERE_CUDA_L2_AHEAD (read at load; docs/cuda-kernels.md §5.22): which weights a short launch asks the
  // L2 for ahead of the matvec that reads them (l2_ahead.h): out -> each layer's output projection (GDN
  // out_proj by the recurrent step, o_proj by the attention's span merge), in -> the next layer's input
  // projections (by the MoE down launch), on -> both; unset or off -> none. Hints: the same bits.
  void init_l2_ahead();
  void gemm_shared(std::initializer_list<std::pair<const DMat*, float*>> outs, const float* x, int64_t T,
                   int64_t prepared_cols = -1);
  void swiglu_gemm(const DMat& down, float* g, const float* u, int64_t T, float* out);
  std::shared_ptr<Prefill> pf_;  // prefill scratch, allocated on the first prefill
  size_t prefill_scratch_bytes() const;

  ModelConfig cfg_;
  CudaDevice dev_;
  WeightArena arena_;
  DMat embed_, lm_head_;
  const float* final_norm_ = nullptr;
  std::vector<DLayer> layers_;
  bool has_mtp_ = false;
  DLayer mtp_layer_;
  DMat mtp_fc_;
  const float *mtp_norm_e_ = nullptr, *mtp_norm_h_ = nullptr, *mtp_norm_ = nullptr;
  // MERE_CUDA_GRAPH: 0 no graphs, 1 decode steps (T = 1) only, unset / 2: every pass of <= 9 rows
  // (verification widths, traced or not) and the MTP head's passes too
  int graph_mode_ = 2;
  // MERE_CUDA_GRAPH_AFTER=N (default 2): a kind of pass is captured on its N-th use in a request, its
  // earlier uses launched kernel by kernel (1: captured on first use, the behaviour to session 28).
  // A capture costs several replays (session 29: the bundled models' requests used ~10 kinds).
  int graph_after_ = 2;
  // MERE_CUDA_DRAFTS: unset or device: greedy MTP drafts computed and chained on the device
  // (draft_greedy, one host wait a draft chain); host: mtp_forward + the host's argmax each draft.
  bool drafts_on_device_ = true;
  // MERE_CUDA_HEAD_PREFILL (default on; off: 9-row head passes): draft_greedy's catch-up pass over
  // >= kGemmRows rows (the prompt's priming) runs on the prompt's GEMMs (head_prefill). Session 30
  // (H100): the bundled dense model's math workload 0.96x -> 1.50x serial (the priming's cost no
  // longer ends the request on the fallback), the other workloads unchanged within noise.
  bool head_prefill_ = true;
  // GQA-aware decode attention (k::attention_gqa): default where the heads allow it,
  // MERE_CUDA_ATTN=split turns it off; read at load
  bool attn_gqa_ = false;
  // MERE_CUDA_FUSE (default on; 0 off; always off with the tensor-core matvec): producers fused with
  // the matvec's prepare, shared-input projections in one launch, residual adds in the epilogue
  bool fuse_ = true;
  // MERE_CUDA_MOE_ROUTE: unset or fused: the MoE routing runs inside the gate/up launch
  // (k::moe_route_gate_up, the same bits; one launch fewer a MoE layer; H100 35B-A3B decode +0.5%);
  // separate: its own launch. Read at load.
  bool moe_route_fused_ = true;
  // MERE_CUDA_MOE_NORM: unset or fused: the post-attention RMSNorm inside the 8-bit router launch
  // (k::moe_norm_router, the same bits; s32a H100 35B-A3B decode +6.4%); separate: rms_norm_prep's own
  // launch. Read at load.
  bool moe_norm_fused_ = true;
  // MERE_CUDA_MOE_LOADS: unset or sets: the MoE kernels (norm + router, gate/up, down) ask for each warp's
  // weight chunks with their group scales at once, weights before the PDL wait where the routing does
  // not decide them (k_moe_common.cuh load_sets; the same bits; s34a H100 35B-A3B decode +6.0%);
  // router / gate_up / down: that kernel only; rows: the first chunk set, then the scales and later
  // sets as the dot reaches them. Read at load.
  static constexpr unsigned kMoeSetsRouter = 1, kMoeSetsGateUp = 2, kMoeSetsDown = 4;
  unsigned moe_sets_ = kMoeSetsRouter | kMoeSetsGateUp | kMoeSetsDown;
  // MERE_CUDA_MOE_DOWN_L2: start / end: each routed gate/up block asks the L2 for its share of its
  // expert's down matrix right after asking for its own weights / after storing its h rows, so moe_down's
  // rows come from the L2 (k::moe_route_gate_up's down_l2; a hint, the same bits); unset or off: none.
  // Read at load.
  int moe_down_l2_ = 0;
  // MERE_CUDA_NORM_MV: fused: a decode step's input RMSNorms (and the dense models'
  // post-attention ones) inside the 4-bit projections' launch (qmatvec_src_multi, the same bits as
  // rms_norm_prep + the launch; docs/cuda-kernels.md §5.19); unset or separate: rms_norm_prep's own launch
  // (the default: s33a H100, no measurable gain). Read at load.
  bool norm_mv_fused_ = true;
  // MERE_CUDA_PREP_MV: fused: a decode step's gated RMSNorm (GDN) and attention gate inside
  // the output projection's launch (qmatvec_src_multi; the same bits as gated_rms_norm_prep /
  // sigmoid_gate_prep + the launch); unset or separate: the producer's own launch (the default: s33a
  // H100, fused 13-15% slower). Read at load.
  bool prep_mv_fused_ = true;
  MatvecShapeTable mv_shapes_;
  // MERE_CUDA_STEP_NORM=fused: with fusion, the GatedDeltaNet decode step and the gated RMSNorm +
  // prepare run as one launch (k::gdn_step_norm_prep, the same bits by construction); unset or
  // separate: two launches (the default until a GPU run has checked and measured it). Read at load.
  bool step_norm_fused_ = false;
  // MERE_CUDA_CONV, with fusion: conv_gdn_prepare's v3 (a block's tokens one after another; `loop`) or
  // v4 (a block runs up to 8 tokens side by side; `tokens`), the same bits by construction; unset or
  // `width`: v3 for a decode step, v4 for wider passes (H100 s29a: v4 at width 8 6.3 against 10.4 µs a
  // layer, v3 at width 1 4.2 against 4.7; docs/cuda-kernels.md §5.15). Read at load.
  enum class ConvMode { Width, Tokens, Loop };
  ConvMode conv_mode_ = ConvMode::Width;
  // MERE_CUDA_ATTN_COMBINE: unset or v2: the decode attention's span merge as attn_combine_v2_kernel
  // (the same bits; H100 s25a: 35B-A3B decode +1.5%, 27B +0.7-1.0%); v1: attn_combine_kernel. Read at load.
  bool attn_combine_v2_ = true;
  // MERE_CUDA_MOE_BLOCK=on: a decode step's MoE half (norm, router, routing, experts, residual) as one
  // launch, k::moe_block (the same bits; measured slower in session 26, H100 35B-A3B decode -17%:
  // opt-in); its resident grid size, 0 when off. Read at load; on, a MoE model whose shapes it does not
  // take fails to load.
  int moe_block_grid_ = 0;
  void init_moe_block();  // reads MERE_CUDA_MOE_BLOCK and sizes the grid (after the uploads)
  // MERE_CUDA_MOE_FUSED=on: a decode step's routed gate/up and down + residual as one launch whose
  // blocks meet at a grid-wide barrier (k::moe_gate_up_down; the same bits as the two launches, which
  // verification passes keep); off (the default until a GPU measures it): the two launches. The grid of
  // every MoE layer, 0 when off.
  int moe_fused_grid_ = 0;
  void init_moe_fused();  // reads MERE_CUDA_MOE_FUSED and sizes the grid (after the uploads)
  // MERE_CUDA_GDN_BLOCK=on: a decode step's GDN middle (conv + prepare, the step, the gated norm +
  // out_proj's prepare) as one launch, k::gdn_mid (the same bits; measured slower in session 26, H100
  // 35B-A3B decode -12%, 27B -11%: opt-in); its resident grid size, 0 when off. Read at load; on, a model
  // whose heads it does not take fails to load.
  int gdn_mid_grid_ = 0;
  void init_gdn_mid();  // reads MERE_CUDA_GDN_BLOCK and sizes the grid (after the uploads)
  // MERE_CUDA_ARGMAX: unset or split: the greedy id of a row of logits from several blocks a row and a
  // last-block merge (k::argmax with argmax_ws_; the same ids by construction; H100 s26: 35B-A3B decode
  // +0.35%); block: one block a row (26 µs a step in sequence). Read at load.
  bool argmax_split_ = true;
  int64_t traced_steps_ = 0;  // decode / verification passes so far (trace builds: MERE_CUDA_TRACE_OUT)
  // Trace builds only, MERE_CUDA_ABLATE=KIND,...: a timing experiment that leaves out a step's kernels of
  // those kinds (norm: the layers' RMSNorm + prepare; prep: the SwiGLU / gated-norm / attention-gate
  // producers; gdn: conv + prepare and the GDN step; attn: attention prepare and decode attention;
  // mv: the layers' matvecs, the router's included; moe: the MoE routing and expert launches), so a
  // step's time without them is the most that fusing them away can gain. The output is meaningless;
  // each pass's argmax is zeroed.
  enum Ablate : unsigned { kAblNorm = 1, kAblPrep = 2, kAblGdn = 4, kAblAttn = 8, kAblMv = 16, kAblMoe = 32 };
  unsigned ablate_ = 0;
  bool kept(unsigned kind) const { return (ablate_ & kind) == 0; }

  // scratch of one pass
  DeviceBuffer scratch_;
  int64_t scratch_used_ = 0, scratch_cap_ = 0;
  float *x_, *xn_, *o_, *h_, *logits_, *qws_, *hin_, *cat_;
  float *raw_, *mixed_, *z_, *ga_, *gb_, *gq_, *gk_, *gv_, *gg_, *gbeta_, *core_, *gout_;
  float *qg_, *kk_, *vv_, *q_, *att_, *aws_;
  float *f1_, *f2_, *rlog_, *rw_, *eg_, *eu_, *ey_, *sh_, *sg_;
  int32_t* ridx_ = nullptr;
  unsigned* gdn_done_ = nullptr;  // [Hv] head counters of k::gdn_step_norm_prep (zero between launches)
  unsigned* moe_bar_ = nullptr;   // [2] k::moe_block's grid barrier (zeroed once)
  unsigned* moe_fused_bar_ = nullptr;  // [2] k::moe_gate_up_down's grid barrier (zeroed once)
  unsigned* gdn_bar_ = nullptr;   // [2] k::gdn_mid's grid barrier (zeroed once)
  float* argmax_ws_ = nullptr;    // k::argmax's split-form tickets and partials, kRows rows (zeroed once)
  k::ArgmaxWs argmax_ws() const { return argmax_split_ ? k::ArgmaxWs{argmax_ws_, kRows} : k::ArgmaxWs{}; }
};

}  // namespace mere::cuda
