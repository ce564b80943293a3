// The speculative decoding loop. One round: commit x, choose depth d, draft d tokens with the head
// (its KV holds confirmed transitions only), verify [x, d1..dd] in one target pass, accept, roll
// back to the accepted prefix (KV truncation + GatedDeltaNet replay), and queue the newly confirmed
// transitions for the head's next pass.
#include "runtime/speculative.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>

#include "core/error.h"
#include "model/device_engine.h"
#include "runtime/pipelined_decode.h"

namespace mere {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Measured costs of one model on this machine: target (verification) and head passes by width.
// Calibrated once per model and drafting form (first speculative request), refined online with an EMA.
struct CostTable {
  std::vector<double> verify;  // [B+1], seconds of a width-w target pass ([0] unused)
  std::vector<double> head;    // [B+1], seconds of a w-row head pass, last row's draft ([0] unused)
};

// a model and whether its drafts are made on the device (DeviceEngine::draft_greedy) or on the host
using CostKey = std::pair<const Qwen35Model*, bool>;
std::mutex g_cost_mu;
std::map<CostKey, CostTable> g_costs;

// Passes of a sequence whose time is not what their kind costs from then on: those a device backend
// captured into a graph, or launched kernel by kernel before capturing (0 on the CPU).
uint64_t untimed_passes(const SequenceMemory& mem) {
  const DeviceSequenceState* d = mem.device();
  return d ? d->captures + d->launched_before_capture : 0;
}

// Fills the table of (m, device_drafts) unless it is filled already.
void calibrate(const Qwen35Model& m, bool device_drafts, const SequenceMemory& mem, std::span<const int32_t> prompt,
               const std::vector<float>& prompt_hidden, int block) {
  std::lock_guard<std::mutex> lock(g_cost_mu);
  CostTable& t = g_costs[CostKey{&m, device_drafts}];
  if (static_cast<int>(t.verify.size()) >= block + 1) return;
  const int64_t H = m.config().hidden_size, V = m.config().vocab_size;
  std::vector<int32_t> ids(static_cast<size_t>(block), prompt.back());
  std::vector<float> hid(static_cast<size_t>(block * H)), lg(static_cast<size_t>(block * V));
  // seconds of pass(w, fork) at widths 1 and B, the widths between interpolated; rounds refine them
  // online. The best of three steady-state passes on one fork after a warm-up: a device backend
  // launches a sequence's first uses of a kind of pass kernel by kernel and captures it into a graph at
  // a later one (MERE_CUDA_GRAPH_AFTER, 2 by default), costs a request pays once, not every round, so
  // passes that captured or launched before their capture are not timed, as in the online refinement
  // (at most 12 passes; a backend that never captures, such as MERE_CUDA_GRAPH_AFTER beyond 12, is timed
  // by the best of those it ran)
  auto by_width = [&](auto&& pass) {
    auto time = [&](int w) {
      double best = 1e30, best_any = 1e30;
      int timed = 0;
      SequenceMemory f = mem.fork();
      for (int rep = 0; rep < 12 && timed < 3; ++rep) {
        const uint64_t u0 = untimed_passes(f);
        auto t0 = Clock::now();
        pass(w, f);
        const double sec = seconds_since(t0);
        if (rep == 0) continue;  // the warm-up
        best_any = std::min(best_any, sec);
        if (untimed_passes(f) == u0) best = std::min(best, sec), ++timed;
      }
      return timed > 0 ? best : best_any;
    };
    const double a = time(1), b = block > 1 ? time(block) : a;
    std::vector<double> cost(static_cast<size_t>(block + 1), 0.0);
    for (int w = 1; w <= block; ++w) cost[static_cast<size_t>(w)] = block > 1 ? a + (b - a) * (w - 1) / (block - 1) : a;
    return cost;
  };
  // the plain greedy decoder's pass (each row's argmax id back, not its logits); a sampled
  // request's passes also copy the logits, which the online refinement learns
  std::vector<int32_t> args(static_cast<size_t>(block));
  ForwardOptions rec;
  rec.gdn = ForwardOptions::Gdn::Recurrent;
  rec.row_argmax = args.data();
  t.verify = by_width([&](int w, SequenceMemory& f) {
    m.forward(ids.data(), w, f, hid.data(), nullptr, LogitsMode::None, rec);
  });
  // head passes: the catch-up pass runs several confirmed rows at once and computes one lm_head
  // row, so its cost is far from w single rows; rows from the prompt's end (its last one repeated
  // if the prompt is shorter than B)
  const int64_t P = static_cast<int64_t>(prompt.size());
  std::vector<float> hrows(static_cast<size_t>(block * H));
  for (int64_t i = 0; i < block; ++i) {
    const int64_t src = std::max<int64_t>(0, P - block + i);
    std::copy_n(prompt_hidden.data() + src * H, H, hrows.data() + i * H);
  }
  t.head = by_width([&](int w, SequenceMemory& f) {
    const float* rows = hrows.data() + static_cast<int64_t>(block - w) * H;
    if (device_drafts) m.device_engine()->draft_greedy(rows, ids.data(), w, 1, f, args.data());
    else m.mtp_forward(rows, ids.data(), w, f, hid.data(), lg.data(), LogitsMode::Last);
  });
}

// A measured cost's moving average; a negative sample (a pass left out, below) changes nothing.
void ema(double& v, double x) {
  if (x >= 0) v = 0.8 * v + 0.2 * x;
}

// One round's timings into the table: the width-w verification pass, the catch-up head pass of
// `conf_rows` rows (skipped when wider than the table: the first round after the prompt) and the
// chained single-row head steps. A negative time is left out: a pass a device backend captured into
// a graph this round costs several replays (one such sample in the average once pushed the bundled
// models' CUDA requests to zero depth for good: session 29, bench/cuda/s29/h100-b), and one launched
// kernel by kernel before its kind is captured costs more than the replays after it.
void refine(const CostKey& key, int width, double verify_s, int64_t conf_rows, double conf_s, int chained,
            double chained_s) {
  std::lock_guard<std::mutex> lock(g_cost_mu);
  CostTable& t = g_costs[key];
  if (width < static_cast<int>(t.verify.size())) ema(t.verify[static_cast<size_t>(width)], verify_s);
  if (conf_rows >= 1 && conf_rows < static_cast<int64_t>(t.head.size())) ema(t.head[static_cast<size_t>(conf_rows)], conf_s);
  if (chained > 0 && t.head.size() > 1) ema(t.head[1], chained_s < 0 ? -1.0 : chained_s / chained);
}

// A device draft chain is timed as a whole: with one draft it is the catch-up pass of `conf_rows`
// rows; with more, the chained steps are what the whole took beyond the table's catch-up pass.
void refine_device_drafts(const CostKey& key, int64_t conf_rows, int d, double head_s) {
  std::lock_guard<std::mutex> lock(g_cost_mu);
  CostTable& t = g_costs[key];
  if (conf_rows < 1 || conf_rows >= static_cast<int64_t>(t.head.size()) || head_s < 0) return;
  double& conf = t.head[static_cast<size_t>(conf_rows)];
  if (d == 1) ema(conf, head_s);
  else if (const double chained = (head_s - conf) / (d - 1); chained > 0) ema(t.head[1], chained);
}

class Round {
 public:
  Round(const Qwen35Model& m, const ResolvedSpeculation& rs, const SpeculationOptions& opt, const SpeculativeRequest& req,
        SequenceMemory& mem, Sampler& sampler, Rng& rng, std::vector<int32_t>& generated,
        const std::function<bool(int32_t)>& on_token, GenerationStats& st)
      : m_(m), rs_(rs), opt_(opt), req_(req), mem_(mem), sampler_(sampler), rng_(rng), gen_(generated),
        on_token_(on_token), st_(st), policy_(rs.block_size, rs.cost_ratio), H_(m.config().hidden_size),
        V_(m.config().vocab_size), greedy_(req.params->greedy()),
        // plain greedy acceptance needs only each row's argmax: the backend returns d + 1 ids instead
        // of (d + 1) x V logits (on a device, ~9 MB less to copy a round at the 27B vocabulary), and
        // a device makes the drafts too (DeviceEngine::draft_greedy)
        ids_only_(greedy_ && !sampler.params().has_penalties() &&
                  (sampler.vocab_limit() == 0 || sampler.vocab_limit() >= static_cast<size_t>(V_))),
        device_drafts_(ids_only_ && m.device_engine() && m.device_engine()->drafts_on_device()),
        cost_key_(&m, device_drafts_), debug_(std::getenv("MERERUN_Q35_MTP_DEBUG") != nullptr) {
    st_.accel.route = "mtp";
    st_.accel.drafted_by_position.assign(static_cast<size_t>(rs.block_size - 1), 0);
    st_.accel.accepted_by_position.assign(static_cast<size_t>(rs.block_size - 1), 0);
    st_.accel.profiled = opt.profile;
  }

