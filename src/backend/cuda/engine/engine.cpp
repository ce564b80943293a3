// CudaEngine construction: weight upload (once, at load), scratch allocation, factory.
#include "backend/cuda/engine/engine.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/engine/kernels.h"
#include "backend/cuda/env_choice.h"
#include "backend/cuda/kernel_trace.h"
#include "backend/cuda/stream_timer.h"
#include "core/error.h"
#include "core/string_list.h"

namespace mere {

std::unique_ptr<DeviceEngine> make_cuda_engine(const ModelConfig& cfg, const ModelWeights& w, int ordinal) {
  return std::make_unique<cuda::CudaEngine>(cfg, w, ordinal);
}

namespace cuda {

CudaEngine::CudaEngine(const ModelConfig& cfg, const ModelWeights& w, int ordinal)
    : cfg_(cfg), dev_(ordinal), arena_(dev_) {
#if !defined(MERE_CUDA_TRACE)
  MERE_CHECK(trace_out_path().empty(), "MERE_CUDA_TRACE_OUT",
             "this build has no kernel trace: build with cmake -DMERE_CUDA_TRACE=ON (docs/cuda-engine.md)");
  MERE_CHECK(!std::getenv("MERE_CUDA_ABLATE"), "MERE_CUDA_ABLATE",
             "kernel ablation is a timing experiment of trace builds only (cmake -DMERE_CUDA_TRACE=ON)");
#else
  if (const char* a = std::getenv("MERE_CUDA_ABLATE"); a && *a) {
    static const std::pair<const char*, unsigned> kinds[] = {{"norm", kAblNorm}, {"prep", kAblPrep}, {"gdn", kAblGdn},
                                                             {"attn", kAblAttn}, {"mv", kAblMv},     {"moe", kAblMoe}};
    for (const std::string& name : split_list(a)) {
      unsigned bit = 0;
      for (const auto& [n, v] : kinds)
        if (name == n) bit = v;
      MERE_CHECK(bit != 0, "MERE_CUDA_ABLATE", "unknown kernel kind \"", name,
                 "\" (expected a comma-separated list of norm, prep, gdn, attn, mv, moe)");
      ablate_ |= bit;
    }
    std::fprintf(stderr, "[mere.run] MERE_CUDA_ABLATE=%s: kernels left out for timing, the output is meaningless\n", a);
  }
#endif
  const char* g = std::getenv("MERE_CUDA_GRAPH");
  graph_mode_ = !g || !*g ? 2 : std::strcmp(g, "0") == 0 ? 0 : std::strcmp(g, "1") == 0 ? 1 : 2;
  drafts_on_device_ = env_choice("MERE_CUDA_DRAFTS", {"device", "host"}) != 1;
  head_prefill_ = env_choice("MERE_CUDA_HEAD_PREFILL", {"on", "off"}) != 1;
  graph_after_ =
      static_cast<int>(env_int("MERE_CUDA_GRAPH_AFTER", 2, 1, 1000, "the use of a kind of pass that captures it"));
  // decode attention: the GQA-aware kernel by default wherever it supports the heads (H200: same
  // speed at short contexts, 8k-context decode 0.95x short vs 0.65x with the split kernel,
  // docs/cuda-kernels.md §4); MERE_CUDA_ATTN=split forces the split kernel, =gqa insists on GQA
  const int attn = env_choice("MERE_CUDA_ATTN", {"gqa", "split"});
  attn_gqa_ = attn == 0 || (attn < 0 && k::attention_gqa_supported(cfg_.num_heads, cfg_.num_kv_heads, cfg_.head_dim));
  const char* fu = std::getenv("MERE_CUDA_FUSE");
  fuse_ = !(fu && std::strcmp(fu, "0") == 0) && !qmatvec_tensor_cores(4);
  moe_route_fused_ = env_choice("MERE_CUDA_MOE_ROUTE", {"fused", "separate"}) != 1;
  moe_norm_fused_ = env_choice("MERE_CUDA_MOE_NORM", {"fused", "separate"}) != 1;
  {
    const int ml = env_choice("MERE_CUDA_MOE_LOADS", {"rows", "sets", "router", "gate_up", "down"});
    constexpr unsigned kMask[] = {0u, kMoeSetsRouter | kMoeSetsGateUp | kMoeSetsDown, kMoeSetsRouter, kMoeSetsGateUp,
                                  kMoeSetsDown};
    moe_sets_ = kMask[ml < 0 ? 1 : ml];  // sets by default: s34a H100 35B-A3B decode +6.0% (§5.20)
  }
  moe_down_l2_ = std::max(0, env_choice("MERE_CUDA_MOE_DOWN_L2", {"off", "start", "end"}));
  // opt-in: bitwise, but measured no faster (norms) and 13-15% slower (gated norm + gate) on an H100
  // (s33a, docs/cuda-kernels.md §5.19)
  norm_mv_fused_ = env_choice("MERE_CUDA_NORM_MV", {"fused", "separate"}) == 0;
  prep_mv_fused_ = env_choice("MERE_CUDA_PREP_MV", {"fused", "separate"}) == 0;
  step_norm_fused_ = env_choice("MERE_CUDA_STEP_NORM", {"fused", "separate"}) == 0;
  const int conv = env_choice("MERE_CUDA_CONV", {"width", "tokens", "loop"});
  conv_mode_ = conv == 1 ? ConvMode::Tokens : conv == 2 ? ConvMode::Loop : ConvMode::Width;
  attn_combine_v2_ = env_choice("MERE_CUDA_ATTN_COMBINE", {"v1", "v2"}) != 0;
  argmax_split_ = env_choice("MERE_CUDA_ARGMAX", {"block", "split"}) != 0;
  embed_ = arena_.upload(w.embed, "embed_tokens");
  lm_head_ = arena_.upload(w.lm_head, "lm_head", true);
  final_norm_ = arena_.upload_vec(w.final_norm, "final norm");
  int64_t nfull = 0, nlin = 0;
  for (const LayerWeights& L : w.layers) layers_.push_back(upload_layer(L, L.kind == LayerKind::Full ? nfull++ : nlin++));
  has_mtp_ = w.mtp.present;
  if (has_mtp_) {
    mtp_layer_ = upload_layer(w.mtp.layer, 0);
    mtp_fc_ = arena_.upload(w.mtp.fc, "mtp.fc", true);
    mtp_norm_e_ = arena_.upload_vec(w.mtp.pre_fc_norm_embedding, "mtp.pre_fc_norm_embedding");
    mtp_norm_h_ = arena_.upload_vec(w.mtp.pre_fc_norm_hidden, "mtp.pre_fc_norm_hidden");
    mtp_norm_ = arena_.upload_vec(w.mtp.norm, "mtp.norm");
  }
  MERE_CHECK(!has_mtp_ || mtp_layer_.kind == LayerKind::Full, "cuda engine", "MTP layer must be full attention");
  arena_.end_uploads();
  init_moe_block();
  init_moe_fused();
  init_gdn_mid();
  init_l2_ahead();
  alloc_scratch();
  tune_matvecs();
}

DLayer CudaEngine::upload_layer(const LayerWeights& L, int64_t index) {
  DLayer d;
  d.kind = L.kind;
  d.index = index;
  d.input_norm = arena_.upload_vec(L.input_norm, "input_layernorm");
  d.post_norm = arena_.upload_vec(L.post_norm, "post_attention_layernorm");
  if (L.kind == LayerKind::Full) {
    d.attn.q = arena_.upload(L.attn.q_proj, "q_proj", true);
    d.attn.k = arena_.upload(L.attn.k_proj, "k_proj", true);
    d.attn.v = arena_.upload(L.attn.v_proj, "v_proj", true);
    d.attn.o = arena_.upload(L.attn.o_proj, "o_proj", true);
    d.attn.q_norm = arena_.upload_vec(L.attn.q_norm, "q_norm");
    d.attn.k_norm = arena_.upload_vec(L.attn.k_norm, "k_norm");
  } else {
    d.gdn.qkv = arena_.upload(L.gdn.in_proj_qkv, "in_proj_qkv", true);
    d.gdn.z = arena_.upload(L.gdn.in_proj_z, "in_proj_z", true);
    d.gdn.b = arena_.upload(L.gdn.in_proj_b, "in_proj_b", true);
    d.gdn.a = arena_.upload(L.gdn.in_proj_a, "in_proj_a", true);
    d.gdn.out = arena_.upload(L.gdn.out_proj, "out_proj", true);
    d.gdn.conv = arena_.upload_vec(L.gdn.conv, "conv1d");
    d.gdn.dt_bias = arena_.upload_vec(L.gdn.dt_bias, "dt_bias");
    d.gdn.neg_a = arena_.upload_vec(L.gdn.neg_a, "A_log");
    d.gdn.norm = arena_.upload_vec(L.gdn.norm, "linear_attn.norm");
  }
  // tile: the dense MLP (qmatvec / qgemm only); the MoE shared expert stays MLX (k_moe's fused
  // kernels read it)
  auto mlp = [&](const MlpWeights& m, bool tile) {
    return DMlp{arena_.upload(m.gate, "gate_proj", tile), arena_.upload(m.up, "up_proj", tile),
                arena_.upload(m.down, "down_proj", tile)};
  };
  if (!cfg_.is_moe) {
    d.mlp = mlp(L.mlp, true);
    return d;
  }
  d.router = arena_.upload(L.moe.router, "mlp.gate (router)", true);
  std::vector<const Matrix*> g, u, dn;
  for (const MlpWeights& e : L.moe.experts) {
    g.push_back(&e.gate);
    u.push_back(&e.up);
    dn.push_back(&e.down);
  }
  d.experts = DMlp{arena_.upload_stacked(g, "experts gate_proj"), arena_.upload_stacked(u, "experts up_proj"),
                   arena_.upload_stacked(dn, "experts down_proj")};
  d.shared = mlp(L.moe.shared, false);
  d.shared_gate = arena_.upload(L.moe.shared_gate, "shared_expert_gate", true);
  return d;
}

namespace {
// The codes, scales and biases of each quantised matrix of `ms` as L2 prefetch spans (l2_ahead.h);
// float and tiled matrices are left out (their matvecs read other layouts).
L2Ahead ahead_of(std::initializer_list<const DMat*> ms) {
  L2Ahead a;
  auto add = [&](const void* p, int64_t bytes) {
    MERE_CHECK(a.n < L2Ahead::kSpans, "cuda engine", "MERE_CUDA_L2_AHEAD: more than ", L2Ahead::kSpans, " spans");
    a.p[a.n] = static_cast<const char*>(p);
    a.bytes[a.n++] = static_cast<uint64_t>(bytes);
  };
  for (const DMat* m : ms) {
    if (!m->quantized() || m->tiled || m->count != 1) continue;
    const int64_t groups = m->rows * (m->cols / 64) * 2;
    add(m->data, m->rows * m->cols * m->bits / 8);
    add(m->scales, groups);
    add(m->biases, groups);
  }
  return a;
}
}  // namespace

void CudaEngine::init_l2_ahead() {
  const int mode = std::max(0, env_choice("MERE_CUDA_L2_AHEAD", {"off", "out", "in", "on"}));  // bit 1 out, bit 2 in
  for (size_t i = 0; i < layers_.size(); ++i) {
    DLayer& L = layers_[i];
    if (mode & 1) {
      if (L.kind == LayerKind::Full) L.attn.o_ahead = ahead_of({&L.attn.o});
      else L.gdn.out_ahead = ahead_of({&L.gdn.out});
    }
    if ((mode & 2) && cfg_.is_moe && i + 1 < layers_.size()) {
      const DLayer& N = layers_[i + 1];
      L.next_in = N.kind == LayerKind::Full ? ahead_of({&N.attn.q, &N.attn.k, &N.attn.v})
                                            : ahead_of({&N.gdn.qkv, &N.gdn.z, &N.gdn.b, &N.gdn.a});
    }
  }
}

float* CudaEngine::take(int64_t floats) {
  const int64_t n = (floats + 63) / 64 * 64;  // 256-byte aligned pieces
  float* p = scratch_.get() ? scratch_.as<float>() + scratch_used_ : nullptr;
  scratch_used_ += n;
  return p;
}

void CudaEngine::alloc_scratch() {
  const ModelConfig& c = cfg_;
  const int64_t R = kRows, H = c.hidden_size, V = c.vocab_size;
  const int64_t C = c.conv_dim(), kd = c.lin_key_dim(), vd = c.lin_value_dim(), Hv = c.lin_v_heads;
  const int64_t nh = c.num_heads, nkv = c.num_kv_heads, hd = c.head_dim;
  const int64_t I = std::max(c.intermediate_size, c.shared_intermediate_size);
  const int64_t E = std::max<int64_t>(c.num_experts, 1), K = std::max<int64_t>(c.experts_per_tok, 1);
  const int64_t Ie = std::max<int64_t>(c.moe_intermediate_size, 1);
  int64_t qws = 0;
  for (int64_t cols : {H, 2 * H, vd, nh * hd, I, Ie}) qws = std::max(qws, qmatvec_workspace_floats(R, cols, 8));
  for (int64_t cols : {H, 2 * H, vd, nh * hd, I, Ie}) qws = std::max(qws, qmatvec_workspace_floats(R, cols, 4));
  for (int pass = 0; pass < 2; ++pass) {  // pass 0 measures, pass 1 hands out pointers
    scratch_used_ = 0;
    x_ = take(R * H), xn_ = take(R * H), o_ = take(R * H), h_ = take(R * H), hin_ = take(R * H), cat_ = take(R * 2 * H);
    logits_ = take(R * V), qws_ = take(qws);
    raw_ = take(kMaxTraceRows * C), mixed_ = take(R * C), z_ = take(R * vd), ga_ = take(R * Hv), gb_ = take(R * Hv);
    gq_ = take(R * kd), gk_ = take(R * kd), gv_ = take(R * vd), gg_ = take(R * Hv), gbeta_ = take(R * Hv);
    core_ = take(kMaxTraceRows * vd), gout_ = take(R * vd);
    qg_ = take(R * nh * hd * 2), kk_ = take(R * nkv * hd), vv_ = take(R * nkv * hd), q_ = take(R * nh * hd);
    att_ = take(R * nh * hd), aws_ = take(k::attention_ws_floats(R, nh, hd, kSpans));
    f1_ = take(R * I), f2_ = take(R * I), rlog_ = take(R * E), rw_ = take(R * K);
    eg_ = take(R * K * Ie), eu_ = take(R * K * Ie), ey_ = take(R * K * H), sh_ = take(R * H), sg_ = take(R);
    ridx_ = reinterpret_cast<int32_t*>(take(R * K));
    gdn_done_ = reinterpret_cast<unsigned*>(take(std::max<int64_t>(Hv, 1)));
    moe_bar_ = reinterpret_cast<unsigned*>(take(2));
    moe_fused_bar_ = reinterpret_cast<unsigned*>(take(2));
    gdn_bar_ = reinterpret_cast<unsigned*>(take(2));
    argmax_ws_ = take(k::argmax_split_floats(V, R));
    if (pass == 0) {
      scratch_cap_ = scratch_used_;
      scratch_ = dev_.alloc(static_cast<size_t>(scratch_cap_) * 4, "forward-pass scratch");
    }
  }
  dev_.fill_bytes(gdn_done_, 0, static_cast<size_t>(std::max<int64_t>(Hv, 1)) * 4);
  dev_.fill_bytes(moe_bar_, 0, 2 * sizeof(unsigned));
  dev_.fill_bytes(moe_fused_bar_, 0, 2 * sizeof(unsigned));
  dev_.fill_bytes(gdn_bar_, 0, 2 * sizeof(unsigned));
  dev_.fill_bytes(argmax_ws_, 0, static_cast<size_t>(k::argmax_split_floats(V, R)) * 4);
}

std::string CudaEngine::describe() const {
  const std::string shapes = matvec_shapes_summary(), gemms = prefill_gemms_summary();
  return cat(dev_.describe(), ", ", static_cast<double>(arena_.bytes()) / 1e9, " GB of weights on the device",
             shapes.empty() ? "" : "; matvec shapes measured at load (MERE_CUDA_MV_TUNE): " + shapes,
             gemms.empty() ? "" : "; prefill GEMMs measured at the first prompt (MERE_CUDA_PREFILL=auto): " + gemms);
}

DeviceMemoryReport CudaEngine::device_memory() {
  DeviceMemoryReport r;
  r.weights = arena_.bytes();
  r.scratch = scratch_.bytes() + prefill_scratch_bytes();
  DeviceGuard guard(dev_.ordinal());
  size_t free_b = 0, total_b = 0;
  MERE_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  r.used = total_b - free_b;
  r.total = total_b;
  return r;
}

// 2 x 256 MiB: 4x the 60 MiB L2 of an H100/H200, and small enough that the probe, which runs with
// the weights resident, stays inside the engine's memory budget (weights + KV + state + 1.5 GiB).
double CudaEngine::copy_bandwidth_gbs() {
  const size_t bytes = size_t{256} << 20;
  DeviceBuffer a = dev_.alloc(bytes, "copy-bandwidth probe"), b = dev_.alloc(bytes, "copy-bandwidth probe");
  DeviceGuard guard(dev_.ordinal());
  cudaStream_t s = dev_.stream();
  StreamTimer timer;
  std::vector<float> ms;
  for (int rep = 0; rep < 8; ++rep) {
    const float t =
        timer.ms(s, [&] { MERE_CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, s)); });
    if (rep >= 2) ms.push_back(t);  // two warm-ups
  }
  std::sort(ms.begin(), ms.end());
  return 2.0 * static_cast<double>(bytes) / (static_cast<double>(ms[ms.size() / 2]) * 1e-3) / 1e9;
}

std::unique_ptr<DeviceSequenceState> CudaEngine::new_state() {
  return std::make_unique<CudaSeqState>(dev_, cfg_, has_mtp_);
}

}  // namespace cuda
}  // namespace mere
