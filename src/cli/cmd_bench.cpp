// `mere.run bench`: prefill and decode throughput of one model at several context depths, with
// median/min/max over repetitions, GB/s of weights read per token (MoE: only the active experts)
// and the machine's copy bandwidth measured in the same run (multi-threaded memcpy), so every
// number comes with its fraction of what the memory system can do. Also peak RSS vs checkpoint size.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "core/error.h"
#include "core/json.h"
#include "core/thread_pool.h"
#include "model/device_engine.h"
#include "model/qwen35.h"
#include "runtime/pipelined_decode.h"

namespace mere::cli {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Stats {
  double median = 0, min = 0, max = 0;
};
Stats stats(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  const size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return s;
}
Json stats_json(const Stats& s) {
  Json j = Json::object();
  j["median"] = s.median;
  j["min"] = s.min;
  j["max"] = s.max;
  return j;
}
Json array_of(const std::vector<double>& v) {
  Json a = Json::array();
  for (double x : v) a.push_back(x);
  return a;
}

// Weight bytes one decode token reads: every matrix of the main model once (MoE: router, shared
// expert and the top-k experts, counted as k average experts), one embedding row, the lm_head.
double weight_bytes_per_token(const Qwen35Model& m) {
  const ModelWeights& w = m.weights();
  const ModelConfig& c = m.config();
  double b = static_cast<double>(w.embed.storage_bytes()) / static_cast<double>(w.embed.rows) + w.lm_head.storage_bytes();
  auto mlp = [](const MlpWeights& p) { return double(p.gate.storage_bytes() + p.up.storage_bytes() + p.down.storage_bytes()); };
  for (const auto& L : w.layers) {
    if (L.kind == LayerKind::Full)
      b += double(L.attn.q_proj.storage_bytes() + L.attn.k_proj.storage_bytes() + L.attn.v_proj.storage_bytes() +
                  L.attn.o_proj.storage_bytes());
    else
      b += double(L.gdn.in_proj_qkv.storage_bytes() + L.gdn.in_proj_z.storage_bytes() + L.gdn.in_proj_b.storage_bytes() +
                  L.gdn.in_proj_a.storage_bytes() + L.gdn.out_proj.storage_bytes());
    if (!c.is_moe) {
      b += mlp(L.mlp);
    } else {
      double experts = 0;
      for (const auto& e : L.moe.experts) experts += mlp(e);
      b += double(L.moe.router.storage_bytes()) + mlp(L.moe.shared) + double(L.moe.shared_gate.storage_bytes()) +
           experts / double(L.moe.experts.size()) * double(c.experts_per_tok);
    }
  }
  return b;
}

// Copy bandwidth: `threads` workers each memcpy their slice of a buffer far larger than the caches;
// bytes moved = 2 x size (read + write). Best of reps.
double copy_bandwidth_gbs(int threads, size_t bytes, int reps) {
  std::vector<char> src(bytes, 1), dst(bytes, 2);
  ThreadPool pool(threads);
  double best = 0;
  for (int r = 0; r < reps + 1; ++r) {
    const auto t0 = Clock::now();
    pool.run([&](int w, int n) {
      const size_t per = bytes / static_cast<size_t>(n), off = per * static_cast<size_t>(w);
      std::memcpy(dst.data() + off, src.data() + off, w == n - 1 ? bytes - off : per);
    });
    const double s = since(t0);
    if (r > 0) best = std::max(best, 2.0 * static_cast<double>(bytes) / s / 1e9);  // first run: page faults
  }
  return best;
}

// Resets VmHWM to the current RSS (Linux >= 4.0), so the next VmHWM read is the peak since now.
void reset_peak_rss() {
  if (FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", f);
    std::fclose(f);
  }
}

double rss_bytes(const char* field) {  // VmRSS / VmHWM from /proc/self/status
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field, 0) == 0) {
      std::istringstream is(line.substr(std::strlen(field)));
      double kb = 0;
      is >> kb;
      return kb * 1024.0;
    }
  return 0;
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

double loadavg1() {
  double l = 0;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &l) != 1) l = 0;
    std::fclose(f);
  }
  return l;
}

std::vector<int64_t> parse_list(const std::string& s, const char* flag) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t pos = 0;
      long long v = std::stoll(item, &pos);
      if (pos != item.size() || v < 0) throw std::invalid_argument("bad");
      out.push_back(v);
    } catch (const std::exception&) {
      fail("bench", cat("--", flag, ": expected comma-separated integers >= 0, got \"", s, "\""));
    }
  }
  MERE_CHECK(!out.empty(), "bench", "--", flag, ": expected at least one value");
  return out;
}

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

