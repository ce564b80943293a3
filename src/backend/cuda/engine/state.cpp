// CudaSeqState: allocation, growth, checkpoint / restore / fork of the device sequence state.
// Every copy is stream-ordered on the device's stream; nothing here waits for the device.
#include "backend/cuda/engine/state.h"

#include <algorithm>

#include "backend/cuda/cuda_check.h"

namespace mere::cuda {
namespace {

class CudaCheckpoint final : public DeviceCheckpoint {
 public:
  DeviceBuffer gdn;
};

}  // namespace

CudaSeqState::CudaSeqState(CudaDevice& dev, const ModelConfig& cfg, bool with_mtp)
    : dev_(dev), cfg_(cfg), with_mtp_(with_mtp) {
  s_floats_ = cfg.lin_v_heads * cfg.lin_v_dim * cfg.lin_k_dim;
  conv_floats_ = (cfg.conv_kernel - 1) * cfg.conv_dim();
  lin_layers_ = cfg.num_linear_layers();
  kv_.resize(static_cast<size_t>(cfg.num_full_layers()));
  gdn_ = dev_.alloc(static_cast<size_t>(std::max<int64_t>(1, lin_layers_ * (s_floats_ + conv_floats_))) * 4,
                    "GatedDeltaNet state (S + conv history)");
  io_ = dev_.alloc(48 * 4, "sequence ids/positions");
  reset();
}

CudaSeqState::~CudaSeqState() {
  drop_graph();
  if (pinned_) {  // steps still in flight write into the ring: wait for them first
    for (cudaEvent_t e : events_)
      if (e) cudaEventSynchronize(e);
    for (cudaEvent_t e : events_)
      if (e) cudaEventDestroy(e);
    cudaFreeHost(pinned_);
  }
}

CudaSeqState::GreedySlot* CudaSeqState::greedy_slot(int64_t n) {
  if (!pinned_) {
    DeviceGuard g(dev_.ordinal());
    void* p = nullptr;
    MERE_CUDA_CHECK(cudaHostAlloc(&p, sizeof(GreedySlot) * kGreedySlots, cudaHostAllocDefault));
    pinned_ = static_cast<GreedySlot*>(p);
    for (cudaEvent_t& e : events_) MERE_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  return pinned_ + n % kGreedySlots;
}

void CudaSeqState::drop_graph() {
  for (auto& [key, g] : graphs_cache) cudaGraphExecDestroy(g);
  graphs_cache.clear();
}

int CudaSeqState::count_use(uint64_t kind) {
  for (auto& [k, n] : uses_)
    if (k == kind) return ++n;
  uses_.emplace_back(kind, 1);
  return 1;
}

cudaGraphExec_t CudaSeqState::find_graph(uint64_t key) const {
  for (const auto& [k, g] : graphs_cache)
    if (k == key) return g;
  return nullptr;
}

void CudaSeqState::reset() {
  if (gdn_.bytes()) dev_.fill_bytes(gdn_.get(), 0, gdn_.bytes());
}

void CudaSeqState::ensure_kv(int64_t rows, bool mtp) {
  int64_t& cap = mtp ? mtp_cap_ : cap_;
  int64_t& used = mtp ? mtp_rows_used_ : rows_used_;
  used = std::max(used, rows);
  if (rows <= cap) return;
  MERE_CHECK(!mtp || with_mtp_, "cuda state", "MTP cache requested on a sequence without an MTP head");
  const int64_t ncap = std::min(std::max({rows, 2 * cap, int64_t{256}}), std::max(rows, cfg_.max_position_embeddings));
  const size_t row_bytes = static_cast<size_t>(cfg_.num_kv_heads * cfg_.head_dim) * 4;
  auto grow = [&](KvBuf& b, const char* what) {
    KvBuf n{dev_.alloc(row_bytes * static_cast<size_t>(ncap), what), dev_.alloc(row_bytes * static_cast<size_t>(ncap), what)};
    if (cap > 0) {
      DeviceGuard g(dev_.ordinal());
      MERE_CUDA_CHECK(cudaMemcpyAsync(n.k.get(), b.k.get(), row_bytes * static_cast<size_t>(cap), cudaMemcpyDeviceToDevice, dev_.stream()));
      MERE_CUDA_CHECK(cudaMemcpyAsync(n.v.get(), b.v.get(), row_bytes * static_cast<size_t>(cap), cudaMemcpyDeviceToDevice, dev_.stream()));
      dev_.synchronize("kv growth");  // the old buffers are freed next
    }
    b = std::move(n);
  };
  if (mtp) grow(mtp_, "MTP KV cache");
  else
    for (auto& b : kv_) grow(b, "KV cache");
  cap = ncap;
  ++kv_generation;
  drop_graph();
}

CudaSeqState::TraceRows CudaSeqState::trace(int64_t i) {
  const int64_t C = cfg_.conv_dim(), kd = cfg_.lin_key_dim(), vd = cfg_.lin_value_dim(), Hv = cfg_.lin_v_heads;
  const int64_t per = kMaxTraceRows * (C + 2 * kd + vd + 2 * Hv);
  if (!trace_.get()) {
    trace_ = dev_.alloc(static_cast<size_t>(std::max<int64_t>(1, lin_layers_ * per)) * 4, "GatedDeltaNet trace");
    drop_graph();
  }
  float* b = trace_.as<float>() + i * per;
  TraceRows t{};
  t.raw = b;
  t.q = t.raw + kMaxTraceRows * C;
  t.k = t.q + kMaxTraceRows * kd;
  t.v = t.k + kMaxTraceRows * kd;
  t.g = t.v + kMaxTraceRows * vd;
  t.beta = t.g + kMaxTraceRows * Hv;
  return t;
}

std::shared_ptr<const DeviceCheckpoint> CudaSeqState::checkpoint() const {
  auto cp = std::make_shared<CudaCheckpoint>();
  cp->gdn = dev_.alloc(gdn_.bytes(), "checkpoint of the GatedDeltaNet state");
  DeviceGuard g(dev_.ordinal());
  MERE_CUDA_CHECK(cudaMemcpyAsync(cp->gdn.get(), gdn_.get(), gdn_.bytes(), cudaMemcpyDeviceToDevice, dev_.stream()));
  return cp;
}

void CudaSeqState::restore(const DeviceCheckpoint& cp) {
  const auto* c = dynamic_cast<const CudaCheckpoint*>(&cp);
  MERE_CHECK(c != nullptr && c->gdn.bytes() == gdn_.bytes(), "cuda state", "checkpoint does not belong to this sequence");
  DeviceGuard g(dev_.ordinal());
  MERE_CUDA_CHECK(cudaMemcpyAsync(gdn_.get(), c->gdn.get(), gdn_.bytes(), cudaMemcpyDeviceToDevice, dev_.stream()));
}

std::unique_ptr<DeviceSequenceState> CudaSeqState::fork() const {
  auto f = std::make_unique<CudaSeqState>(dev_, cfg_, with_mtp_);
  f->graphs = graphs;
  DeviceGuard g(dev_.ordinal());
  MERE_CUDA_CHECK(cudaMemcpyAsync(f->gdn_.get(), gdn_.get(), gdn_.bytes(), cudaMemcpyDeviceToDevice, dev_.stream()));
  const size_t row_bytes = static_cast<size_t>(cfg_.num_kv_heads * cfg_.head_dim) * 4;
  if (cap_ > 0) {
    f->ensure_kv(cap_, false);
    f->rows_used_ = rows_used_;
    for (size_t i = 0; i < kv_.size(); ++i) {
      const size_t n = row_bytes * static_cast<size_t>(rows_used_);
      MERE_CUDA_CHECK(cudaMemcpyAsync(f->kv_[i].k.get(), kv_[i].k.get(), n, cudaMemcpyDeviceToDevice, dev_.stream()));
      MERE_CUDA_CHECK(cudaMemcpyAsync(f->kv_[i].v.get(), kv_[i].v.get(), n, cudaMemcpyDeviceToDevice, dev_.stream()));
    }
  }
  if (mtp_cap_ > 0) {
    f->ensure_kv(mtp_cap_, true);
    f->mtp_rows_used_ = mtp_rows_used_;
    const size_t n = row_bytes * static_cast<size_t>(mtp_rows_used_);
    MERE_CUDA_CHECK(cudaMemcpyAsync(f->mtp_.k.get(), mtp_.k.get(), n, cudaMemcpyDeviceToDevice, dev_.stream()));
    MERE_CUDA_CHECK(cudaMemcpyAsync(f->mtp_.v.get(), mtp_.v.get(), n, cudaMemcpyDeviceToDevice, dev_.stream()));
  }
  return f;
}

size_t CudaSeqState::bytes() const {
  size_t n = gdn_.bytes() + trace_.bytes() + mtp_.k.bytes() + mtp_.v.bytes();
  for (const auto& b : kv_) n += b.k.bytes() + b.v.bytes();
  return n;
}

}  // namespace mere::cuda