  void run(std::vector<float>& prompt_hidden, std::vector<float>& logits) {
    const int64_t P = static_cast<int64_t>(req_.prompt.size());
    if (rs_.measured_costs) calibrate(m_, device_drafts_, mem_, req_.prompt, prompt_hidden, rs_.block_size);
    // head priming: the prompt's confirmed transitions (h_i, x_{i+1}), i = 0..P-2
    pending_h_.assign(prompt_hidden.begin(), prompt_hidden.begin() + (P - 1) * H_);
    pending_ids_.assign(req_.prompt.begin() + 1, req_.prompt.end());
    h_cur_.assign(prompt_hidden.begin() + (P - 1) * H_, prompt_hidden.begin() + P * H_);
    logits_cur_ = logits;
    bool have_next = false;
    int32_t next = 0;
    for (;;) {
      const int32_t x = have_next ? next : sample_target(logits_cur_);
      if (!emit(x)) return;
      const int64_t remaining = req_.budget - static_cast<int64_t>(gen_.size());
      const int64_t room = req_.context_limit - mem_.length() - 1;  // positions left for the verify pass
      const int d = choose_depth(std::min(remaining, room));
      if (d == 0) {
        if (!fallback_ && opt_.forced_depth == 0) {
          fallback_ = true;  // zero depth is absorbing (mtp.md §2)
          st_.accel.route = rs_.pipelined_fallback ? "pipelined-fallback" : "serial";
        }
        if (!fallback_) queue_confirmed(h_cur_, x);  // (h before x, x) stays a confirmed head transition
        DeviceEngine* engine = m_.device_engine();
        if (fallback_ && rs_.pipelined_fallback && rs_.async_decode && engine) {  // the rest on the pipelined decoder
          decode_pipelined(*engine, mem_, x, req_.budget - static_cast<int64_t>(gen_.size()),
                           [&](int32_t id) { return emit(id); });
          return;
        }
        // after the fallback the head is unused for good: the plain loop's step, without reading the
        // hidden state back (a device's copy a token: 2 ms over 256 tokens of the bundled MoE, s31a)
        m_.forward(&x, 1, mem_, fallback_ ? nullptr : h_cur_.data(), logits_cur_.data(), LogitsMode::Last);
        have_next = false;
        continue;
      }
      have_next = true;
      next = speculate(x, d);
      if (finished_) return;
    }
  }

