// GPU-machine checks of the CUDA engine (no gtest there): `mere_engine_check [REPO_ROOT [ONLY]]`;
// ONLY: run just the sections whose name contains it (e.g. "MoE block"), for short device calls.
//  1. transformers goldens (tests/data/goldens/*): CUDA logits vs logits.npy, the foundation bound
//     max|diff| <= 1e-3 * max|ref| and argmax agreement (>= 99.9%, all rows when fewer than 1000).
//  2. bundled models vs the PyTorch MTP fixtures (tests/data/mtp/*): main logits, MTP priming
//     logits, chained drafts 2 and 3 (mirrors tests/model/bundled_mtp_test.cpp on "cuda").
//  3. CUDA vs the CPU reference on the bundled models: logits NMSE, and greedy 256-token
//     generations from 8 prompts: CUDA (plain), CUDA with MTP and the CPU must be equal; the first
//     divergence is reported. Also: prompts of 16..58 tokens (tensor-core prefill) greedy vs the
//     CPU; the foundation-bound logits checks (2, 3) run with MERE_CUDA_PREFILL=exact, and the
//     default tensor-core prefill's logits are bound by NMSE <= 1e-4 and argmax on every row.
//  4. MERE_CUDA_ATTN=gqa (the GQA-aware decode attention, the default) vs the split kernel on the bundled
//     models: token-by-token decode logits (64-token prompt; 32 steps after a 1,200-token prefill, so
//     spans hold several tiles) NMSE <= 1e-10 and argmax equal, greedy 64 tokens (plain and MTP)
//     equal, batch-width invariance under gqa.
//  5. Fusion (MERE_CUDA_FUSE, default on) vs MERE_CUDA_FUSE=0 on the 4-bit bundled MoE and a 4-bit
//     g64 copy of the dense model (quantised into a temporary directory): decode and verification
//     (T = 9) logits and MTP-head logits bitwise equal, greedy 64 tokens (plain and MTP) equal; the
//     4-bit dense copy's fused decode logits also against the CPU reference (NMSE <= 1e-10).
//  6. The same pairs for the other switches that must not change a bit (MoE routing and block, the
//     argmax forms, the GDN block, the step + norm launch, the attention merge, MERE_CUDA_CONV=tokens and loop,
//     MERE_CUDA_DRAFTS=host, MERE_CUDA_HEAD_PREFILL=off)
//     on the bundled MoE and random 4-bit checkpoints of the 35B-A3B (4 layers) and 0.8B geometries;
//     every pair also holds each engine's MTP generation to its own plain one (exactness).
//  7. The head's priming on the prompt's GEMMs (the default) against 9-row head passes: the head rows
//     after it within the tensor-core prefill's bound, on both bundled models and both geometries.
//  8. Two devices in one process (a 2-GPU machine; skipped on one): the 0.8B geometry's greedy
//     generations on cuda:1 after cuda:0, under both 4-bit matvec kernels.
// Prints one line per check and a summary; exit status 1 when any check fails.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/json.h"
#include "io/npy.h"
#include "model/device_engine.h"
#include "model/geometry.h"
#include "model/qwen35.h"
#include "model/synth.h"
#include "quant/convert.h"
#include "runtime/generator.h"

namespace fs = std::filesystem;
using namespace mere;

