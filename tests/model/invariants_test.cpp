// Tiny-model invariants of the CPU reference engine: prefill(N) vs N single steps, batch-width
// invariance (bitwise), chunked vs recurrent GatedDeltaNet, rollback restores bitwise, fork is
// independent, MTP rows computed together equal rows computed one by one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"
#include "model/tiny_model.h"

using namespace mere;

namespace {

std::vector<int32_t> random_ids(int64_t n, int64_t vocab, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int32_t> d(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(g);
  return v;
}

// logits for each position computed one token at a time
std::vector<float> stepwise(const Qwen35Model& m, SequenceMemory& mem, const std::vector<int32_t>& ids) {
  const int64_t V = m.config().vocab_size;
  std::vector<float> out(ids.size() * static_cast<size_t>(V));
  for (size_t t = 0; t < ids.size(); ++t) m.forward(&ids[t], 1, mem, nullptr, out.data() + t * static_cast<size_t>(V), LogitsMode::Last);
  return out;
}

double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(a[i]) * a[i];
  }
  return std::sqrt(num / den);
}

class Invariants : public ::testing::TestWithParam<std::string> {
 protected:
  const Qwen35Model& model() { return test::tiny_model(GetParam()); }
};

}  // namespace

TEST_P(Invariants, WidthKPassEqualsKSingleStepsBitwise) {
  const auto& m = model();
  const int64_t V = m.config().vocab_size;
  auto prefix = random_ids(20, V, 1);
  for (int64_t k : {1, 2, 3, 5, 9}) {
    auto block = random_ids(k, V, 100 + static_cast<unsigned>(k));
    SequenceMemory a = m.new_memory(), b = m.new_memory();
    m.forward(prefix.data(), 20, a, nullptr, nullptr, LogitsMode::None);
    m.forward(prefix.data(), 20, b, nullptr, nullptr, LogitsMode::None);
    std::vector<float> wide(static_cast<size_t>(k * V));
    m.forward(block.data(), k, a, nullptr, wide.data(), LogitsMode::All);
    std::vector<float> steps = stepwise(m, b, block);
    ASSERT_EQ(wide, steps) << "width " << k << " differs from " << k << " single steps";
  }
}

// The greedy decoder's verification output: each row's argmax id (lowest id on ties) equals the
// argmax of that row's logits from the same pass with every logit returned.
TEST_P(Invariants, RowArgmaxIsTheArgmaxOfEachRow) {
  const auto& m = model();
  const int64_t V = m.config().vocab_size;
  auto prefix = random_ids(12, V, 3);
  for (int64_t k : {1, 4, 9}) {
    auto block = random_ids(k, V, 200 + static_cast<unsigned>(k));
    SequenceMemory a = m.new_memory(), b = m.new_memory();
    m.forward(prefix.data(), 12, a, nullptr, nullptr, LogitsMode::None);
    m.forward(prefix.data(), 12, b, nullptr, nullptr, LogitsMode::None);
    std::vector<float> all(static_cast<size_t>(k * V));
    GdnTrace ta, tb;
    ForwardOptions fa, fb;
    fa.gdn = fb.gdn = ForwardOptions::Gdn::Recurrent;
    fa.trace = &ta;
    fb.trace = &tb;
    m.forward(block.data(), k, a, nullptr, all.data(), LogitsMode::All, fa);
    std::vector<int32_t> ids(static_cast<size_t>(k), -1);
    fb.row_argmax = ids.data();
    m.forward(block.data(), k, b, nullptr, nullptr, LogitsMode::None, fb);
    for (int64_t t = 0; t < k; ++t) {
      const float* row = all.data() + t * V;
      EXPECT_EQ(ids[static_cast<size_t>(t)], std::max_element(row, row + V) - row) << "width " << k << " row " << t;
    }
    EXPECT_EQ(a.length(), b.length());
  }
  // more rows than a verification pass, or with the last-row argmax: a clear error
  SequenceMemory c = m.new_memory();
  std::vector<int32_t> ids(10);
  ForwardOptions fo;
  fo.row_argmax = ids.data();
  auto ten = random_ids(10, V, 9);
  EXPECT_THROW(m.forward(ten.data(), 10, c, nullptr, nullptr, LogitsMode::None, fo), Error);
  int32_t last = 0;
  fo.argmax = &last;
  EXPECT_THROW(m.forward(ten.data(), 2, c, nullptr, nullptr, LogitsMode::None, fo), Error);
}

