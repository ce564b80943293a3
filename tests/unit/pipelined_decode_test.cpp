// The pipelined greedy decoder's control logic (runtime/pipelined_decode.h) against a fake device
// engine whose "model" is a fixed token chain: the emitted ids must be exactly the serial chain,
// at most two steps in flight, every submitted step collected, the budget and an early stop
// respected (one step computed past a stop is thrown away, none past the budget).
#include <gtest/gtest.h>

#include <deque>
#include <stdexcept>
#include <vector>

#include "runtime/pipelined_decode.h"

using namespace mere;

namespace {

int32_t next_of(int32_t id) { return (id * 7 + 3) % 50; }

class FakeEngine final : public DeviceEngine {
 public:
  std::string describe() const override { return "fake"; }
  size_t weight_bytes() const override { return 0; }
  std::unique_ptr<DeviceSequenceState> new_state() override { return nullptr; }
  double copy_bandwidth_gbs() override { return 0; }
  DeviceMemoryReport device_memory() override { return {}; }
  void forward(const int32_t*, int64_t, SequenceMemory&, float*, float*, LogitsMode, const ForwardOptions&) override {
    throw std::logic_error("not used");
  }
  void mtp_forward(const float*, const int32_t*, int64_t, SequenceMemory&, float*, float*, LogitsMode) override {
    throw std::logic_error("not used");
  }
  void replay_gdn(int64_t, SequenceMemory&) override { throw std::logic_error("not used"); }
  void draft_greedy(const float*, const int32_t*, int64_t, int, SequenceMemory&, int32_t*) override {
    throw std::logic_error("not used");
  }
  bool drafts_on_device() const override { return false; }

  void submit_greedy(SequenceMemory& mem, const int32_t* host_id) override {
    if (static_cast<int>(queue.size()) >= kMaxGreedyInFlight) throw std::logic_error("too many in flight");
    const int32_t in = host_id ? *host_id : last_out;  // the previous step's device argmax
    if (!host_id && !have_out) throw std::logic_error("no device argmax to chain from");
    last_out = next_of(in);
    have_out = true;
    queue.push_back(last_out);
    ++submitted;
    max_in_flight = std::max(max_in_flight, static_cast<int>(queue.size()));
    mem.advance(1);
  }
  int32_t collect_greedy(SequenceMemory&) override {
    if (queue.empty()) throw std::logic_error("nothing in flight");
    const int32_t v = queue.front();
    queue.pop_front();
    return v;
  }

  std::deque<int32_t> queue;
  int32_t last_out = 0;
  bool have_out = false;
  int submitted = 0, max_in_flight = 0;
};

std::vector<int32_t> chain(int32_t first, int n) {
  std::vector<int32_t> v;
  for (int32_t id = first; static_cast<int>(v.size()) < n;) v.push_back(id = next_of(id));
  return v;
}

}  // namespace

TEST(PipelinedDecode, EmitsTheSerialChainWithinTheBudget) {
  for (int remaining : {1, 2, 3, 10, 57}) {
    FakeEngine eng;
    SequenceMemory mem;
    std::vector<int32_t> got;
    const int64_t n = decode_pipelined(eng, mem, 5, remaining, [&](int32_t id) {
      got.push_back(id);
      return true;
    });
    EXPECT_EQ(n, remaining);
    EXPECT_EQ(got, chain(5, remaining)) << "remaining " << remaining;
    EXPECT_EQ(eng.submitted, remaining) << "no step computed past the budget";
    EXPECT_TRUE(eng.queue.empty());
    EXPECT_EQ(mem.length(), remaining);
    EXPECT_LE(eng.max_in_flight, DeviceEngine::kMaxGreedyInFlight);
    if (remaining >= 3) {
      EXPECT_EQ(eng.max_in_flight, 2) << "the host reads token N while step N+1 runs";
    }
  }
}

TEST(PipelinedDecode, StopThrowsAwayOneStepAndDrains) {
  FakeEngine eng;
  SequenceMemory mem;
  std::vector<int32_t> got;
  const auto want = chain(9, 4);
  const int64_t n = decode_pipelined(eng, mem, 9, 100, [&](int32_t id) {
    if (got.size() == 3) return false;  // the 4th token ends generation (EOS): not emitted
    got.push_back(id);
    return true;
  });
  EXPECT_EQ(n, 3);
  EXPECT_EQ(got, std::vector<int32_t>(want.begin(), want.begin() + 3));
  EXPECT_TRUE(eng.queue.empty()) << "every submitted step is collected before returning";
  EXPECT_EQ(eng.submitted, 5) << "four tokens read plus one step computed past the stop";
}

TEST(PipelinedDecode, NothingToDo) {
  FakeEngine eng;
  SequenceMemory mem;
  EXPECT_EQ(decode_pipelined(eng, mem, 1, 0, [](int32_t) { return true; }), 0);
  EXPECT_EQ(eng.submitted, 0);
}