namespace {

int g_fail = 0, g_checks = 0;

void report(bool ok, const std::string& what, const std::string& detail) {
  ++g_checks;
  if (!ok) ++g_fail;
  std::printf("%s %s: %s\n", ok ? "PASS" : "FAIL", what.c_str(), detail.c_str());
  std::fflush(stdout);
}

// Differences of `rows` logit rows of width V against a reference.
struct LogitDiff {
  double max_abs = 0, max_ref = 0, nmse = 0;
  int64_t argmax_agree = 0, bitwise_rows = 0;
  bool finite = true;
};
LogitDiff logit_diff(const float* got, const float* ref, int64_t rows, int64_t V) {
  LogitDiff r;
  double se = 0, sr = 0;
  for (int64_t t = 0; t < rows; ++t) {
    const float* g = got + t * V;
    const float* f = ref + t * V;
    for (int64_t v = 0; v < V; ++v) {
      r.finite = r.finite && std::isfinite(g[v]);
      const double d = double(g[v]) - f[v];
      r.max_abs = std::max(r.max_abs, std::fabs(d));
      r.max_ref = std::max(r.max_ref, std::fabs(double(f[v])));
      se += d * d;
      sr += double(f[v]) * f[v];
    }
    r.argmax_agree += (std::max_element(g, g + V) - g) == (std::max_element(f, f + V) - f);
    r.bitwise_rows += std::memcmp(g, f, static_cast<size_t>(V) * 4) == 0;
  }
  r.nmse = sr > 0 ? se / sr : 0.0;
  return r;
}

// foundation bound: max|diff| <= 1e-3 max|ref|, argmax agreement; also reports NMSE
void compare(const float* got, const float* ref, int64_t rows, int64_t V, const std::string& what) {
  const LogitDiff d = logit_diff(got, ref, rows, V);
  const double need = rows >= 1000 ? 0.999 : 1.0;
  const bool ok = d.finite && d.max_abs <= 1e-3 * d.max_ref && double(d.argmax_agree) / double(rows) >= need;
  char buf[256];
  std::snprintf(buf, sizeof buf, "max|d| %.3g (bound %.3g), nmse %.3g, argmax %lld/%lld%s", d.max_abs, 1e-3 * d.max_ref,
                d.nmse, (long long)d.argmax_agree, (long long)rows, d.finite ? "" : ", NON-FINITE");
  report(ok, what, buf);
}

std::vector<int32_t> read_ids(const std::string& path) {
  std::vector<int32_t> ids;
  const Json j = Json::parse_file(path);
  for (const auto& v : j.as_array()) ids.push_back(static_cast<int32_t>(v.as_int()));
  return ids;
}

std::vector<float> logits_all(const Qwen35Model& m, const std::vector<int32_t>& ids, std::vector<float>* hidden) {
  const int64_t T = static_cast<int64_t>(ids.size()), V = m.config().vocab_size;
  std::vector<float> lg(static_cast<size_t>(T * V));
  if (hidden) hidden->resize(static_cast<size_t>(T * m.config().hidden_size));
  SequenceMemory mem = m.new_memory();
  m.forward(ids.data(), T, mem, hidden ? hidden->data() : nullptr, lg.data(), LogitsMode::All);
  return lg;
}

void goldens(const std::string& root) {
  std::vector<std::string> cases;
  for (const auto& e : fs::directory_iterator(root + "/tests/data/goldens"))
    if (fs::exists(e.path() / "logits.npy")) cases.push_back(e.path().string());
  std::sort(cases.begin(), cases.end());
  for (const auto& dir : cases) {
    auto m = Qwen35Model::load(dir, "cuda");
    const auto ids = read_ids(dir + "/input_ids.json");
    const auto ref = read_npy_f32(dir + "/logits.npy");
    const auto got = logits_all(*m, ids, nullptr);
    compare(got.data(), ref.data.data(), ref.shape[0], m->config().vocab_size,
            "golden " + fs::path(dir).filename().string());
  }
}

void mtp_fixture(const std::string& root, const std::string& name) {
  const std::string fx = root + "/tests/data/mtp/" + name;
  auto m = Qwen35Model::load(root + "/models/" + name, "cuda");
  const int64_t H = m->config().hidden_size, V = m->config().vocab_size;
  const auto ids = read_ids(fx + "/input_ids.json");
  const int64_t T = static_cast<int64_t>(ids.size());
  SequenceMemory mem = m->new_memory();
  std::vector<float> hidden(static_cast<size_t>(T * H)), lg(static_cast<size_t>(T * V));
  m->forward(ids.data(), T, mem, hidden.data(), lg.data(), LogitsMode::All);
  compare(lg.data(), read_npy_f32(fx + "/main_logits.npy").data.data(), T, V, name + " main logits vs PyTorch");
  std::vector<float> mh(static_cast<size_t>((T - 1) * H)), ml(static_cast<size_t>((T - 1) * V));
  m->mtp_forward(hidden.data(), ids.data() + 1, T - 1, mem, mh.data(), ml.data());
  compare(ml.data(), read_npy_f32(fx + "/mtp_logits_1.npy").data.data(), T - 1, V, name + " MTP draft 1 (priming)");
  const Json drafts = Json::parse_file(fx + "/drafts.json");
  const auto m2 = read_npy_f32(fx + "/mtp_logits_2.npy"), m3 = read_npy_f32(fx + "/mtp_logits_3.npy");
  const int64_t P = static_cast<int64_t>(drafts.size());
  std::vector<float> l2(static_cast<size_t>(P * V)), l3(static_cast<size_t>(P * V));
  for (int64_t k = 0; k < P; ++k) {
    const Json& d = drafts.at(static_cast<size_t>(k));
    const int64_t b = d.at("b").as_int();
    SequenceMemory f = mem.fork();
    f.mtp_kv().truncate(b + 1);
    const int32_t d1 = static_cast<int32_t>(d.at("d1").as_int()), d2 = static_cast<int32_t>(d.at("d2").as_int());
    std::vector<float> h2(static_cast<size_t>(H)), h3(static_cast<size_t>(H));
    m->mtp_forward(mh.data() + b * H, &d1, 1, f, h2.data(), l2.data() + k * V);
    m->mtp_forward(h2.data(), &d2, 1, f, h3.data(), l3.data() + k * V);
  }
  compare(l2.data(), m2.data.data(), P, V, name + " MTP draft 2 (chained)");
  compare(l3.data(), m3.data.data(), P, V, name + " MTP draft 3 (chained)");
}

// Index of the first token where two generations differ; -1 when they are equal.
long long first_diff(const std::vector<int32_t>& x, const std::vector<int32_t>& y) {
  size_t i = 0;
  while (i < x.size() && i < y.size() && x[i] == y[i]) ++i;
  return i == x.size() && i == y.size() ? -1 : static_cast<long long>(i);
}

std::vector<int32_t> generate_with(const Qwen35Model& m, const std::vector<int32_t>& prompt, int64_t n,
                                   const SpeculationOptions& spec) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = n;
  p.ignore_eos = true;
  std::vector<int32_t> out;
  Generator(m).run(prompt, p, {}, m.config().max_position_embeddings, [&](int32_t id) {
    out.push_back(id);
    return true;
  }, spec);
  return out;
}

std::vector<int32_t> generate(const Qwen35Model& m, const std::vector<int32_t>& prompt, int64_t n, bool mtp) {
  SpeculationOptions spec = mtp ? SpeculationOptions{} : SpeculationOptions::off();
  if (mtp) spec.mode = SpeculationOptions::Mode::Forced;
  return generate_with(m, prompt, n, spec);
}

