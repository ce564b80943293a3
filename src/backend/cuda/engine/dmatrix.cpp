// WeightArena: host Matrix -> device DMat. Quantised matrices in the kernels' format (group 64,
// 4/8 bits, bf16 scales) go up unchanged; any other quantisation is dequantised to f32 rows (exact:
// the same formula as Matrix::row_f32); F16 floats are widened to f32, BF16 and F32 stay.
#include "backend/cuda/engine/dmatrix.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace mere::cuda {
namespace {

bool kernel_quant_format(const Matrix& m) {
  return m.quantized() && m.group == 64 && (m.bits == 4 || m.bits == 8) && m.scale_dtype == DType::BF16 &&
         m.cols % 128 == 0;
}

// One matrix's host bytes in the device format: (codes, scales, biases) or (rows as float).
struct HostImage {
  std::vector<uint8_t> owned;  // when converted
  const void* data = nullptr;
  size_t data_bytes = 0;
  const void* scales = nullptr;
  const void* biases = nullptr;
  size_t sb_bytes = 0;
  int bits = 0;
  bool bf16 = false;
};

HostImage image(const Matrix& m) {
  HostImage h;
  if (kernel_quant_format(m)) {
    h.data = m.data;
    h.data_bytes = static_cast<size_t>(m.rows * m.cols * m.bits / 8);
    h.scales = m.scales;
    h.biases = m.biases;
    h.sb_bytes = static_cast<size_t>(m.rows * (m.cols / 64)) * 2;
    h.bits = m.bits;
    return h;
  }
  if (!m.quantized() && (m.dtype == DType::BF16 || m.dtype == DType::F32)) {
    h.data = m.data;
    h.bf16 = m.dtype == DType::BF16;
    h.data_bytes = static_cast<size_t>(m.rows * m.cols) * (h.bf16 ? 2 : 4);
    return h;
  }
  h.owned.resize(static_cast<size_t>(m.rows * m.cols) * 4);
  auto* f = reinterpret_cast<float*>(h.owned.data());
  for (int64_t r = 0; r < m.rows; ++r) m.row_f32(r, f + r * m.cols);
  h.data = h.owned.data();
  h.data_bytes = h.owned.size();
  return h;
}

}  // namespace

// Every tensor is bump-allocated, 256-byte aligned, in one mapped range (vmm_heap.h): a cudaMalloc
// per tensor rounded each norm vector and scale table up to the driver's 2 MiB granularity (the
// 27B geometry held 1.2 GiB more than its weights), and 64 MiB slabs of small tensors plus one
// allocation a big tensor still left ~0.5 GiB of rounding and slab tails (session 7).
void* WeightArena::put(const void* host, size_t bytes, const char* what) {
  void* p = heap_.alloc(bytes, 256, what);
  if (host) dev_.upload(p, host, bytes);
  bytes_ += bytes;
  return p;
}

const float* WeightArena::upload_vec(const std::vector<float>& v, const char* what) {
  MERE_CHECK(!v.empty(), "cuda upload", "empty weight vector ", what);
  return static_cast<const float*>(put(v.data(), v.size() * 4, what));
}

DMat WeightArena::upload(const Matrix& m, const char* what, bool tile) {
  MERE_CHECK(!m.empty(), "cuda upload", "missing weight matrix ", what);
  for (const auto& [p, d] : seen_)
    if (p == m.data && d.rows == m.rows && d.cols == m.cols) return d;
  if (tile && kernel_quant_format(m) && m.bits == 4 && qmatvec_tiled_weights()) return upload_tiled(m, what);
  return upload_stacked({&m}, what);
}

// 64 MiB of staging (or one matrix when smaller): a 27B-geometry checkpoint goes up in ~250 chunks.
DMat WeightArena::upload_tiled(const Matrix& m, const char* what) {
  const QTiledBytes tb = qmatvec_tiled_bytes(m.rows, m.cols);
  const size_t want = std::max(qmatvec_tile_staging_min(m.cols),
                               std::min<size_t>(size_t{64} << 20, static_cast<size_t>(m.rows * (m.cols / 2 + m.cols / 16))));
  if (stage_.bytes() < want) stage_ = dev_.alloc(std::max(want, std::min<size_t>(size_t{64} << 20, 2 * want)), "tiled upload staging");
  void* codes = put(nullptr, tb.codes, what);
  void* sb = put(nullptr, tb.sb, what);
  qmatvec_tile_upload(dev_, m.data, static_cast<const uint16_t*>(m.scales), static_cast<const uint16_t*>(m.biases), m.rows, m.cols, codes, sb, stage_.get(), stage_.bytes());
  DMat d;
  d.rows = m.rows;
  d.cols = m.cols;
  d.bits = 4;
  d.data = codes;
  d.scales = static_cast<const uint16_t*>(sb);
  d.tiled = true;
  seen_.emplace_back(m.data, d);
  return d;
}

DMat WeightArena::upload_stacked(const std::vector<const Matrix*>& ms, const char* what) {
  MERE_CHECK(!ms.empty() && !ms[0]->empty(), "cuda upload", "missing weight matrix ", what);
  const Matrix& m0 = *ms[0];
  HostImage first = image(m0);
  DMat d;
  d.rows = m0.rows;
  d.cols = m0.cols;
  d.count = static_cast<int64_t>(ms.size());
  d.bits = first.bits;
  d.bf16 = first.bf16;
  const size_t n = ms.size();
  auto* data = static_cast<uint8_t*>(put(nullptr, first.data_bytes * n, what));
  uint8_t* sc = first.bits ? static_cast<uint8_t*>(put(nullptr, first.sb_bytes * n, what)) : nullptr;
  uint8_t* bi = first.bits ? static_cast<uint8_t*>(put(nullptr, first.sb_bytes * n, what)) : nullptr;
  for (size_t i = 0; i < n; ++i) {
    const Matrix& m = *ms[i];
    HostImage h = i == 0 ? std::move(first) : image(m);
    MERE_CHECK(m.rows == d.rows && m.cols == d.cols && h.bits == d.bits && h.bf16 == d.bf16 &&
                   h.data_bytes * n == static_cast<size_t>(d.count) * (d.bits ? d.rows * d.cols * d.bits / 8
                                                                              : d.rows * d.cols * (d.bf16 ? 2 : 4)),
               "cuda upload", what, ": stacked matrices differ in shape or format at index ", i);
    dev_.upload(data + i * h.data_bytes, h.data, h.data_bytes);
    if (d.bits) {
      dev_.upload(sc + i * h.sb_bytes, h.scales, h.sb_bytes);
      dev_.upload(bi + i * h.sb_bytes, h.biases, h.sb_bytes);
    }
  }
  d.data = data;
  d.scales = reinterpret_cast<const uint16_t*>(sc);
  d.biases = reinterpret_cast<const uint16_t*>(bi);
  if (n == 1) seen_.emplace_back(m0.data, d);
  return d;
}

}  // namespace mere::cuda