  bool finished() const { return finished_; }

 private:
  int32_t sample_target(const std::vector<float>& row) {
    return sampler_.sample(row, TokenHistory{req_.prompt, gen_}, rng_);
  }

  // Emits one token; false when generation ends (EOS, stop token, callback, budget).
  bool emit(int32_t id) {
    const auto& eos = req_.eos_ids;
    const auto& stops = req_.params->stop_token_ids;
    if ((!req_.params->ignore_eos && std::find(eos.begin(), eos.end(), id) != eos.end()) ||
        std::find(stops.begin(), stops.end(), id) != stops.end()) {
      st_.finish_reason = "stop";
      finished_ = true;
      return false;
    }
    gen_.push_back(id);
    if (!on_token_(id)) {
      st_.finish_reason = "stop";
      finished_ = true;
      return false;
    }
    if (static_cast<int64_t>(gen_.size()) >= req_.budget) {
      st_.finish_reason = "length";
      finished_ = true;
      return false;
    }
    return true;
  }

  int choose_depth(int64_t offered) {
    if (offered <= 0) return 0;
    if (opt_.forced_depth > 0) return static_cast<int>(std::min<int64_t>({offered, opt_.forced_depth, rs_.block_size - 1}));
    if (fallback_) return 0;
    if (rs_.measured_costs) {
      std::lock_guard<std::mutex> lock(g_cost_mu);
      const CostTable& t = g_costs[cost_key_];
      const int d = policy_.depth_measured(offered, t.verify, t.head);
      if (debug_) {
        std::fprintf(stderr, "[mtp-debug] head");
        for (size_t w = 1; w < t.head.size(); ++w) std::fprintf(stderr, " %zu:%.4f", w, t.head[w]);
        std::fprintf(stderr, " verify");
        for (size_t w = 1; w < t.verify.size(); ++w) std::fprintf(stderr, " %zu:%.4f", w, t.verify[w]);
        std::fprintf(stderr, " p");
        for (double p : policy_.estimates()) std::fprintf(stderr, " %.2f", p);
        std::fprintf(stderr, " -> d=%d\n", d);
      }
      return d;
    }
    return policy_.depth(offered);
  }