void parity(const std::string& root, const std::string& name) {
  auto cpu = Qwen35Model::load(root + "/models/" + name, "ref");
  auto gpu = Qwen35Model::load(root + "/models/" + name, "cuda");
  const int64_t V = cpu->config().vocab_size;
  const auto ids = read_ids(root + "/tests/data/mtp/" + name + "/input_ids.json");
  const auto a = logits_all(*cpu, ids, nullptr);
  {  // the foundation bound holds for the exact (sliced) prefill
    setenv("MERE_CUDA_PREFILL", "exact", 1);
    const auto b = logits_all(*gpu, ids, nullptr);
    unsetenv("MERE_CUDA_PREFILL");
    compare(b.data(), a.data(), static_cast<int64_t>(ids.size()), V, name + " CUDA vs CPU reference logits");
  }
  {  // the default tensor-core prefill (bf16 activations in quantised GEMMs): NMSE <= 1e-4 and argmax
    // on every row that is not a tie at the foundation's precision: a row may pick another token only
    // if the reference ranks it within the foundation bound (1e-3 max|ref|) of its own top logit (the
    // fp32 summation order of the GEMMs decides such near-ties). max|d| reported against that bound.
    const auto b = logits_all(*gpu, ids, nullptr);
    const int64_t T = static_cast<int64_t>(ids.size());
    const LogitDiff d = logit_diff(b.data(), a.data(), T, V);
    const double tie = 1e-3 * d.max_ref;
    int64_t ties = 0, flips = 0;
    std::string gaps;
    for (int64_t t = 0; t < T; ++t) {
      const float* g = b.data() + t * V;
      const float* f = a.data() + t * V;
      const int64_t ga = std::max_element(g, g + V) - g, fa = std::max_element(f, f + V) - f;
      if (ga == fa) continue;
      const double gap = double(f[fa]) - f[ga];  // reference logit of its top token over the token chosen
      (gap <= tie ? ties : flips) += 1;
      char one[64];
      std::snprintf(one, sizeof one, "%s row %lld gap %.3g", gaps.empty() ? "" : ",", (long long)t, gap);
      gaps += one;
    }
    char buf[384];
    std::snprintf(buf, sizeof buf,
                  "nmse %.3g (bound 1e-4), argmax %lld/%lld (%lld near-ties within %.3g%s%s), max|d| %.3g (foundation "
                  "bound %.3g)%s",
                  d.nmse, (long long)d.argmax_agree, (long long)T, (long long)ties, tie, gaps.empty() ? "" : ": ",
                  gaps.c_str(), d.max_abs, tie, d.finite ? "" : ", NON-FINITE");
    report(d.finite && d.nmse <= 1e-4 && flips == 0, name + " CUDA tensor-core prefill vs CPU reference logits", buf);
  }
  {  // batch-width invariance (mtp.md §6): a T-row pass (T = 2..9) equals T one-row passes bitwise
    SequenceMemory base = gpu->new_memory();
    gpu->forward(ids.data(), 5, base, nullptr, nullptr, LogitsMode::None);
    std::vector<float> one(static_cast<size_t>(9 * V)), wide(static_cast<size_t>(9 * V));
    SequenceMemory a = base.fork();
    for (int64_t t = 0; t < 9; ++t) gpu->forward(ids.data() + 5 + t, 1, a, nullptr, one.data() + t * V, LogitsMode::All);
    int bad = 0;
    for (int64_t w = 2; w <= 9; ++w) {
      SequenceMemory b = base.fork();
      gpu->forward(ids.data() + 5, w, b, nullptr, wide.data(), LogitsMode::All);
      bad += std::memcmp(one.data(), wide.data(), static_cast<size_t>(w * V) * 4) != 0;
    }
    report(bad == 0, name + " batch-width invariance T=2..9 vs T=1 (bitwise logits)",
           std::to_string(8 - bad) + "/8 widths equal");
    // the greedy decoder's verification output (ForwardOptions::row_argmax, computed on the device
    // and returned as ids): each row's id equals the argmax of the T = 1 logits, widths 1..9, traced
    int wrong = 0;
    for (int64_t w = 1; w <= 9; ++w) {
      SequenceMemory b = base.fork();
      std::vector<int32_t> got(static_cast<size_t>(w), -1);
      GdnTrace trace;
      ForwardOptions fo;
      fo.gdn = ForwardOptions::Gdn::Recurrent;
      fo.trace = &trace;
      fo.row_argmax = got.data();
      gpu->forward(ids.data() + 5, w, b, nullptr, nullptr, LogitsMode::None, fo);
      for (int64_t t = 0; t < w; ++t) {
        const float* row = one.data() + t * V;
        wrong += got[static_cast<size_t>(t)] != std::max_element(row, row + V) - row;
      }
    }
    report(wrong == 0, name + " verification row argmax (device ids, widths 1..9, traced) == argmax of T=1 logits",
           std::to_string(45 - wrong) + "/45 rows equal");
  }
  int equal = 0, equal_mtp = 0, equal_sched = 0;
  const int prompts = 8;
  // the CPU reference generations of both prompt sets run in parallel up front (the reference
  // backend keeps no state between calls and every generation owns its sequence memory; the
  // GPU machine has 16 cores): the GPU side below stays serial on the device's stream
  std::vector<std::vector<int32_t>> short_prompts, long_prompts;
  for (int p = 0; p < prompts; ++p) {
    short_prompts.emplace_back(ids.begin() + p * 4, ids.begin() + p * 4 + 5 + p);
    const int64_t len = 16 + 6 * p, start = p % 4;
    long_prompts.emplace_back(ids.begin() + start, ids.begin() + start + len);
  }
  std::vector<std::future<std::vector<int32_t>>> cpu_short, cpu_long;
  for (int p = 0; p < prompts; ++p) {
    cpu_short.push_back(std::async(std::launch::async, [&, p] { return generate(*cpu, short_prompts[p], 256, false); }));
    cpu_long.push_back(std::async(std::launch::async, [&, p] { return generate(*cpu, long_prompts[p], 256, false); }));
  }
  for (int p = 0; p < prompts; ++p) {
    const std::vector<int32_t>& prompt = short_prompts[p];
    const auto c = cpu_short[p].get(), g = generate(*gpu, prompt, 256, false);
    const auto gm = gpu->has_mtp() ? generate(*gpu, prompt, 256, true) : g;
    {  // scheduling controls (mtp.md §4-5): the pipelined decoder, no graph, and adaptive MTP with
       // the pipelined fallback must all give the same greedy tokens
      SpeculationOptions piped = SpeculationOptions::off(), eager = SpeculationOptions::off(), adaptive;
      piped.async_decode_blocks = true;
      eager.scoped_compile = false;
      adaptive.async_decode_blocks = true;
      adaptive.pipelined_fallback = true;
      const bool same = generate_with(*gpu, prompt, 256, piped) == g && generate_with(*gpu, prompt, 256, eager) == g &&
                        generate_with(*gpu, prompt, 256, adaptive) == g;
      equal_sched += same;
      if (!same) std::printf("  %s prompt %d: a scheduling variant differs from the plain CUDA decode\n", name.c_str(), p);
    }
    const long long d = first_diff(c, g), dm = first_diff(g, gm);
    equal += d < 0;
    equal_mtp += dm < 0;
    std::printf("  %s prompt %d: cpu %zu tokens, cuda %s, cuda+mtp vs cuda %s\n", name.c_str(), p, c.size(),
                d < 0 ? "equal" : ("diverges at token " + std::to_string(d)).c_str(),
                dm < 0 ? "equal" : ("diverges at token " + std::to_string(dm)).c_str());
  }
  report(equal * 100 >= 95 * prompts, name + " greedy 256 tokens CUDA == CPU",
         std::to_string(equal) + "/" + std::to_string(prompts) + " prompts equal");
  report(equal_mtp == prompts, name + " greedy 256 tokens CUDA+MTP == CUDA",
         std::to_string(equal_mtp) + "/" + std::to_string(prompts) + " prompts equal");
  report(equal_sched == prompts, name + " greedy 256 tokens pipelined / no graph / adaptive+pipelined fallback == CUDA",
         std::to_string(equal_sched) + "/" + std::to_string(prompts) + " prompts equal");
  // Prompts of 16..58 tokens: the prefill runs on the tensor-core path (T >= 16, bf16 activations
  // in the quantised GEMMs), so greedy decode may leave the CPU's at a near tie.
  int equal_long = 0;
  for (int p = 0; p < prompts; ++p) {
    const int64_t len = static_cast<int64_t>(long_prompts[p].size());
    const auto c = cpu_long[p].get(), g = generate(*gpu, long_prompts[p], 256, false);
    const long long d = first_diff(c, g);
    equal_long += d < 0;
    std::printf("  %s long prompt %d (%lld tokens): cuda %s\n", name.c_str(), p, static_cast<long long>(len),
                d < 0 ? "equal" : ("diverges at token " + std::to_string(d)).c_str());
  }
  report(equal_long * 100 >= 95 * prompts, name + " greedy 256 tokens after a 16..58-token prefill CUDA == CPU",
         std::to_string(equal_long) + "/" + std::to_string(prompts) + " prompts equal");
}

