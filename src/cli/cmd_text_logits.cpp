// `mere.run text logits`: one forward pass over given token ids, float32 [tokens, vocab] .npy out.
#include <cstdio>
#include <string>
#include <vector>

#include "cli/command.h"
#include "core/error.h"
#include "io/npy.h"
#include "model/qwen35.h"

namespace mere::cli {
namespace {

std::vector<int32_t> parse_ids(const std::string& s, int64_t vocab) {
  std::vector<int32_t> ids;
  size_t p = 0;
  while (p <= s.size()) {
    size_t e = s.find(',', p);
    if (e == std::string::npos) e = s.size();
    std::string tok = s.substr(p, e - p);
    MERE_CHECK(!tok.empty(), "cli", "--token-ids: empty entry at position ", ids.size());
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(tok, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    MERE_CHECK(used == tok.size(), "cli", "--token-ids: \"", tok, "\" is not an integer");
    MERE_CHECK(v >= 0 && v < vocab, "cli", "--token-ids: token id ", v, " out of range: expected 0 <= id < ", vocab);
    ids.push_back(static_cast<int32_t>(v));
    p = e + 1;
  }
  return ids;
}

int run_text_logits(const Args& a) {
  auto model = Qwen35Model::load(a.require("model"), a.get("backend", "cpu"));
  const auto& c = model->config();
  std::vector<int32_t> ids = parse_ids(a.require("token-ids"), c.vocab_size);
  const std::string out = a.require("output");
  ForwardOptions opt;
  std::string gdn = a.get("gdn", "auto");
  if (gdn == "recurrent") opt.gdn = ForwardOptions::Gdn::Recurrent;
  else if (gdn == "chunked") opt.gdn = ForwardOptions::Gdn::Chunked;
  else MERE_CHECK(gdn == "auto", "cli", "--gdn: expected auto, recurrent or chunked, got \"", gdn, "\"");
  const int64_t T = static_cast<int64_t>(ids.size());
  std::vector<float> logits(static_cast<size_t>(T * c.vocab_size));
  SequenceMemory mem = model->new_memory();
  model->forward(ids.data(), T, mem, nullptr, logits.data(), LogitsMode::All, opt);
  write_npy_f32(out, logits.data(), {T, c.vocab_size});
  std::fprintf(stderr, "wrote %s: float32 [%lld, %lld]\n", out.c_str(), (long long)T, (long long)c.vocab_size);
  return 0;
}

MERE_COMMAND(Command{"text logits", "one forward pass over token ids; writes float32 [tokens, vocab] logits as .npy", "",
                     {{"model", "DIR", "model directory", ""},
                      {"token-ids", "LIST", "comma-separated token ids, e.g. 1,2,3", ""},
                      {"output", "FILE", "output .npy path", ""},
                      {"gdn", "MODE", "GatedDeltaNet algorithm: auto, recurrent or chunked", "auto"},
                      {"backend", "NAME", "compute backend: cpu, ref or cuda (cuda:N)", "cpu"}},
                     run_text_logits});

}  // namespace
}  // namespace mere::cli