  void queue_confirmed(const std::vector<float>& h, int32_t id) {
    pending_h_.insert(pending_h_.end(), h.begin(), h.end());
    pending_ids_.push_back(id);
  }

  // One round after committing x: draft d, verify, accept; returns the next committed token.
  int32_t speculate(int32_t x, int d) {
    AccelerationStats& a = st_.accel;
    const bool prof = opt_.profile;
    // ---- draft: confirmed rows (pending + (h_cur, x)) in one head pass, then the chain
    auto t0 = Clock::now();
    queue_confirmed(h_cur_, x);
    const int64_t n_conf = static_cast<int64_t>(pending_ids_.size());
    std::vector<int32_t> drafts(static_cast<size_t>(d));
    std::vector<TokenDistribution> q(static_cast<size_t>(d));
    double conf_s = 0;  // the catch-up pass and the first draft's sampling
    const uint64_t untimed0 = untimed_passes(mem_);
    uint64_t untimed_conf = untimed0;  // after the catch-up pass
    int64_t mtp_confirmed = 0;
    if (device_drafts_) {  // on the device: the catch-up pass and the chain, one wait
      m_.device_engine()->draft_greedy(pending_h_.data(), pending_ids_.data(), n_conf, d, mem_, drafts.data());
      mtp_confirmed = mem_.mtp_length() - (d - 1);
    } else {
      // a long catch-up (the prompt's priming) in two calls where the device runs rows without outputs
      // as the prompt's GEMMs: the rows whose outputs nobody reads, then the last row with its hidden
      // state and logits
      const DeviceEngine* engine = m_.device_engine();
      const int64_t quiet = engine && engine->head_rows_on_gemms(n_conf - 1) ? n_conf - 1 : 0;
      if (quiet > 0)
        m_.mtp_forward(pending_h_.data(), pending_ids_.data(), quiet, mem_, nullptr, nullptr, LogitsMode::None);
      std::vector<float> mh(static_cast<size_t>((n_conf - quiet) * H_)), ql(static_cast<size_t>(V_));
      m_.mtp_forward(pending_h_.data() + quiet * H_, pending_ids_.data() + quiet, n_conf - quiet, mem_, mh.data(),
                     ql.data(), LogitsMode::Last);
      mtp_confirmed = mem_.mtp_length();
      untimed_conf = untimed_passes(mem_);
      std::vector<float> m_prev(mh.end() - H_, mh.end()), m_next(static_cast<size_t>(H_));
      for (int j = 0; j < d; ++j) {
        if (j == 1) conf_s = seconds_since(t0);
        if (j > 0) {
          m_.mtp_forward(m_prev.data(), &drafts[static_cast<size_t>(j - 1)], 1, mem_, m_next.data(), ql.data(),
                         LogitsMode::Last);
          m_prev.swap(m_next);
        }
        if (greedy_) {
          drafts[static_cast<size_t>(j)] = sampler_.sample(ql, TokenHistory{req_.prompt, gen_}, rng_);
        } else {
          sampler_.process_logits(ql, TokenHistory{req_.prompt, gen_}, q[static_cast<size_t>(j)]);
          drafts[static_cast<size_t>(j)] = sample_from(q[static_cast<size_t>(j)], rng_);
        }
      }
    }
    a.draft_history_tokens += n_conf;
    pending_h_.clear();
    pending_ids_.clear();
    mem_.mtp_kv().truncate(mtp_confirmed);  // drop the speculative chain rows
    const double head_s = seconds_since(t0);
    if (d == 1) conf_s = head_s;
    if (prof) a.draft_seconds += head_s;

    // ---- verify [x, d1..dd] in one pass (recurrent GatedDeltaNet, traced for replay)
    auto t1 = Clock::now();
    const auto cp = mem_.checkpoint();
    std::vector<int32_t> row_ids(static_cast<size_t>(d + 1));
    row_ids[0] = x;
    std::copy(drafts.begin(), drafts.end(), row_ids.begin() + 1);
    std::vector<float> vh(static_cast<size_t>((d + 1) * H_)), vl(ids_only_ ? 0 : static_cast<size_t>((d + 1) * V_));
    std::vector<int32_t> vargs(ids_only_ ? static_cast<size_t>(d + 1) : 0);
    GdnTrace trace;
    ForwardOptions fo;
    fo.gdn = ForwardOptions::Gdn::Recurrent;
    fo.trace = &trace;
    fo.row_argmax = ids_only_ ? vargs.data() : nullptr;
    const uint64_t untimed_verify = untimed_passes(mem_);
    m_.forward(row_ids.data(), d + 1, mem_, vh.data(), ids_only_ ? nullptr : vl.data(),
               ids_only_ ? LogitsMode::None : LogitsMode::All, fo);
    const double verify_s = seconds_since(t1);
    if (prof) a.verify_seconds += verify_s;
    // a pass that was captured or launched before its capture is not what its kind costs from now on
    const bool verify_untimed = untimed_passes(mem_) != untimed_verify;
    if (device_drafts_) {  // the draft chain was timed as a whole
      refine(cost_key_, d + 1, verify_untimed ? -1.0 : verify_s, 0, -1.0, 0, -1.0);
      refine_device_drafts(cost_key_, n_conf, d, untimed_verify != untimed0 ? -1.0 : head_s);
    } else {
      refine(cost_key_, d + 1, verify_untimed ? -1.0 : verify_s, n_conf, untimed_conf != untimed0 ? -1.0 : conf_s,
             d - 1, untimed_verify != untimed_conf ? -1.0 : head_s - conf_s);
    }

    // ---- accept
    auto t2 = Clock::now();
    int acc = 0;
    int32_t next = 0;
    std::vector<int32_t> hist(gen_);
    auto row = [&](int j) { return std::span<const float>(vl.data() + static_cast<int64_t>(j) * V_, static_cast<size_t>(V_)); };
    if (greedy_) {
      auto pick = [&](int j) {  // the sampler's greedy token: the argmax of the (penalised) logits
        return ids_only_ ? vargs[static_cast<size_t>(j)]
                         : sampler_.sample(row(j), TokenHistory{req_.prompt, hist}, rng_);
      };
      while (acc < d) {
        const int32_t t = pick(acc);
        if (t != drafts[static_cast<size_t>(acc)]) break;
        hist.push_back(t);
        ++acc;
      }
      next = pick(acc);
    } else {
      TokenDistribution p;
      bool rejected = false;
      while (acc < d) {
        sampler_.process_logits(row(acc), TokenHistory{req_.prompt, hist}, p);
        if (!accept_draft(p, q[static_cast<size_t>(acc)], drafts[static_cast<size_t>(acc)], rng_)) {
          next = residual_sample(p, q[static_cast<size_t>(acc)], rng_);
          rejected = true;
          break;
        }
        hist.push_back(drafts[static_cast<size_t>(acc)]);
        ++acc;
      }
      if (!rejected) next = sample_target(std::vector<float>(row(d).begin(), row(d).end()));
    }
    if (prof) a.accept_seconds += seconds_since(t2);
    a.rounds += 1;
    a.drafted += d;
    a.accepted += acc;
    for (int j = 0; j < d; ++j) a.drafted_by_position[static_cast<size_t>(j)] += 1;
    for (int j = 0; j < acc; ++j) a.accepted_by_position[static_cast<size_t>(j)] += 1;
    policy_.record(acc, d);
    if (debug_) {
      std::fprintf(stderr,
                   "[mtp-debug] round %lld n_conf %lld mtp %lld len %lld d %d acc %d head %.3f ms verify %.3f ms drafts",
                   (long long)a.rounds, (long long)n_conf, (long long)mtp_confirmed, (long long)mem_.length(), d, acc,
                   head_s * 1e3, verify_s * 1e3);
      for (int j = 0; j < d; ++j) std::fprintf(stderr, " %d", drafts[static_cast<size_t>(j)]);
      std::fprintf(stderr, "\n");
    }

    for (int j = 0; j < acc; ++j)
      if (!emit(drafts[static_cast<size_t>(j)])) return 0;

    // ---- repair: keep rows 0..acc of the verify pass
    auto t3 = Clock::now();
    if (acc < d) {
      mem_.rollback_keep(cp, acc + 1);
      m_.replay_gdn(trace, acc + 1, mem_);
    }
    if (prof) a.repair_seconds += seconds_since(t3);
    // newly confirmed head transitions: (target hidden of row j, d_{j+1}), j < acc
    for (int j = 0; j < acc; ++j) {
      pending_h_.insert(pending_h_.end(), vh.begin() + static_cast<int64_t>(j) * H_, vh.begin() + static_cast<int64_t>(j + 1) * H_);
      pending_ids_.push_back(drafts[static_cast<size_t>(j)]);
    }
    h_cur_.assign(vh.begin() + static_cast<int64_t>(acc) * H_, vh.begin() + static_cast<int64_t>(acc + 1) * H_);
    // (read only after a serial step refreshes it; a pass of ids only leaves it stale)
    if (!ids_only_) logits_cur_.assign(row(acc).begin(), row(acc).end());
    return next;
  }