// Sets (value != nullptr) or unsets an environment variable for its lifetime, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

// MERE_CUDA_ATTN=gqa (the default where supported) vs the split attention kernel. The engine reads
// MERE_CUDA_ATTN once, when it is constructed (at Qwen35Model::load), so the model is loaded twice:
// once with MERE_CUDA_ATTN=split and once with MERE_CUDA_ATTN=gqa set around the load; both
// engines then live side by side. Decode logits (token by token, T = 1 passes) must agree within
// NMSE <= 1e-10 with argmax equal on every row (fp32 in both; only the summation order differs),
// at a short context (the 64-token prompt: one tile a span) and after a 1,200-token prefill (spans
// of ~76 positions: two tiles, the online-softmax rescale across tiles); greedy 64 tokens equal
// (plain, and with MTP: the MTP head's attention goes through the same switch); the batch-width
// invariance contract holds under gqa. Bitwise-equal logits everywhere would mean the switch did not
// take (different summation orders cannot agree on every bit of 96 x 8,192 logits): reported as a
// failure.
void attn_gqa(const std::string& root, const std::string& name) {
  const std::string dir = root + "/models/" + name;
  std::unique_ptr<Qwen35Model> base, gqa;
  {
    ScopedEnv e("MERE_CUDA_ATTN", "split");
    base = Qwen35Model::load(dir, "cuda");
  }
  {
    ScopedEnv e("MERE_CUDA_ATTN", "gqa");
    gqa = Qwen35Model::load(dir, "cuda");
  }
  const int64_t V = base->config().vocab_size;
  const auto ids = read_ids(root + "/tests/data/mtp/" + name + "/input_ids.json");
  // `prefix` tokens in one call (prefill), then the rest one token a call: the decoded rows' logits
  auto decode_logits = [&](const Qwen35Model& m, const std::vector<int32_t>& toks, int64_t prefix) {
    const int64_t n = static_cast<int64_t>(toks.size());
    std::vector<float> lg(static_cast<size_t>((n - prefix) * V));
    SequenceMemory mem = m.new_memory();
    if (prefix > 0) m.forward(toks.data(), prefix, mem, nullptr, nullptr, LogitsMode::None);
    for (int64_t t = prefix; t < n; ++t)
      m.forward(toks.data() + t, 1, mem, nullptr, lg.data() + (t - prefix) * V, LogitsMode::All);
    return lg;
  };
  int64_t identical_rows = 0, total_rows = 0;
  auto close = [&](const std::vector<float>& g, const std::vector<float>& r, const std::string& what) {
    const int64_t rows = static_cast<int64_t>(r.size()) / V;
    const LogitDiff d = logit_diff(g.data(), r.data(), rows, V);
    identical_rows += d.bitwise_rows, total_rows += rows;
    char buf[256];
    std::snprintf(buf, sizeof buf, "nmse %.3g (bound 1e-10), argmax %lld/%lld, bitwise-equal rows %lld%s", d.nmse,
                  (long long)d.argmax_agree, (long long)rows, (long long)d.bitwise_rows, d.finite ? "" : ", NON-FINITE");
    report(d.finite && d.nmse <= 1e-10 && d.argmax_agree == rows, name + " MERE_CUDA_ATTN=gqa vs split: " + what, buf);
  };
  close(decode_logits(*gqa, ids, 0), decode_logits(*base, ids, 0), "64-token decode logits");
  {
    std::vector<int32_t> toks(1232);
    for (size_t i = 0; i < toks.size(); ++i) toks[i] = ids[(i * 7 + i / 64) % ids.size()];
    close(decode_logits(*gqa, toks, 1200), decode_logits(*base, toks, 1200),
          "32 decode steps after a 1,200-token prefill logits");
  }
  report(identical_rows < total_rows, name + " MERE_CUDA_ATTN=gqa took effect (logits not all bitwise equal)",
         std::to_string(identical_rows) + "/" + std::to_string(total_rows) + " rows bitwise equal");
  {
    const std::vector<int32_t> prompt(ids.begin(), ids.begin() + 8);
    const bool plain = generate(*gqa, prompt, 64, false) == generate(*base, prompt, 64, false);
    const bool mtp = !base->has_mtp() || generate(*gqa, prompt, 64, true) == generate(*base, prompt, 64, true);
    report(plain && mtp, name + " MERE_CUDA_ATTN=gqa vs split: greedy 64 tokens equal",
           std::string("plain ") + (plain ? "equal" : "DIFFER") +
               (base->has_mtp() ? std::string(", MTP ") + (mtp ? "equal" : "DIFFER") : std::string()));
  }
  {  // batch-width invariance under gqa: a T-row pass (T = 2..9) equals T one-row passes bitwise
    SequenceMemory b0 = gqa->new_memory();
    gqa->forward(ids.data(), 5, b0, nullptr, nullptr, LogitsMode::None);
    std::vector<float> one(static_cast<size_t>(9 * V)), wide(static_cast<size_t>(9 * V));
    SequenceMemory a = b0.fork();
    for (int64_t t = 0; t < 9; ++t)
      gqa->forward(ids.data() + 5 + t, 1, a, nullptr, one.data() + t * V, LogitsMode::All);
    int bad = 0;
    for (int64_t w = 2; w <= 9; ++w) {
      SequenceMemory b = b0.fork();
      gqa->forward(ids.data() + 5, w, b, nullptr, wide.data(), LogitsMode::All);
      bad += std::memcmp(one.data(), wide.data(), static_cast<size_t>(w * V) * 4) != 0;
    }
    report(bad == 0, name + " MERE_CUDA_ATTN=gqa batch-width invariance T=2..9 vs T=1 (bitwise logits)",
           std::to_string(8 - bad) + "/8 widths equal");
  }
}

