// SHA-256 (FIPS 180-4): an incremental hasher and one-shot helpers returning lowercase hex.
// Used for receipts (hashes of generated token ids and text) where a result must be comparable
// across runs, machines and implementations (Python's hashlib gives the same digests).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace mere {

class Sha256 {
 public:
  using Digest = std::array<uint8_t, 32>;

  Sha256() { reset(); }
  void reset();
  Sha256& update(const void* data, size_t size);
  Sha256& update(std::string_view s) { return update(s.data(), s.size()); }
  // Pads and returns the digest; the hasher is reset afterwards and can be reused.
  Digest finish();
  std::string finish_hex();

 private:
  void compress(const uint8_t* block);
  std::array<uint32_t, 8> h_{};
  std::array<uint8_t, 64> buf_{};
  size_t buf_len_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string to_hex(std::span<const uint8_t> bytes);
std::string sha256_hex(std::string_view data);
// Digest of the ids as consecutive 4-byte little-endian two's-complement integers.
std::string sha256_hex_token_ids(std::span<const int32_t> ids);

}  // namespace mere