  const Qwen35Model& m_;
  const ResolvedSpeculation& rs_;
  const SpeculationOptions& opt_;
  const SpeculativeRequest& req_;
  SequenceMemory& mem_;
  Sampler& sampler_;
  Rng& rng_;
  std::vector<int32_t>& gen_;
  const std::function<bool(int32_t)>& on_token_;
  GenerationStats& st_;
  AdaptiveDepthPolicy policy_;
  const int64_t H_, V_;
  const bool greedy_, ids_only_;
  const bool device_drafts_;  // greedy drafts made on the device (DeviceEngine::draft_greedy)
  const CostKey cost_key_;    // the model and device_drafts_
  const bool debug_;          // MERERUN_Q35_MTP_DEBUG: each depth decision and round on stderr
  bool fallback_ = false, finished_ = false;
  std::vector<float> pending_h_;  // [n, H] confirmed head rows not yet run
  std::vector<int32_t> pending_ids_;
  std::vector<float> h_cur_;       // [H] target hidden at the last committed position
  std::vector<float> logits_cur_;  // [V]
};

}  // namespace

void decode_speculative(const Qwen35Model& model, const ResolvedSpeculation& rs, const SpeculationOptions& opt,
                        const SpeculativeRequest& req, SequenceMemory& mem, std::vector<float>& prompt_hidden,
                        std::vector<float>& logits, Sampler& sampler, Rng& rng, std::vector<int32_t>& generated,
                        const std::function<bool(int32_t)>& on_token, GenerationStats& st) {
  Round r(model, rs, opt, req, mem, sampler, rng, generated, on_token, st);
  r.run(prompt_hidden, logits);
}

}  // namespace mere
