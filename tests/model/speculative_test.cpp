// MTP speculation on tiny random-weight models (acceptance is near zero, so rollback and replay run
// almost every round): greedy output with MTP equals greedy output without it, token for token, at
// adaptive depth and at every forced depth; sampled output is reproducible from the seed and has the
// target's distribution.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "model/tiny_model.h"
#include "runtime/generator.h"

using namespace mere;

namespace {

std::vector<int32_t> ids_for(int64_t n, int64_t vocab, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int32_t> d(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(g);
  return v;
}

std::vector<int32_t> run(const Qwen35Model& m, const std::vector<int32_t>& prompt, const SamplingParams& p,
                         const SpeculationOptions& spec, GenerationStats* stats = nullptr) {
  Generator g(m);
  std::vector<int32_t> out;
  GenerationStats st = g.run(prompt, p, {}, 4096, [&](int32_t id) {
    out.push_back(id);
    return true;
  }, spec);
  if (stats) *stats = st;
  return out;
}

SpeculationOptions forced(int depth, int block = 4) {
  SpeculationOptions s;
  s.mode = SpeculationOptions::Mode::Forced;
  s.block_size = block;
  s.forced_depth = depth;
  return s;
}

class Speculative : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(Speculative, GreedyParityAtEveryDepth) {
  const auto& m = test::tiny_model(GetParam());
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 24;
  p.ignore_eos = true;
  for (unsigned s = 0; s < 3; ++s) {
    auto prompt = ids_for(5 + 7 * s, m.config().vocab_size, s);
    auto serial = run(m, prompt, p, SpeculationOptions::off());
    ASSERT_EQ(serial.size(), 24u);
    for (int d = 1; d <= 3; ++d) {
      GenerationStats st;
      EXPECT_EQ(run(m, prompt, p, forced(d), &st), serial) << "forced depth " << d;
      EXPECT_EQ(st.accel.route, "mtp");
      EXPECT_GT(st.accel.rounds, 0);
      EXPECT_EQ(st.accel.drafted_by_position[0], st.accel.rounds);
    }
    SpeculationOptions adaptive = forced(0);  // forced admission, adaptive depth
    GenerationStats st;
    EXPECT_EQ(run(m, prompt, p, adaptive, &st), serial);
    EXPECT_TRUE(st.accel.route == "mtp" || st.accel.route == "pipelined-fallback" || st.accel.route == "serial")
        << st.accel.route;
  }
}

TEST_P(Speculative, WideBlocksKeepParity) {
  const auto& m = test::tiny_model(GetParam());
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 20;
  p.ignore_eos = true;
  auto prompt = ids_for(9, m.config().vocab_size, 77);
  auto serial = run(m, prompt, p, SpeculationOptions::off());
  for (int d : {4, 8}) EXPECT_EQ(run(m, prompt, p, forced(d, 9)), serial) << "depth " << d;
}

TEST_P(Speculative, SampledIsReproducibleFromSeed) {
  const auto& m = test::tiny_model(GetParam());
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.9f;
  p.seed = 1234;
  p.max_tokens = 16;
  p.ignore_eos = true;
  auto prompt = ids_for(6, m.config().vocab_size, 5);
  auto a = run(m, prompt, p, forced(2));
  auto b = run(m, prompt, p, forced(2));
  EXPECT_EQ(a, b);
  p.seed = 99;
  EXPECT_NE(run(m, prompt, p, forced(2)), a);
}

// The first two generated tokens' joint distribution with MTP (depth 1, rejection sampling) matches
// the one without MTP: a two-sample chi-square test over the most frequent outcomes (p > 0.01).
TEST(SpeculativeSampling, DistributionMatchesSerial) {
  const auto& m = test::tiny_model("tiny-dense");
  auto prompt = ids_for(4, m.config().vocab_size, 3);
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 4;  // few outcomes so the test has power
  p.max_tokens = 2;
  p.ignore_eos = true;
  const int N = 800;
  std::map<std::pair<int, int>, int> with, without;
  for (int i = 0; i < N; ++i) {
    p.seed = 1000 + i;
    auto s = run(m, prompt, p, SpeculationOptions::off());
    without[{s[0], s[1]}]++;
    p.seed = 900000 + i;
    auto t = run(m, prompt, p, forced(1));
    with[{t[0], t[1]}]++;
  }
  std::map<std::pair<int, int>, std::pair<int, int>> cells;
  for (auto& [k, v] : without) cells[k].first += v;
  for (auto& [k, v] : with) cells[k].second += v;
  // merge rare cells (expected < 5) into one bin
  double chi2 = 0;
  int dof = -1, rare_a = 0, rare_b = 0;
  for (auto& [k, ab] : cells) {
    if (ab.first + ab.second < 10) {
      rare_a += ab.first;
      rare_b += ab.second;
      continue;
    }
    const double e = (ab.first + ab.second) / 2.0;
    chi2 += (ab.first - e) * (ab.first - e) / e + (ab.second - e) * (ab.second - e) / e;
    ++dof;
  }
  if (rare_a + rare_b > 0) {
    const double e = (rare_a + rare_b) / 2.0;
    chi2 += (rare_a - e) * (rare_a - e) / e + (rare_b - e) * (rare_b - e) / e;
    ++dof;
  }
  ASSERT_GE(dof, 3);
  // chi-square critical value at p = 0.01 (Wilson-Hilferty approximation)
  const double z = 2.326, k = dof;
  const double crit = k * std::pow(1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k)), 3);
  EXPECT_LT(chi2, crit) << "dof " << dof;
}

INSTANTIATE_TEST_SUITE_P(Tiny, Speculative, ::testing::Values("tiny-dense", "tiny-moe"));