// A random 4-bit g64 checkpoint of geometry g in the temporary directory `name` (replaced); its path.
std::string synth_q4(const Geometry& g, uint64_t seed, const char* name) {
  SynthOptions o;
  o.geometry = g;
  o.bits = 4;
  o.seed = seed;
  o.out_dir = (fs::temp_directory_path() / name).string();
  o.force = true;
  write_synth_checkpoint(o);
  return o.out_dir;
}

// The engine loaded with `var` unset (the default) against `var`=`value`: decode, verification and
// MTP-head logits bitwise, greedy generations equal (switches that must not change a bit), and each
// engine's MTP generation equal to its own plain one (the exactness contract). `var` is
// read when the engine is constructed (MERE_CUDA_FUSE, MERE_CUDA_MOE_ROUTE, MERE_CUDA_MOE_NORM, MERE_CUDA_MOE_LOADS, MERE_CUDA_NORM_MV, MERE_CUDA_PREP_MV, MERE_CUDA_MOE_BLOCK,
// MERE_CUDA_STEP_NORM, MERE_CUDA_L2_AHEAD, MERE_CUDA_MOE_DOWN_L2, MERE_CUDA_MOE_FUSED, MERE_CUDA_MV_TUNE's table): two loads side by side.
// A derived checkpoint (not under models/) is also held to the CPU reference.
void env_pair(const std::string& root, const std::string& name, const std::string& dir, const char* var,
              const char* value, bool cpu_reference = true, const std::string& ids_from = "") {
  std::unique_ptr<Qwen35Model> fused, plain;
  {
    ScopedEnv e(var, nullptr);
    fused = Qwen35Model::load(dir, "cuda");
  }
  {
    ScopedEnv e(var, value);
    plain = Qwen35Model::load(dir, "cuda");
  }
  const std::string label = std::string(var) == "MERE_CUDA_FUSE" ? std::string("fused vs MERE_CUDA_FUSE=0")
                                                                  : std::string("default vs ") + var + "=" + value;
  const int64_t V = plain->config().vocab_size, H = plain->config().hidden_size;
  const auto ids = read_ids(root + "/tests/data/mtp/" + (ids_from.empty() ? name : ids_from) + "/input_ids.json");
  auto run = [&](const Qwen35Model& m, std::vector<float>& mtp_lg) {
    // 24 decode steps after an 8-token prompt (T = 1 passes), then one verification pass of 9 rows
    // and the MTP head over those rows
    const int64_t n0 = 8, steps = 24;
    std::vector<float> lg(static_cast<size_t>((steps + 9) * V)), hid(static_cast<size_t>(9 * H));
    SequenceMemory mem = m.new_memory();
    m.forward(ids.data(), n0, mem, nullptr, nullptr, LogitsMode::None);
    for (int64_t t = 0; t < steps; ++t)
      m.forward(ids.data() + n0 + t, 1, mem, nullptr, lg.data() + t * V, LogitsMode::All);
    m.forward(ids.data() + n0 + steps, 9, mem, hid.data(), lg.data() + steps * V, LogitsMode::All);
    if (m.has_mtp()) {
      mtp_lg.resize(static_cast<size_t>(9 * V));
      m.mtp_forward(hid.data(), ids.data() + n0 + steps + 1, 9, mem, nullptr, mtp_lg.data(), LogitsMode::All);
    }
    return lg;
  };
  std::vector<float> mf, mp;
  const auto f = run(*fused, mf), p = run(*plain, mp);
  const int64_t rows = static_cast<int64_t>(f.size()) / V;
  const LogitDiff d = logit_diff(f.data(), p.data(), rows, V);
  const LogitDiff dm = mf.empty() ? LogitDiff{} : logit_diff(mf.data(), mp.data(), 9, V);
  char buf[256];
  std::snprintf(buf, sizeof buf, "main %lld/%lld rows bitwise equal (max|d| %.3g)%s", (long long)d.bitwise_rows,
                (long long)rows, d.max_abs,
                mf.empty() ? "" : (", MTP head " + std::to_string(dm.bitwise_rows) + "/9").c_str());
  report(d.finite && d.bitwise_rows == rows && (mf.empty() || dm.bitwise_rows == 9),
         name + " " + label + ": decode, T=9 verification and MTP-head logits bitwise", buf);
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + 8);
  const auto fp = generate(*fused, prompt, 64, false), pp = generate(*plain, prompt, 64, false);
  const bool g_plain = fp == pp;
  bool g_mtp = true;
  std::string exact;  // each engine's MTP generation against its own plain one (the exactness contract)
  if (plain->has_mtp()) {
    const auto fm = generate(*fused, prompt, 64, true), pm = generate(*plain, prompt, 64, true);
    g_mtp = fm == pm && fm == fp && pm == pp;
    exact = ", MTP " + std::string(fm == pm ? "equal" : "DIFFER") + " (MTP vs plain: first difference at token " +
            std::to_string(first_diff(fp, fm)) + " and " + std::to_string(first_diff(pp, pm)) + ", -1 = none)";
  }
  report(g_plain && g_mtp, name + " " + label + ": greedy 64 tokens equal",
         std::string("plain ") + (g_plain ? "equal" : "DIFFER") + exact);
  if (cpu_reference && dir.rfind(root + "/models/", 0) != 0) {  // a derived checkpoint: also vs the CPU
    auto cpu = Qwen35Model::load(dir, "ref");
    std::vector<float> unused;
    const auto c = run(*cpu, unused);
    const LogitDiff dc = logit_diff(f.data(), c.data(), rows, V);
    std::snprintf(buf, sizeof buf, "nmse %.3g (bound 1e-10), argmax %lld/%lld, max|d| %.3g", dc.nmse,
                  (long long)dc.argmax_agree, (long long)rows, dc.max_abs);
    report(dc.finite && dc.nmse <= 1e-10 && dc.argmax_agree == rows, name + " (4-bit copy) fused CUDA vs CPU reference",
           buf);
  }
}

