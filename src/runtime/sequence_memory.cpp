// SequenceMemory: allocation, checkpoint/rollback and size accounting.
#include "runtime/sequence_memory.h"

#include "core/error.h"

namespace mere {

void KvCache::append(const float* k_row, const float* v_row) {
  const size_t w = static_cast<size_t>(nkv * hd);
  k.insert(k.begin() + static_cast<std::ptrdiff_t>(length * nkv * hd), k_row, k_row + w);
  v.insert(v.begin() + static_cast<std::ptrdiff_t>(length * nkv * hd), v_row, v_row + w);
  ++length;
}

void KvCache::truncate(int64_t n) {
  MERE_CHECK(n >= 0 && n <= length, "kv-cache", "truncate to ", n, " of ", length, " rows");
  length = n;
  k.resize(static_cast<size_t>(n * nkv * hd));
  v.resize(static_cast<size_t>(n * nkv * hd));
}

SequenceMemory::SequenceMemory(const ModelConfig& c, bool with_mtp) {
  kv_.resize(static_cast<size_t>(c.num_layers));
  gdn_.resize(static_cast<size_t>(c.num_layers));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    if (c.layer_types[static_cast<size_t>(i)] == LayerKind::Full) {
      kv_[static_cast<size_t>(i)].nkv = c.num_kv_heads;
      kv_[static_cast<size_t>(i)].hd = c.head_dim;
    } else {
      GdnState& g = gdn_[static_cast<size_t>(i)];
      g.S.assign(static_cast<size_t>(c.lin_v_heads * c.lin_v_dim * c.lin_k_dim), 0.0f);
      g.conv.assign(static_cast<size_t>((c.conv_kernel - 1) * c.conv_dim()), 0.0f);
    }
  }
  if (with_mtp) {
    mtp_.nkv = c.num_kv_heads;
    mtp_.hd = c.head_dim;
  }
}

SequenceMemory::SequenceMemory(const ModelConfig& c, bool with_mtp, std::unique_ptr<DeviceSequenceState> device)
    : dev_(std::move(device)) {
  MERE_CHECK(dev_.get() != nullptr, "sequence-memory", "device sequence without a device state");
  kv_.resize(static_cast<size_t>(c.num_layers));   // nkv = 0: no host rows
  gdn_.resize(static_cast<size_t>(c.num_layers));  // empty: the state is on the device
  (void)with_mtp;
}

SequenceMemory::Checkpoint SequenceMemory::checkpoint() const {
  Checkpoint cp{length_, mtp_.length, gdn_, nullptr};
  if (dev_) cp.device = dev_.get()->checkpoint();
  return cp;
}

void SequenceMemory::rollback(const Checkpoint& cp) {
  MERE_CHECK(cp.length <= length_ && cp.mtp_length <= mtp_.length && cp.gdn.size() == gdn_.size(), "sequence-memory",
             "checkpoint does not belong to this sequence (length ", cp.length, " vs ", length_, ")");
  length_ = cp.length;
  for (auto& kv : kv_)
    if (kv.nkv) kv.truncate(cp.length);
  mtp_.truncate(cp.mtp_length);
  gdn_ = cp.gdn;
  if (dev_) restore_device(cp);
}

void SequenceMemory::restore_device(const Checkpoint& cp) {
  MERE_CHECK(cp.device != nullptr, "sequence-memory", "checkpoint of a host sequence used on a device sequence");
  dev_.get()->restore(*cp.device);
}

void SequenceMemory::rollback_keep(const Checkpoint& cp, int64_t n) {
  MERE_CHECK(n >= 0 && cp.length + n <= length_ && cp.gdn.size() == gdn_.size(), "sequence-memory", "cannot keep ", n,
             " rows after a checkpoint at ", cp.length, " (length ", length_, ")");
  length_ = cp.length + n;
  for (auto& kv : kv_)
    if (kv.nkv) kv.truncate(length_);
  gdn_ = cp.gdn;
  if (dev_) restore_device(cp);
}

void SequenceMemory::reset() {
  length_ = 0;
  for (auto& kv : kv_)
    if (kv.nkv) kv.truncate(0);
  mtp_.truncate(0);
  for (auto& g : gdn_) {
    std::fill(g.S.begin(), g.S.end(), 0.0f);
    std::fill(g.conv.begin(), g.conv.end(), 0.0f);
  }
  if (dev_) dev_.get()->reset();
}

size_t SequenceMemory::bytes() const {
  size_t n = mtp_.bytes() + (dev_ ? dev_.get()->bytes() : 0);
  for (const auto& kv : kv_) n += kv.bytes();
  for (const auto& g : gdn_) n += (g.S.size() + g.conv.size()) * sizeof(float);
  return n;
}

}  // namespace mere