TEST_P(Invariants, PrefillChunkedMatchesSteps) {
  const auto& m = model();
  const int64_t V = m.config().vocab_size, T = 70;  // > 64: a full chunk plus a tail
  auto ids = random_ids(T, V, 7);
  SequenceMemory a = m.new_memory(), b = m.new_memory(), c = m.new_memory();
  std::vector<float> chunked(static_cast<size_t>(T * V)), recurrent(static_cast<size_t>(T * V));
  ForwardOptions oc, orr;
  oc.gdn = ForwardOptions::Gdn::Chunked;
  orr.gdn = ForwardOptions::Gdn::Recurrent;
  m.forward(ids.data(), T, a, nullptr, chunked.data(), LogitsMode::All, oc);
  m.forward(ids.data(), T, b, nullptr, recurrent.data(), LogitsMode::All, orr);
  std::vector<float> steps = stepwise(m, c, ids);
  EXPECT_EQ(recurrent, steps);
  EXPECT_LT(rel_err(recurrent, chunked), 1e-5);
  // decode after a chunked prefill continues correctly
  int32_t next = 3;
  std::vector<float> la(static_cast<size_t>(V)), lc(static_cast<size_t>(V));
  m.forward(&next, 1, a, nullptr, la.data(), LogitsMode::Last);
  m.forward(&next, 1, c, nullptr, lc.data(), LogitsMode::Last);
  EXPECT_LT(rel_err(lc, la), 1e-5);
}

TEST_P(Invariants, RollbackRestoresBitwise) {
  const auto& m = model();
  const int64_t V = m.config().vocab_size;
  auto prefix = random_ids(12, V, 3), draft = random_ids(5, V, 4), other = random_ids(3, V, 5);
  SequenceMemory mem = m.new_memory();
  m.forward(prefix.data(), 12, mem, nullptr, nullptr, LogitsMode::None);
  auto cp = mem.checkpoint();
  std::vector<float> first(static_cast<size_t>(3 * V)), second(static_cast<size_t>(3 * V));
  m.forward(other.data(), 3, mem, nullptr, first.data(), LogitsMode::All);
  mem.rollback(cp);
  m.forward(draft.data(), 5, mem, nullptr, nullptr, LogitsMode::None);
  mem.rollback(cp);
  EXPECT_EQ(mem.length(), 12);
  m.forward(other.data(), 3, mem, nullptr, second.data(), LogitsMode::All);
  EXPECT_EQ(first, second);
}

TEST_P(Invariants, ForkIsIndependent) {
  const auto& m = model();
  const int64_t V = m.config().vocab_size;
  auto prefix = random_ids(10, V, 8), a_ids = random_ids(4, V, 9), b_ids = random_ids(4, V, 10);
  SequenceMemory parent = m.new_memory();
  m.forward(prefix.data(), 10, parent, nullptr, nullptr, LogitsMode::None);
  SequenceMemory child = parent.fork();
  std::vector<float> la(static_cast<size_t>(V)), lb(static_cast<size_t>(V)), ref(static_cast<size_t>(V));
  m.forward(a_ids.data(), 4, parent, nullptr, la.data(), LogitsMode::Last);
  m.forward(b_ids.data(), 4, child, nullptr, lb.data(), LogitsMode::Last);
  SequenceMemory fresh = m.new_memory();
  std::vector<int32_t> all = prefix;
  all.insert(all.end(), b_ids.begin(), b_ids.end());
  m.forward(all.data(), 14, fresh, nullptr, ref.data(), LogitsMode::Last, ForwardOptions{ForwardOptions::Gdn::Recurrent});
  EXPECT_EQ(lb, ref);
  EXPECT_NE(la, lb);
  EXPECT_EQ(parent.length(), 14);
  EXPECT_EQ(child.length(), 14);
}

TEST_P(Invariants, MtpRowsTogetherEqualRowByRow) {
  const auto& m = model();
  ASSERT_TRUE(m.has_mtp());
  const int64_t V = m.config().vocab_size, H = m.config().hidden_size, T = 9;
  auto ids = random_ids(T + 1, V, 11);
  SequenceMemory mem = m.new_memory();
  std::vector<float> hidden(static_cast<size_t>(T * H));
  m.forward(ids.data(), T, mem, hidden.data(), nullptr, LogitsMode::None);
  SequenceMemory a = mem.fork(), b = mem.fork();
  std::vector<float> la(static_cast<size_t>(T * V)), lb(static_cast<size_t>(T * V));
  m.mtp_forward(hidden.data(), ids.data() + 1, T, a, nullptr, la.data());
  for (int64_t t = 0; t < T; ++t)
    m.mtp_forward(hidden.data() + t * H, ids.data() + 1 + t, 1, b, nullptr, lb.data() + t * V);
  EXPECT_EQ(la, lb);
  EXPECT_EQ(a.mtp_length(), T);
}

TEST_P(Invariants, BadTokenIdIsAnError) {
  const auto& m = model();
  SequenceMemory mem = m.new_memory();
  int32_t bad = static_cast<int32_t>(m.config().vocab_size);
  EXPECT_THROW(m.forward(&bad, 1, mem, nullptr, nullptr, LogitsMode::None), mere::Error);
}

INSTANTIATE_TEST_SUITE_P(Tiny, Invariants, ::testing::Values("tiny-dense", "tiny-moe"));