// A prompt pass (64 tokens: the tensor-core prefill) of the engine loaded with `var` unset against
// `var`=`value`: every row's logits and hidden state bitwise (prefill switches that must not change a
// bit, such as MERE_CUDA_PREFILL_GLUE), then 16 decode steps after it. The prefill switches are read
// when an engine's first prompt allocates its scratch, so each run holds its setting throughout.
void prefill_pair(const std::string& root, const std::string& name, const std::string& dir, const char* var,
                  const char* value, const std::string& ids_from = "") {
  const auto a = Qwen35Model::load(dir, "cuda"), b = Qwen35Model::load(dir, "cuda");
  const auto ids = read_ids(root + "/tests/data/mtp/" + (ids_from.empty() ? name : ids_from) + "/input_ids.json");
  const int64_t V = a->config().vocab_size, H = a->config().hidden_size, T = static_cast<int64_t>(ids.size()) - 16;
  auto run = [&](const Qwen35Model& m, std::vector<float>& hid) {
    std::vector<float> lg(static_cast<size_t>((T + 16) * V));
    hid.resize(static_cast<size_t>(T * H));
    SequenceMemory mem = m.new_memory();
    m.forward(ids.data(), T, mem, hid.data(), lg.data(), LogitsMode::All);
    for (int64_t t = 0; t < 16; ++t)
      m.forward(ids.data() + T + t, 1, mem, nullptr, lg.data() + (T + t) * V, LogitsMode::All);
    return lg;
  };
  std::vector<float> ha, hb, la, lb;
  {
    ScopedEnv e(var, nullptr);
    la = run(*a, ha);
  }
  {
    ScopedEnv e(var, value);
    lb = run(*b, hb);
  }
  const LogitDiff d = logit_diff(la.data(), lb.data(), T + 16, V);
  const bool hidden_equal = std::memcmp(ha.data(), hb.data(), ha.size() * 4) == 0;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%lld-token prompt + 16 steps: %lld/%lld rows bitwise equal (max|d| %.3g), hidden %s",
                (long long)T, (long long)d.bitwise_rows, (long long)(T + 16), d.max_abs,
                hidden_equal ? "bitwise equal" : "DIFFER");
  report(d.finite && d.bitwise_rows == T + 16 && hidden_equal,
         name + " prefill default vs " + var + "=" + value + ": logits and hidden bitwise", buf);
}

// The head's priming over a prompt on the prompt's GEMMs (head_prefill, the default) against 9-row head
// passes (MERE_CUDA_HEAD_PREFILL=off): a 48-token prompt's 47 confirmed transitions primed by
// draft_greedy (3 drafts), the chain's rows dropped as the speculative loop drops them, then a 9-row head
// pass over the next transitions, whose attention reads every primed row of the head's KV cache. The
// GEMMs round differently from the row passes, so the bound is the tensor-core prefill's (NMSE <= 1e-4;
// argmax on every row where `argmax_rows`, the trained models; random weights have near ties); whether
// the drafts agree is reported.
void head_priming(const std::string& root, const std::string& name, const std::string& dir, bool argmax_rows,
                  const std::string& ids_from = "") {
  std::unique_ptr<Qwen35Model> gemm, rows;
  {
    ScopedEnv e("MERE_CUDA_HEAD_PREFILL", nullptr);
    gemm = Qwen35Model::load(dir, "cuda");
  }
  {
    ScopedEnv e("MERE_CUDA_HEAD_PREFILL", "off");
    rows = Qwen35Model::load(dir, "cuda");
  }
  const auto ids = read_ids(root + "/tests/data/mtp/" + (ids_from.empty() ? name : ids_from) + "/input_ids.json");
  const int64_t P = 48, R = 9, V = gemm->config().vocab_size, H = gemm->config().hidden_size;
  MERE_CHECK(static_cast<int64_t>(ids.size()) >= P + R + 1, "engine_check",
             "fixture ids too short for the priming check");
  // host: the host drafting loop's priming instead (mtp_forward of the rows without outputs, CudaEngine::
  // mtp_forward's GEMM path), else the device drafting's (draft_greedy)
  auto run = [&](const Qwen35Model& m, bool host, std::vector<int32_t>& drafts) {
    std::vector<float> hid(static_cast<size_t>((P + R) * H)), lg(static_cast<size_t>(R * V));
    SequenceMemory mem = m.new_memory();
    m.forward(ids.data(), P + R, mem, hid.data(), nullptr, LogitsMode::None);
    drafts.assign(3, -1);
    if (host) {
      m.mtp_forward(hid.data(), ids.data() + 1, P - 1, mem, nullptr, nullptr, LogitsMode::None);
    } else {
      m.device_engine()->draft_greedy(hid.data(), ids.data() + 1, P - 1, 3, mem, drafts.data());
      mem.mtp_kv().truncate(P - 1);
    }
    m.mtp_forward(hid.data() + (P - 1) * H, ids.data() + P, R, mem, nullptr, lg.data(), LogitsMode::All);
    return lg;
  };
  for (const bool host : {false, true}) {
    std::vector<int32_t> dg, dr;
    const auto g = run(*gemm, host, dg), r = run(*rows, host, dr);
    const LogitDiff d = logit_diff(g.data(), r.data(), R, V);
    char buf[256];
    std::snprintf(buf, sizeof buf, "nmse %.3g (bound 1e-4), argmax %lld/%lld, max|d| %.3g%s", d.nmse,
                  (long long)d.argmax_agree, (long long)R, d.max_abs,
                  host ? "" : (dg == dr ? "; drafts equal" : "; drafts differ"));
    report(d.finite && d.nmse <= 1e-4 && (!argmax_rows || d.argmax_agree == R),
           name + " head priming (" + (host ? "mtp_forward" : "draft_greedy") +
               ") on the prompt's GEMMs vs MERE_CUDA_HEAD_PREFILL=off: the next 9 head rows",
           buf);
  }
}