int run_bench(const Args& a) {
  const std::string dir = a.require("model");
  const int64_t P = a.get_int("prompt-tokens", 512), G = a.get_int("gen-tokens", 128), reps = a.get_int("reps", 5);
  const int64_t threads = a.get_int("threads", 0);
  MERE_CHECK(P >= 1 && G >= 1 && reps >= 1, "bench", "--prompt-tokens, --gen-tokens and --reps: expected >= 1");
  MERE_CHECK(threads >= 0 && threads <= 1024, "bench", "--threads: expected 0..1024 (0: physical cores), got ", threads);
  const std::vector<int64_t> depths = parse_list(a.get("depths", "0"), "depths");
  if (threads > 0) set_default_threads(static_cast<int>(threads));
  const bool json = a.flag("json");
  const double load_before = loadavg1();

  const auto tl = Clock::now();
  auto model = Qwen35Model::load(dir, a.get("backend", "cpu"));
  const double load_s = since(tl);
  const ModelConfig& c = model->config();
  const int64_t V = c.vocab_size;
  const double wbytes = weight_bytes_per_token(*model);
  DeviceEngine* engine = model->device_engine();  // --backend cuda: the device runs the forward
  const double ckpt = static_cast<double>(model->store().total_bytes());
  if (!json)
    std::fprintf(stderr, "[bench] %s: %s, %.3f GB weights read per token, loaded in %.2f s\n", dir.c_str(),
                 model->backend().name().c_str(), wbytes / 1e9, load_s);

  // deterministic pseudo-random prompt (ids below the tokenizer's real range)
  const int64_t maxd = *std::max_element(depths.begin(), depths.end());
  std::vector<int32_t> ids(static_cast<size_t>(maxd + P));
  uint32_t s = 12345;
  const int64_t id_range = std::min<int64_t>(V, 248000);
  for (auto& v : ids) v = static_cast<int32_t>((s = s * 1664525u + 1013904223u) >> 8) % static_cast<int32_t>(id_range);

  Json runs = Json::array();
  struct Line {
    int64_t depth;
    Stats sp, sd;
  };
  std::vector<Line> lines;
  std::vector<float> logits(static_cast<size_t>(V));
  double state_bytes = 0, peak_all = 0, peak_decode = 0, decode_state_bytes = 0;
  DeviceMemoryReport gpu_mem;  // CUDA: the sample with the most device memory in use (before the copy probe)
  double gpu_state_bytes = 0;
  // CUDA: device memory right after the load (weights + context, before any pass): attributes the
  // overhead to the context versus what the passes allocate (scratch, graphs, sequence state)
  const DeviceMemoryReport gpu_at_load = engine ? engine->device_memory() : DeviceMemoryReport{};
  for (int64_t depth : depths) {
    // depth 0: a fresh memory per repetition; otherwise the context is filled once and forked
    SequenceMemory base = model->new_memory();
    if (depth > 0) model->forward(ids.data(), depth, base, nullptr, nullptr, LogitsMode::None);
    std::vector<double> pf, dc;
    for (int64_t r = 0; r < reps + 1; ++r) {  // repetition 0 warms up
      SequenceMemory mem = depth > 0 ? base.fork() : model->new_memory();
      auto t0 = Clock::now();
      model->forward(ids.data() + depth, P, mem, nullptr, logits.data(), LogitsMode::Last);
      const double tp = since(t0);
      int32_t tok = argmax(logits);
      peak_all = std::max(peak_all, rss_bytes("VmHWM:"));
      reset_peak_rss();
      t0 = Clock::now();
      if (engine) {  // the pipelined greedy decoder (mtp.md §4): ids chain on the device, read one step behind
        decode_pipelined(*engine, mem, tok, G, [](int32_t) { return true; });
      } else {
        for (int64_t g = 0; g < G; ++g) {
          model->forward(&tok, 1, mem, nullptr, logits.data(), LogitsMode::Last);
          tok = argmax(logits);
        }
      }
      const double td = since(t0);
      const double held = static_cast<double>(mem.bytes() + (depth > 0 ? base.bytes() : 0));
      if (engine) {  // device memory in use with this sequence's caches still held
        const DeviceMemoryReport dm = engine->device_memory();
        if (dm.used > gpu_mem.used) gpu_mem = dm, gpu_state_bytes = held;
      }
      if (rss_bytes("VmHWM:") > peak_decode) {
        peak_decode = rss_bytes("VmHWM:");
        decode_state_bytes = held;
      }
      state_bytes = std::max(state_bytes, held);
      if (r == 0) continue;
      pf.push_back(static_cast<double>(P) / tp);
      dc.push_back(static_cast<double>(G) / td);
      if (!json)
        std::fprintf(stderr, "[bench] depth %lld rep %lld: prefill %.1f tok/s, decode %.2f tok/s\n",
                     static_cast<long long>(depth), static_cast<long long>(r), pf.back(), dc.back());
    }
    const Stats sp = stats(pf), sd = stats(dc);
    Json run = Json::object();
    run["depth"] = depth;
    run["prefill_tok_s"] = stats_json(sp);
    run["decode_tok_s"] = stats_json(sd);
    run["prefill_reps"] = array_of(pf);
    run["decode_reps"] = array_of(dc);
    // prefill reads the weights once per pass: GB/s = bytes / pass time
    run["prefill_weight_gb_s"] = wbytes / (static_cast<double>(P) / sp.median) / 1e9;
    run["decode_weight_gb_s"] = stats_json({wbytes * sd.median / 1e9, wbytes * sd.min / 1e9, wbytes * sd.max / 1e9});
    runs.push_back(std::move(run));
    lines.push_back({depth, sp, sd});
  }
  // peak RSS before the copy benchmark's buffers; the copy bandwidth after the model runs
  const double peak = std::max(peak_all, rss_bytes("VmHWM:"));
  // CUDA: the device's own copy bandwidth, measured after the model ran in this process
  const double copy_gbs =
      engine ? engine->copy_bandwidth_gbs() : copy_bandwidth_gbs(default_threads(), size_t{256} << 20, 3);
  for (auto& r : runs.as_array()) {
    const double gbs = r.at("decode_weight_gb_s").at("median").as_number();
    r["decode_pct_of_copy_bw"] = 100.0 * gbs / copy_gbs;
  }
  if (!json)
    for (const Line& l : lines)
      std::printf("depth %6lld  prefill %4lld tok: %8.1f tok/s [%.1f-%.1f]   decode %4lld tok: %7.2f tok/s [%.2f-%.2f]  "
                  "%.2f GB/s (%.0f%% of copy bw)\n",
                  static_cast<long long>(l.depth), static_cast<long long>(P), l.sp.median, l.sp.min, l.sp.max,
                  static_cast<long long>(G), l.sd.median, l.sd.min, l.sd.max, wbytes * l.sd.median / 1e9,
                  100.0 * wbytes * l.sd.median / 1e9 / copy_gbs);
  Json doc = Json::object();
  Json mj = Json::object();
  mj["dir"] = dir;
  mj["architecture"] = c.architecture;
  mj["layers"] = c.num_layers;
  mj["hidden"] = c.hidden_size;
  mj["moe"] = c.is_moe;
  mj["quant_bits"] = c.quant.bits;
  mj["quant_group"] = c.quant.group_size;
  mj["checkpoint_bytes"] = ckpt;
  mj["weight_bytes_per_token"] = wbytes;
  doc["model"] = std::move(mj);
  Json sj = Json::object();
  sj["backend"] = model->backend().name();
  sj["threads"] = default_threads();
  sj["prompt_tokens"] = P;
  sj["gen_tokens"] = G;
  sj["reps"] = reps;
  sj["warmup_reps"] = 1;
  sj["decode_loop"] = engine ? "pipelined greedy (device argmax chained, read back one step behind)"
                             : "greedy, host argmax over the logits";
  doc["settings"] = std::move(sj);
  Json hw = Json::object();
  hw["cpu"] = cpu_model();
  hw["cpus_online"] = static_cast<int64_t>(sysconf(_SC_NPROCESSORS_ONLN));
  hw["physical_cores"] = physical_core_count();
  hw["copy_bandwidth_gb_s"] = copy_gbs;
  if (engine) {
    hw["device"] = engine->describe();
    hw["copy_bandwidth_kind"] = "device-to-device copy, bytes read + written, 256 MiB buffers";
  }
  hw["loadavg_before"] = load_before;
  hw["loadavg_after"] = loadavg1();
  doc["machine"] = std::move(hw);
  doc["runs"] = std::move(runs);
  Json mem = Json::object();
  mem["checkpoint_bytes"] = ckpt;
  mem["peak_rss_bytes"] = peak;  // whole run (load, prefill, decode), before the copy benchmark
  mem["kv_state_bytes"] = state_bytes;  // sequence memory held (depth > 0: the context and its working copy)
  mem["peak_rss_decode_bytes"] = peak_decode;  // high-water mark reset after each prefill
  mem["decode_kv_state_bytes"] = decode_state_bytes;
  // the acceptance form: peak RSS while decoding <= 1.15 x checkpoint + KV/state
  mem["decode_rss_over_checkpoint"] = (peak_decode - decode_state_bytes) / ckpt;
  if (engine) {
    // the acceptance form: device memory <= weights + KV + state + 1.5 GiB; "used" is device-wide
    // (CUDA context and any other process on the GPU included), sampled after each repetition's decode
    Json gm = Json::object();
    gm["weights_bytes"] = static_cast<double>(gpu_mem.weights);
    gm["scratch_bytes"] = static_cast<double>(gpu_mem.scratch);
    gm["kv_state_bytes"] = gpu_state_bytes;
    gm["used_bytes"] = static_cast<double>(gpu_mem.used);
    gm["total_bytes"] = static_cast<double>(gpu_mem.total);
    gm["over_weights_kv_state_gib"] =
        (static_cast<double>(gpu_mem.used) - static_cast<double>(gpu_mem.weights) - gpu_state_bytes) / 1073741824.0;
    gm["used_after_load_bytes"] = static_cast<double>(gpu_at_load.used);
    // the CUDA context and other processes: in use after the load beyond the engine's own weights
    gm["after_load_over_weights_gib"] =
        (static_cast<double>(gpu_at_load.used) - static_cast<double>(gpu_at_load.weights)) / 1073741824.0;
    mem["gpu"] = std::move(gm);
  }
  doc["memory"] = std::move(mem);
  doc["load_seconds"] = load_s;
  if (json) {
    JsonDumpOptions o;
    o.indent = 2;
    o.item_sep = ",";
    o.key_sep = ": ";
    std::printf("%s\n", doc.dump(o).c_str());
  } else {
    std::printf("copy bandwidth %.2f GB/s (%d threads); checkpoint %.3f GB; peak RSS %.3f GB (whole run), %.3f GB while "
                "decoding = %.3f x checkpoint + KV/state %.3f GB; load avg %.1f -> %.1f\n",
                copy_gbs, default_threads(), ckpt / 1e9, peak / 1e9, peak_decode / 1e9, (peak_decode - decode_state_bytes) / ckpt,
                decode_state_bytes / 1e9, load_before, loadavg1());
    if (engine)
      std::printf("GPU memory in use %.3f GiB = weights %.3f + KV/state %.3f + %.3f GiB (engine scratch %.3f GiB)\n",
                  gpu_mem.used / 1073741824.0, gpu_mem.weights / 1073741824.0, gpu_state_bytes / 1073741824.0,
                  (static_cast<double>(gpu_mem.used) - gpu_mem.weights - gpu_state_bytes) / 1073741824.0,
                  gpu_mem.scratch / 1073741824.0);
  }
  return 0;
}

MERE_COMMAND(Command{
    "bench",
    "prefill/decode throughput (median, min, max), GB/s of weights per token vs measured copy bandwidth",
    "Each depth: the context is first filled to DEPTH tokens (untimed), then every repetition (after one\n"
    "warm-up) prefills --prompt-tokens and greedily decodes --gen-tokens from a copy of that state.\n"
    "GB/s counts the weights one token reads (MoE: active experts only); copy bandwidth is a memcpy\n"
    "with the same thread count (2 x bytes per second). Results also go to bench/cpu/*.json by hand.",
    {
        {"model", "DIR", "model directory (required)", ""},
        {"prompt-tokens", "N", "prompt length to prefill", "512"},
        {"gen-tokens", "N", "tokens to decode", "128"},
        {"depths", "LIST", "context depths before the prompt, comma-separated", "0"},
        {"reps", "N", "measured repetitions (after one warm-up)", "5"},
        {"threads", "N", "CPU worker threads (0: physical cores)", "0"},
        {"backend", "NAME", "compute backend: ref, cpu or cuda (cuda:N)", "cpu"},
        {"json", "", "print one JSON document on stdout", ""},
    },
    run_bench,
});

}  // namespace
}  // namespace mere::cli
