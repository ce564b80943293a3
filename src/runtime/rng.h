// Request-local random number generator: xoshiro256** seeded through splitmix64. Small, fast and
// bit-for-bit identical on every platform and standard library (no std::*_distribution anywhere).
// One Rng lives per request; the sampler and speculative acceptance draw from the same stream, so a
// fixed seed reproduces the whole generation. Unseeded requests draw a seed from std::random_device
// and keep it, so the server can report the seed that reproduces the output.
#pragma once
#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>

namespace mere {

// splitmix64 (Steele, Lea, Flood 2014): advances state by the golden gamma and returns its mix.
// Equals java.util.SplittableRandom's nextLong() stream.
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class Rng {
 public:
  using result_type = uint64_t;  // UniformRandomBitGenerator, e.g. for std::shuffle in tests

  // State s[0..3] = four successive splitmix64 outputs starting from `seed` (never all zero).
  explicit Rng(uint64_t seed) : seed_(seed) {
    uint64_t sm = seed;
    for (auto& w : s_) w = splitmix64(sm);
  }

  // The request's seed, or one drawn from std::random_device when the request gave none.
  static Rng from_request(std::optional<uint64_t> seed) { return Rng(seed ? *seed : random_seed()); }

  static uint64_t random_seed() {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ static_cast<uint64_t>(rd());
  }

  // Raw state, for reference vectors only; seed() is then 0. An all-zero state is a fixed point.
  static Rng from_state(const std::array<uint64_t, 4>& s) {
    Rng r(0);
    r.s_ = s;
    return r;
  }

  uint64_t seed() const { return seed_; }

  // xoshiro256** 1.0 (Blackman & Vigna 2018).
  uint64_t next_u64() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform on [0, 1): the top 53 bits of one draw times 2^-53. Every value is an exact multiple
  // of 2^-53, so the result is identical everywhere. The sampler uses this one.
  double uniform_double() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

  // Uniform on [0, 1) in float: the top 24 bits of one draw times 2^-24.
  float uniform_float() { return static_cast<float>(next_u64() >> 40) * 0x1.0p-24f; }

  uint64_t operator()() { return next_u64(); }
  static constexpr uint64_t min() { return 0; }
  static constexpr uint64_t max() { return std::numeric_limits<uint64_t>::max(); }

  bool operator==(const Rng& o) const { return s_ == o.s_; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

  uint64_t seed_ = 0;
  std::array<uint64_t, 4> s_{};
};

}  // namespace mere