// Two devices in one process (skipped on a one-GPU machine): a 4-bit checkpoint loaded on cuda:0, then on
// cuda:1, so every kernel's first launch is on device 0 and the shared-memory opt-ins must be made again
// on device 1 (smem_opt_in.h); greedy 64 tokens after a 48-token prompt (the prompt's GEMMs), plain and
// with MTP, must be equal on both devices, under both 4-bit matvec kernels (int, mma).
void two_devices(const std::string& root, const std::string& name, const std::string& dir,
                 const std::string& ids_from) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2) {
    std::printf("SKIP %s two devices: %d device(s)\n", name.c_str(), n);
    return;
  }
  const auto ids = read_ids(root + "/tests/data/mtp/" + ids_from + "/input_ids.json");
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + 48);
  for (const char* mv : {"int", "mma"}) {
    ScopedEnv e("MERE_CUDA_QMATVEC", mv);
    std::vector<int32_t> plain[2], mtp[2];
    for (int d = 0; d < 2; ++d) {
      const auto m = Qwen35Model::load(dir, "cuda:" + std::to_string(d));
      plain[d] = generate(*m, prompt, 64, false);
      mtp[d] = generate(*m, prompt, 64, true);
    }
    const bool ok = plain[0] == plain[1] && mtp[0] == mtp[1] && mtp[0] == plain[0];
    report(ok, name + " cuda:0 then cuda:1, MERE_CUDA_QMATVEC=" + mv + ": greedy 64 tokens equal",
           "plain first difference at " + std::to_string(first_diff(plain[0], plain[1])) + ", MTP at " +
               std::to_string(first_diff(mtp[0], mtp[1])) + " (-1 = none)");
  }
}

// MERE_CUDA_FUSE (fused producers + multi-matrix matvec + residual epilogue, the default) against
// MERE_CUDA_FUSE=0 (the unfused launch sequence): the same arithmetic by construction.
void fusion(const std::string& root, const std::string& name, const std::string& dir) {
  env_pair(root, name, dir, "MERE_CUDA_FUSE", "0");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string root = argc > 1 ? argv[1] : ".";
  const std::string only = argc > 2 ? argv[2] : "";
  auto guarded = [&only](const std::string& what, auto&& fn) {
    if (what.find(only) == std::string::npos) return;
    try {
      fn();
    } catch (const std::exception& e) {
      report(false, what, std::string("threw: ") + e.what());
    }
  };
  guarded("goldens", [&] { goldens(root); });
  for (const std::string name : {"qwen35-dense-tiny", "qwen35-moe-tiny"}) {
    // PyTorch fixtures at the foundation bound: exact prefill (the tensor-core one is checked in parity)
    setenv("MERE_CUDA_PREFILL", "exact", 1);
    guarded(name + " mtp fixtures", [&] { mtp_fixture(root, name); });
    unsetenv("MERE_CUDA_PREFILL");
    guarded(name + " parity", [&] { parity(root, name); });
    guarded(name + " attention gqa", [&] { attn_gqa(root, name); });
    guarded(name + " head priming", [&] { head_priming(root, name, root + "/models/" + name, true); });
  }
  guarded("qwen35-moe-tiny fusion", [&] { fusion(root, "qwen35-moe-tiny", root + "/models/qwen35-moe-tiny"); });
  guarded("qwen35-moe-tiny prefill glue", [&] {
    prefill_pair(root, "qwen35-moe-tiny", root + "/models/qwen35-moe-tiny", "MERE_CUDA_PREFILL_GLUE", "separate");
  });
  guarded("qwen35-moe-tiny routing in gate/up", [&] {
    env_pair(root, "qwen35-moe-tiny", root + "/models/qwen35-moe-tiny", "MERE_CUDA_MOE_ROUTE", "separate");
  });
  guarded("qwen35-moe-tiny norm + router in one launch", [&] {
    env_pair(root, "qwen35-moe-tiny", root + "/models/qwen35-moe-tiny", "MERE_CUDA_MOE_NORM", "separate");
  });
  guarded("qwen35-moe-tiny MoE loads (sets, the default, vs rows)", [&] {
    env_pair(root, "qwen35-moe-tiny", root + "/models/qwen35-moe-tiny", "MERE_CUDA_MOE_LOADS", "rows");
  });
  guarded("qwen35-moe-tiny MoE block in one launch", [&] {
    env_pair(root, "qwen35-moe-tiny", root + "/models/qwen35-moe-tiny", "MERE_CUDA_MOE_BLOCK", "on");
  });
  guarded("qwen35-moe-tiny argmax (split, the default, vs block)", [&] {
    env_pair(root, "qwen35-moe-tiny", root + "/models/qwen35-moe-tiny", "MERE_CUDA_ARGMAX", "block");
  });
  guarded("qwen35-moe-tiny attention merge v1", [&] {
    env_pair(root, "qwen35-moe-tiny", root + "/models/qwen35-moe-tiny", "MERE_CUDA_ATTN_COMBINE", "v1");
  });
  // L2 prefetch hints (session 35): the same bits with and without them, and no fault from the spans;
  // the experts in one launch (its shared expert is twice as wide as the routed ones, so half the
  // routed blocks have no gate/up rows and only meet the others at the barrier)
  guarded("qwen35-moe-tiny L2 hints (MERE_CUDA_L2_AHEAD=on, MERE_CUDA_MOE_DOWN_L2=end) and fused experts", [&] {
    env_pair(root, "qwen35-moe-tiny", root + "/models/qwen35-moe-tiny", "MERE_CUDA_L2_AHEAD", "on");
    env_pair(root, "qwen35-moe-tiny", root + "/models/qwen35-moe-tiny", "MERE_CUDA_MOE_DOWN_L2", "end");
    env_pair(root, "qwen35-moe-tiny", root + "/models/qwen35-moe-tiny", "MERE_CUDA_MOE_FUSED", "on");
  });
  // The routing inside the gate/up launch and the one-launch MoE block at the real expert count (256,
  // top-8) and width, the split argmax (the default) against the one-block form over the real
  // vocabulary, and the one-launch GDN middle at the real heads: a random 4-bit checkpoint of the
  // 35B-A3B shapes cut to 4 layers
  guarded("qwen3.5-35b-a3b geometry, 4 layers (synthetic 4-bit): routing in gate/up, norm + router, MoE loads, norms and gates in the projections, MoE block, argmax block, GDN block, conv tokens, L2 hints, fused experts", [&] {
    Geometry g = geometry_preset("qwen3.5-35b-a3b");
    g.num_hidden_layers = 4;
    g.layer_types.clear();
    g.validate();
    const std::string dir = synth_q4(g, 24, "mere-engine-check-moe-q4");
    env_pair(root, "qwen3.5-35b-a3b-4l", dir, "MERE_CUDA_MOE_ROUTE", "separate", false, "qwen35-moe-tiny");
    env_pair(root, "qwen3.5-35b-a3b-4l", dir, "MERE_CUDA_MOE_NORM", "separate", false, "qwen35-moe-tiny");
    env_pair(root, "qwen3.5-35b-a3b-4l", dir, "MERE_CUDA_MOE_LOADS", "rows", false, "qwen35-moe-tiny");
    env_pair(root, "qwen3.5-35b-a3b-4l", dir, "MERE_CUDA_NORM_MV", "fused", false, "qwen35-moe-tiny");
    env_pair(root, "qwen3.5-35b-a3b-4l", dir, "MERE_CUDA_PREP_MV", "fused", false, "qwen35-moe-tiny");
    env_pair(root, "qwen3.5-35b-a3b-4l", dir, "MERE_CUDA_MOE_BLOCK", "on", false, "qwen35-moe-tiny");
    env_pair(root, "qwen3.5-35b-a3b-4l", dir, "MERE_CUDA_ARGMAX", "block", false, "qwen35-moe-tiny");
    env_pair(root, "qwen3.5-35b-a3b-4l", dir, "MERE_CUDA_GDN_BLOCK", "on", false, "qwen35-moe-tiny");
    env_pair(root, "qwen3.5-35b-a3b-4l", dir, "MERE_CUDA_CONV", "loop", false, "qwen35-moe-tiny");
    env_pair(root, "qwen3.5-35b-a3b-4l", dir, "MERE_CUDA_HEAD_PREFILL", "off", false, "qwen35-moe-tiny");
    env_pair(root, "qwen3.5-35b-a3b-4l", dir, "MERE_CUDA_L2_AHEAD", "on", false, "qwen35-moe-tiny");
    env_pair(root, "qwen3.5-35b-a3b-4l", dir, "MERE_CUDA_MOE_DOWN_L2", "start", false, "qwen35-moe-tiny");
    env_pair(root, "qwen3.5-35b-a3b-4l", dir, "MERE_CUDA_MOE_FUSED", "on", false, "qwen35-moe-tiny");
    head_priming(root, "qwen3.5-35b-a3b-4l", dir, false, "qwen35-moe-tiny");
    fs::remove_all(dir);
  });
  // The bundled models' linear-attention heads are 64 wide (gdn_decode's half-warp rows); the
  // 128-wide kernels (gdn_decode's warp rows, the step + gated norm launch) need a real head
  // geometry: a random 4-bit checkpoint of the 0.8B geometry (prompt ids from the tiny model's
  // fixture; no CPU comparison: random weights, the pairs are what is checked)
  guarded("qwen3.5-0.8b geometry (synthetic 4-bit) fusion, GDN step + gated norm, norms and gates in the projections, GDN block, conv tokens, L2 hints", [&] {
    const std::string dir = synth_q4(geometry_preset("qwen3.5-0.8b"), 15, "mere-engine-check-0.8b-q4");
    env_pair(root, "qwen3.5-0.8b", dir, "MERE_CUDA_GDN_BLOCK", "on", false, "qwen35-dense-tiny");
    env_pair(root, "qwen3.5-0.8b", dir, "MERE_CUDA_STEP_NORM", "fused", false, "qwen35-dense-tiny");
    env_pair(root, "qwen3.5-0.8b", dir, "MERE_CUDA_NORM_MV", "fused", false, "qwen35-dense-tiny");
    env_pair(root, "qwen3.5-0.8b", dir, "MERE_CUDA_PREP_MV", "fused", false, "qwen35-dense-tiny");
    env_pair(root, "qwen3.5-0.8b", dir, "MERE_CUDA_FUSE", "0", false, "qwen35-dense-tiny");
    env_pair(root, "qwen3.5-0.8b", dir, "MERE_CUDA_ATTN_COMBINE", "v1", false, "qwen35-dense-tiny");
    env_pair(root, "qwen3.5-0.8b", dir, "MERE_CUDA_CONV", "tokens", false, "qwen35-dense-tiny");
    env_pair(root, "qwen3.5-0.8b", dir, "MERE_CUDA_L2_AHEAD", "out", false, "qwen35-dense-tiny");
    env_pair(root, "qwen3.5-0.8b", dir, "MERE_CUDA_CONV", "loop", false, "qwen35-dense-tiny");
    env_pair(root, "qwen3.5-0.8b", dir, "MERE_CUDA_DRAFTS", "host", false, "qwen35-dense-tiny");
    env_pair(root, "qwen3.5-0.8b", dir, "MERE_CUDA_HEAD_PREFILL", "off", false, "qwen35-dense-tiny");
    head_priming(root, "qwen3.5-0.8b", dir, false, "qwen35-dense-tiny");
    prefill_pair(root, "qwen3.5-0.8b", dir, "MERE_CUDA_PREFILL_GLUE", "separate", "qwen35-dense-tiny");
    two_devices(root, "qwen3.5-0.8b", dir, "qwen35-dense-tiny");
  });
  guarded("qwen35-dense-tiny (4-bit copy) fusion", [&] {
    QuantizeOptions q;
    q.in_dir = root + "/models/qwen35-dense-tiny";
    q.out_dir = (fs::temp_directory_path() / "mere-engine-check-dense-q4").string();
    q.force = true;
    quantize_checkpoint(q);
    fusion(root, "qwen35-dense-tiny", q.out_dir);
    env_pair(root, "qwen35-dense-tiny", q.out_dir, "MERE_CUDA_NORM_MV", "fused");
    env_pair(root, "qwen35-dense-tiny", q.out_dir, "MERE_CUDA_PREP_MV", "fused");
    prefill_pair(root, "qwen35-dense-tiny", q.out_dir, "MERE_CUDA_PREFILL_GLUE", "separate");
  });
  std::printf("engine_check: %d checks, %d failed\n", g_checks, g_fail);
  return g_fail ? 1 : 0;
}
