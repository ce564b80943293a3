// Synthetic checkpoint planning and streaming generation (see synth.h). The plan lists every output
// tensor with a logical source; the writer turns each shard into a list of row-chunk jobs that a
// pool of workers fills in parallel (bounded ring of slots) while the calling thread writes them in
// order. Quantised modules emit packed codes to the stream and keep their scales/biases aside until
// the writer reaches those tensors.
#include "model/synth.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

#include "core/error.h"
#include "model/synth_tokenizer.h"
#include "quant/affine.h"

namespace mere {

namespace fs = std::filesystem;

namespace {

constexpr const char* kWhere = "synth";
constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
constexpr int64_t kChunkElems = int64_t{1} << 20;  // logical values per generation job
constexpr int64_t kBlockElems = int64_t{1} << 14;  // values generated at once inside a job (cache-sized)

inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

// Counter-based generator (wyrand): word j of a stream is mum(s, s ^ P1) with s = key + (j+1)·P0,
// mum(a, b) = lo64(a·b) ^ hi64(a·b). Element i takes 16 bits of word i/4 (bits 16·(i%4)..): uniform
// on (lo, hi) with 65536 levels, centred in its bin. Any element can be produced on its own, so
// values do not depend on chunking or thread count.
constexpr uint64_t kP0 = 0xA0761D6478BD642Full, kP1 = 0xE7037ED1A0B428DBull;

inline uint64_t rand_word(uint64_t key, uint64_t j) {
  const uint64_t s = key + (j + 1) * kP0;
  const unsigned __int128 m = static_cast<unsigned __int128>(s) * (s ^ kP1);
  return static_cast<uint64_t>(m) ^ static_cast<uint64_t>(m >> 64);
}

// The affine map runs in double: step·bits is exact there (24 × 16 mantissa bits), so the result
// is the same whether or not the compiler fuses the multiply-add (x86 without FMA, aarch64 with).
void uniform_fill(uint64_t key, int64_t idx0, int64_t n, float lo, float hi, float* out) {
  const double step = (static_cast<double>(hi) - lo) / 65536.0;
  const double off = lo + 0.5 * step;
  auto val = [&](uint64_t bits) { return static_cast<float>(off + step * static_cast<double>(bits)); };
  int64_t i = idx0;
  const int64_t end = idx0 + n;
  float* o = out;
  for (; i < end && (i & 3); ++i) *o++ = val((rand_word(key, static_cast<uint64_t>(i >> 2)) >> (16 * (i & 3))) & 0xFFFF);
  for (; i + 4 <= end; i += 4) {
    const uint64_t h = rand_word(key, static_cast<uint64_t>(i >> 2));
    o[0] = val(h & 0xFFFF);
    o[1] = val((h >> 16) & 0xFFFF);
    o[2] = val((h >> 32) & 0xFFFF);
    o[3] = val(h >> 48);
    o += 4;
  }
  for (; i < end; ++i) *o++ = val((rand_word(key, static_cast<uint64_t>(i >> 2)) >> (16 * (i & 3))) & 0xFFFF);
}

// f32_to_bf16 for finite values (synth values always are), branch-free so it vectorises.
inline uint32_t bf16_round_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u + 0x7FFFu + ((u >> 16) & 1u);
}

void convert_from_f32(DType t, const float* src, int64_t n, uint8_t* dst) {
  switch (t) {
    case DType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case DType::BF16: {
      auto* d = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = static_cast<uint16_t>(bf16_round_bits(src[i]) >> 16);
      return;
    }
    case DType::F16: {
      auto* d = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
      return;
    }
    default: fail(kWhere, cat("output dtype: expected F32, BF16 or F16, got ", dtype_name(t)));
  }
}

// Rounds values to what a checkpoint of dtype t holds, so quantising them matches quantising the
// stored weight.
void round_to_dtype(DType t, float* v, int64_t n) {
  if (t == DType::BF16)
    for (int64_t i = 0; i < n; ++i) {
      uint32_t u = bf16_round_bits(v[i]) & 0xFFFF0000u;
      std::memcpy(&v[i], &u, 4);
    }
  else if (t == DType::F16)
    for (int64_t i = 0; i < n; ++i) v[i] = f16_to_f32(f32_to_f16(v[i]));
}

const char* torch_dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::F16: return "float16";
    default: return "bfloat16";
  }
}

int64_t prod(const std::vector<int64_t>& v) {
  int64_t n = 1;
  for (int64_t d : v) n *= d;
  return n;
}

struct RowMap {
  int64_t block = 0, stride = 0, base = 0;
};

// Builds SynthPlan::tensors for one layout.
class PlanBuilder {
 public:
  PlanBuilder(const SynthOptions& o, SynthPlan* plan) : o_(o), g_(o.geometry), mlx_(o.bits > 0), plan_(plan) {
    model_ = mlx_ ? "language_model.model." : "model.language_model.";
    mtp_ = mlx_ ? "language_model.mtp." : "mtp.";
    overrides_ = Json::object();
  }

  void build() {
    const int64_t H = g_.hidden_size, V = g_.vocab_size;
    const float inv_h = 1.0f / std::sqrt(static_cast<float>(H));
    linear(model_ + "embed_tokens", "embed_tokens", {}, V, H, g_.tie_word_embeddings ? 2.0f * inv_h : 1.0f);
    for (int64_t i = 0; i < g_.num_hidden_layers; ++i) {
      std::string li = std::to_string(i);
      layer(model_ + "layers." + li + ".", "layers." + li + ".", g_.is_full(i), false);
    }
    norm_zero(model_ + "norm.weight", "norm", H);
    if (!g_.tie_word_embeddings) linear(mlx_ ? "language_model.lm_head" : "lm_head", "lm_head", {}, V, H, 2.0f * inv_h);
    if (o_.mtp && g_.mtp_num_hidden_layers > 0) {
      norm_zero(mtp_ + "pre_fc_norm_embedding.weight", "mtp.pre_fc_norm_embedding", H);
      norm_zero(mtp_ + "pre_fc_norm_hidden.weight", "mtp.pre_fc_norm_hidden", H);
      linear(mtp_ + "fc", "mtp.fc", {}, H, 2 * H, 1.0f / std::sqrt(2.0f * H));
      for (int64_t j = 0; j < g_.mtp_num_hidden_layers; ++j) {
        std::string lj = std::to_string(j);
        layer(mtp_ + "layers." + lj + ".", "mtp.layers." + lj + ".", true, true);
      }
      norm_zero(mtp_ + "norm.weight", "mtp.norm", H);
    }
  }

  const Json& overrides() const { return overrides_; }

 private:
  SynthTensor& push(std::string name, DType dt, std::vector<int64_t> shape, std::string key, float lo, float hi,
                    int64_t cols, RowMap m = {}) {
    SynthTensor t;
    t.decl = TensorDecl{std::move(name), dt, std::move(shape)};
    t.key = std::move(key);
    t.key_hash = mix64(mix64(o_.seed + kGolden) ^ fnv1a(t.key));
    t.lo = lo;
    t.hi = hi;
    t.cols = cols;
    t.block = m.block;
    t.stride = m.stride;
    t.base = m.base;
    plan_->tensors.push_back(std::move(t));
    return plan_->tensors.back();
  }

  SynthTensor& plain(std::string name, DType dt, std::vector<int64_t> shape, std::string key, float lo, float hi,
                     RowMap m = {}) {
    int64_t cols = shape.empty() ? 1 : shape.back();
    int64_t numel = prod(shape);
    SynthTensor& t = push(std::move(name), dt, std::move(shape), std::move(key), lo, hi, cols, m);
    t.rows = cols ? numel / cols : 0;
    plan_->param_count += numel;
    return t;
  }

  // Zero-centred RMSNorm weight (used as 1 + w): small values around 0; MLX files fold the +1 in.
  void norm_zero(const std::string& name, const std::string& key, int64_t n) {
    SynthTensor& t = plain(name, o_.dtype, {n}, key, -0.05f, 0.05f);
    if (mlx_) t.add = 1.0f;
  }

  // A Linear / Embedding / expert stack [lead..., out, in] with values of standard deviation stdv.
  // HF: one tensor named weight_name (default module + ".weight"); MLX: module.{weight,scales,biases}
  // quantised at the default bits/group (or bits_override at group 64), unless in % group != 0.
  void linear(const std::string& module, const std::string& key, std::vector<int64_t> lead, int64_t out, int64_t in,
              float stdv, RowMap m = {}, int bits_override = 0, const std::string& hf_name = "") {
    const float a = stdv * std::sqrt(3.0f);
    std::vector<int64_t> shape = lead;
    shape.push_back(out);
    shape.push_back(in);
    if (!mlx_) {
      plain(hf_name.empty() ? module + ".weight" : hf_name, o_.dtype, shape, key, -a, a, m);
      return;
    }
    const int bits = bits_override ? bits_override : o_.bits;
    const int group = bits_override ? 64 : o_.group_size;
    if (in % group != 0) {  // mlx-lm leaves such modules unquantised
      plain(module + ".weight", o_.dtype, shape, key, -a, a, m);
      return;
    }
    if (bits_override) {
      Json ov = Json::object();
      ov["group_size"] = group;
      ov["bits"] = bits;
      overrides_.as_object().emplace_back(module, std::move(ov));
    }
    const int64_t rows = prod(lead) * out;
    plan_->param_count += rows * in;
    auto add_role = [&](const std::string& suffix, SynthRole role, DType dt, int64_t last) {
      std::vector<int64_t> s = lead;
      s.push_back(out);
      s.push_back(last);
      SynthTensor& t = push(module + suffix, dt, s, key, -a, a, in, m);
      t.rows = rows;
      t.role = role;
      t.bits = bits;
      t.group = group;
      t.module = module;
    };
    add_role(".weight", SynthRole::QWeight, DType::U32, quant::packed_cols(in, bits));
    add_role(".scales", SynthRole::QScales, o_.dtype, in / group);
    add_role(".biases", SynthRole::QBiases, o_.dtype, in / group);
  }

  // One decoder layer at name prefix p (logical key prefix k). mtp: per-expert HF experts.
  void layer(const std::string& p, const std::string& k, bool full, bool mtp) {
    const int64_t H = g_.hidden_size;
    const float inv_h = 1.0f / std::sqrt(static_cast<float>(H));
    auto inv = [](int64_t n) { return 1.0f / std::sqrt(static_cast<float>(n)); };
    norm_zero(p + "input_layernorm.weight", k + "input_layernorm", H);
    if (full) {
      const std::string a = p + "self_attn.", ka = k + "self_attn.";
      linear(a + "q_proj", ka + "q_proj", {}, g_.q_proj_rows(), H, inv_h);
      linear(a + "k_proj", ka + "k_proj", {}, g_.kv_rows(), H, inv_h);
      linear(a + "v_proj", ka + "v_proj", {}, g_.kv_rows(), H, inv_h);
      linear(a + "o_proj", ka + "o_proj", {}, H, g_.attn_out_cols(), inv(g_.attn_out_cols()));
      norm_zero(a + "q_norm.weight", ka + "q_norm", g_.head_dim);
      norm_zero(a + "k_norm.weight", ka + "k_norm", g_.head_dim);
    } else {
      const std::string a = p + "linear_attn.", ka = k + "linear_attn.";
      const int64_t hv = g_.linear_num_value_heads, vd = g_.gdn_value_dim(), cd = g_.gdn_conv_dim();
      const int64_t kk = g_.linear_conv_kernel_dim;
      linear(a + "in_proj_qkv", ka + "in_proj_qkv", {}, cd, H, inv_h);
      linear(a + "in_proj_z", ka + "in_proj_z", {}, vd, H, inv_h);
      linear(a + "in_proj_b", ka + "in_proj_b", {}, hv, H, inv_h);
      linear(a + "in_proj_a", ka + "in_proj_a", {}, hv, H, inv_h);
      const float ca = std::sqrt(3.0f / static_cast<float>(kk));
      // HF Conv1d [C, 1, K]; MLX [C, K, 1]: the same bytes.
      plain(a + "conv1d.weight", o_.dtype, mlx_ ? std::vector<int64_t>{cd, kk, 1} : std::vector<int64_t>{cd, 1, kk},
            ka + "conv1d", -ca, ca);
      plain(a + "dt_bias", o_.dtype, {hv}, ka + "dt_bias", -0.5f, 0.5f);
      plain(a + "A_log", DType::F32, {hv}, ka + "A_log", 0, 0).init = SynthInit::LogUniform1To16;
      plain(a + "norm.weight", o_.dtype, {g_.linear_value_head_dim}, ka + "norm", 0.95f, 1.05f);
      linear(a + "out_proj", ka + "out_proj", {}, H, vd, inv(vd));
    }
    norm_zero(p + "post_attention_layernorm.weight", k + "post_attention_layernorm", H);
    const std::string f = p + "mlp.", kf = k + "mlp.";
    if (!g_.is_moe()) {
      const int64_t I = g_.intermediate_size;
      linear(f + "gate_proj", kf + "gate_proj", {}, I, H, inv_h);
      linear(f + "up_proj", kf + "up_proj", {}, I, H, inv_h);
      linear(f + "down_proj", kf + "down_proj", {}, H, I, inv(I));
      return;
    }
    const int64_t E = g_.num_experts, Ie = g_.moe_intermediate_size, Is = g_.shared_expert_intermediate_size;
    linear(f + "gate", kf + "gate", {}, E, H, inv_h, {}, 8);
    const std::string gu = kf + "experts.gate_up", dn = kf + "experts.down";
    if (mlx_) {
      linear(f + "switch_mlp.gate_proj", gu, {E}, Ie, H, inv_h, RowMap{Ie, 2 * Ie, 0});
      linear(f + "switch_mlp.up_proj", gu, {E}, Ie, H, inv_h, RowMap{Ie, 2 * Ie, Ie});
      linear(f + "switch_mlp.down_proj", dn, {E}, H, Ie, inv(Ie));
    } else if (!mtp) {
      linear(f + "experts", gu, {E}, 2 * Ie, H, inv_h, {}, 0, f + "experts.gate_up_proj");
      linear(f + "experts", dn, {E}, H, Ie, inv(Ie), {}, 0, f + "experts.down_proj");
    } else {
      for (int64_t e = 0; e < E; ++e) {
        const std::string pe = f + "experts." + std::to_string(e) + ".";
        linear(pe + "gate_proj", gu, {}, Ie, H, inv_h, RowMap{0, 0, e * 2 * Ie});
        linear(pe + "up_proj", gu, {}, Ie, H, inv_h, RowMap{0, 0, e * 2 * Ie + Ie});
        linear(pe + "down_proj", dn, {}, H, Ie, inv(Ie), RowMap{0, 0, e * H});
      }
    }
    linear(f + "shared_expert.gate_proj", kf + "shared_expert.gate_proj", {}, Is, H, inv_h);
    linear(f + "shared_expert.up_proj", kf + "shared_expert.up_proj", {}, Is, H, inv_h);
    linear(f + "shared_expert.down_proj", kf + "shared_expert.down_proj", {}, H, Is, inv(Is));
    linear(f + "shared_expert_gate", kf + "shared_expert_gate", {}, 1, H, inv_h, {}, 8);
  }

  const SynthOptions& o_;
  const Geometry& g_;
  bool mlx_;
  SynthPlan* plan_;
  std::string model_, mtp_;
  Json overrides_;
};

Json vision_config_stub(const Geometry& g) {
  Json v = Json::object();
  v["deepstack_visual_indexes"] = Json::array();
  v["depth"] = 27;
  v["hidden_act"] = "gelu_pytorch_tanh";
  v["hidden_size"] = 1152;
  v["in_channels"] = 3;
  v["initializer_range"] = 0.02;
  v["intermediate_size"] = 4304;
  v["model_type"] = g.is_moe() ? "qwen3_5_moe" : "qwen3_5";
  v["num_heads"] = 16;
  v["num_position_embeddings"] = 2304;
  v["out_hidden_size"] = g.hidden_size;
  v["patch_size"] = 16;
  v["spatial_merge_size"] = 2;
  v["temporal_patch_size"] = 2;
  return v;
}

void write_text_file(const fs::path& path, const std::string& text) {
  std::string tmp = path.string() + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  MERE_CHECK(f != nullptr, kWhere, "cannot create \"", tmp, "\": ", std::strerror(errno));
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = std::fclose(f) == 0 && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    fail(kWhere, cat("writing \"", tmp, "\": ", std::strerror(errno)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = std::strerror(errno);
    std::remove(tmp.c_str());
    fail(kWhere, cat("renaming \"", tmp, "\": ", err));
  }
}

std::string pretty(const Json& j) {
  JsonDumpOptions o;
  o.indent = 2;
  o.item_sep = ",";
  o.key_sep = ": ";
  return j.dump(o) + "\n";
}

bool is_synth_output(const std::string& name) {
  static const char* kFixed[] = {"config.json",       "generation_config.json",       "tokenizer.json",
                                 "tokenizer_config.json", "model.safetensors", "model.safetensors.index.json"};
  std::string base = name;
  if (base.size() > 4 && base.compare(base.size() - 4, 4, ".tmp") == 0) base.resize(base.size() - 4);
  for (const char* f : kFixed)
    if (base == f) return true;
  // model-00001-of-00003.safetensors
  return base.rfind("model-", 0) == 0 && base.find("-of-") != std::string::npos &&
         base.size() > 12 && base.compare(base.size() - 12, 12, ".safetensors") == 0;
}

void prepare_out_dir(const SynthOptions& o) {
  MERE_CHECK(!o.out_dir.empty(), kWhere, "--out: expected a directory, got \"\"");
  fs::path dir(o.out_dir);
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    MERE_CHECK(fs::is_directory(dir, ec), kWhere, "--out \"", o.out_dir, "\": expected a directory, got a file");
    bool empty = fs::directory_iterator(dir, ec) == fs::directory_iterator();
    if (!empty) {
      MERE_CHECK(o.force, kWhere, "--out \"", o.out_dir,
                 "\": expected a new or empty directory, got an existing one (pass --force to replace its checkpoint)");
      for (const auto& e : fs::directory_iterator(dir)) {
        if (e.is_regular_file() && is_synth_output(e.path().filename().string())) fs::remove(e.path());
      }
    }
  } else {
    fs::create_directories(dir, ec);
    MERE_CHECK(!ec, kWhere, "cannot create \"", o.out_dir, "\": ", ec.message());
  }
}

// ---- streaming writer ----

struct Progress {
  bool enabled = false, tty = false;
  int64_t total = 0, done = 0;
  std::chrono::steady_clock::time_point start, last;
  int last_decile = 0;

  void begin(bool on, int64_t total_bytes) {
    enabled = on;
    tty = isatty(2);
    total = total_bytes;
    start = last = std::chrono::steady_clock::now();
  }
  void add(int64_t n, bool force = false) {
    done += n;
    if (!enabled) return;
    auto now = std::chrono::steady_clock::now();
    double el = std::chrono::duration<double>(now - start).count();
    double mbs = el > 0 ? done / 1e6 / el : 0;
    if (tty) {
      if (!force && now - last < std::chrono::milliseconds(200)) return;
      last = now;
      double frac = total ? static_cast<double>(done) / total : 1.0;
      int w = 30, fill = static_cast<int>(frac * w);
      double eta = mbs > 0 ? (total - done) / 1e6 / mbs : 0;
      std::fprintf(stderr, "\r[synth] [%.*s%*s] %5.1f%% %8.2f / %.2f GB %7.0f MB/s ETA %4.0fs", fill,
                   "##############################", w - fill, "", 100 * frac, done / 1e9, total / 1e9, mbs, eta);
      if (force) std::fprintf(stderr, "\n");
    } else {
      int dec = total ? static_cast<int>(10 * done / total) : 10;
      if (dec == last_decile) return;
      last_decile = dec;
      std::fprintf(stderr, "[synth] %3d%% %.2f / %.2f GB %.0f MB/s\n", dec * 10, done / 1e9, total / 1e9, mbs);
    }
  }
};

enum class JobKind : uint8_t { Gen, Copy };
struct Job {
  size_t tensor;  // index into plan tensors
  int64_t r0, n;
  JobKind kind;
  bool keep_scales = false, keep_biases = false;  // QWeight: stash scales/biases for later Copy jobs
};

class ShardStreamer {
 public:
  ShardStreamer(const SynthPlan& plan, const SynthOptions& o, Progress* progress)
      : plan_(plan), o_(o), progress_(progress) {}

  // Writes one shard (tensors in write order). write_pos: global write position of every tensor.
  void write_shard(const std::string& path, const std::vector<TensorDecl>& order,
                   const std::unordered_map<std::string, size_t>& index,
                   const std::unordered_map<std::string, int64_t>& write_pos) {
    jobs_.clear();
    for (const auto& d : order) {
      size_t ti = index.at(d.name);
      const SynthTensor& t = plan_.tensors[ti];
      if (t.role == SynthRole::QScales || t.role == SynthRole::QBiases) {
        if (write_pos.at(t.module + ".weight") < write_pos.at(d.name)) {
          jobs_.push_back({ti, 0, t.rows, JobKind::Copy});
          continue;
        }
      }
      Job proto{ti, 0, 0, JobKind::Gen};
      if (t.role == SynthRole::QWeight) {
        proto.keep_scales = write_pos.at(t.module + ".scales") > write_pos.at(d.name);
        proto.keep_biases = write_pos.at(t.module + ".biases") > write_pos.at(d.name);
      }
      const int64_t per = std::max<int64_t>(1, kChunkElems / std::max<int64_t>(1, t.cols));
      if (t.rows == 0) {
        jobs_.push_back(proto);
        continue;
      }
      for (int64_t r = 0; r < t.rows; r += per) {
        Job j = proto;
        j.r0 = r;
        j.n = std::min(per, t.rows - r);
        jobs_.push_back(j);
      }
    }

    SafetensorsWriter writer(path, order);
    const int nthreads = std::max(1, o_.threads > 0 ? o_.threads : static_cast<int>(std::thread::hardware_concurrency()));
    const size_t nslots = static_cast<size_t>(3 * nthreads);
    slots_.assign(nslots, Slot{});
    next_ = 0;
    written_ = 0;
    abort_ = false;
    error_ = nullptr;
    std::vector<std::thread> workers;
    for (int i = 0; i < nthreads; ++i) workers.emplace_back([this] { worker(); });
    try {
      for (size_t i = 0; i < jobs_.size(); ++i) {
        Slot& s = slots_[i % nslots];
        {
          std::unique_lock<std::mutex> lk(mu_);
          cv_.wait(lk, [&] { return s.ready == static_cast<int64_t>(i) || abort_; });
          if (abort_) break;
        }
        const Job& j = jobs_[i];
        if (j.kind == JobKind::Copy) {
          const std::string& name = plan_.tensors[j.tensor].decl.name;
          std::vector<uint8_t> buf;
          {
            std::lock_guard<std::mutex> lk(mu_);
            auto it = pending_.find(name);
            MERE_CHECK(it != pending_.end(), kWhere, "internal: no stashed data for \"", name, "\"");
            buf = std::move(it->second);
            pending_.erase(it);
          }
          writer.write(buf.data(), buf.size());
          progress_->add(static_cast<int64_t>(buf.size()));
        } else {
          writer.write(s.buf.data(), s.size);
          progress_->add(static_cast<int64_t>(s.size));
        }
        {
          std::lock_guard<std::mutex> lk(mu_);
          written_ = i + 1;
        }
        cv_.notify_all();
      }
    } catch (...) {
      std::lock_guard<std::mutex> lk(mu_);
      if (!error_) error_ = std::current_exception();
      abort_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers) w.join();
    if (error_) std::rethrow_exception(error_);
    writer.finish();
  }

 private:
  struct Slot {
    std::vector<uint8_t> buf;
    size_t size = 0;
    int64_t ready = -1;  // job index whose data is in buf
  };

  std::vector<uint8_t>* stash(const std::string& name, int64_t bytes) {
    std::lock_guard<std::mutex> lk(mu_);
    auto& v = pending_[name];
    if (v.empty()) v.resize(static_cast<size_t>(bytes));
    return &v;
  }

  void worker() {
    std::vector<float> vals;
    std::vector<uint32_t> codes;
    std::vector<uint8_t> sc, bi;
    try {
      while (true) {
        size_t i = next_.fetch_add(1);
        if (i >= jobs_.size()) return;
        Slot& s = slots_[i % slots_.size()];
        {
          std::unique_lock<std::mutex> lk(mu_);
          cv_.wait(lk, [&] { return i < written_ + slots_.size() || abort_; });
          if (abort_) return;
        }
        const Job& j = jobs_[i];
        if (j.kind == JobKind::Gen) generate(j, s, vals, codes, sc, bi);
        {
          std::lock_guard<std::mutex> lk(mu_);
          s.ready = static_cast<int64_t>(i);
        }
        cv_.notify_all();
      }
    } catch (...) {
      std::lock_guard<std::mutex> lk(mu_);
      if (!error_) error_ = std::current_exception();
      abort_ = true;
      cv_.notify_all();
    }
  }

  // Fills slot s with job j's bytes. Rows are produced in blocks of ~16K values so the fp32
  // scratch stays in cache between generation and conversion/quantisation.
  void generate(const Job& j, Slot& s, std::vector<float>& vals, std::vector<uint32_t>& codes,
                std::vector<uint8_t>& sc, std::vector<uint8_t>& bi) {
    const SynthTensor& t = plan_.tensors[j.tensor];
    const int64_t rb = std::max<int64_t>(1, kBlockElems / std::max<int64_t>(1, t.cols));
    vals.resize(static_cast<size_t>(std::min(rb, std::max<int64_t>(j.n, 1)) * t.cols));
    if (t.role == SynthRole::Plain) {
      const int64_t row_bytes = t.cols * static_cast<int64_t>(dtype_size(t.decl.dtype));
      s.size = static_cast<size_t>(j.n * row_bytes);
      if (s.buf.size() < s.size) s.buf.resize(s.size);
      for (int64_t r = j.r0; r < j.r0 + j.n; r += rb) {
        const int64_t n = std::min(rb, j.r0 + j.n - r);
        synth_rows(t, r, n, vals.data());
        convert_from_f32(t.decl.dtype, vals.data(), n * t.cols, s.buf.data() + (r - j.r0) * row_bytes);
      }
      return;
    }
    const DType sdt = o_.dtype;
    const int64_t groups = t.cols / t.group, ssz = static_cast<int64_t>(dtype_size(sdt));
    const int64_t row_words = quant::packed_cols(t.cols, t.bits), row_sbytes = groups * ssz;
    uint8_t* sc_out;
    uint8_t* bi_out;
    uint32_t* code_out;
    sc.resize(static_cast<size_t>(j.n * row_sbytes));
    bi.resize(sc.size());
    sc_out = sc.data();
    bi_out = bi.data();
    if (t.role == SynthRole::QWeight) {
      s.size = static_cast<size_t>(j.n * row_words) * 4;
      if (s.buf.size() < s.size) s.buf.resize(s.size);
      code_out = reinterpret_cast<uint32_t*>(s.buf.data());
      const int64_t off = j.r0 * row_sbytes, total = t.rows * row_sbytes;
      if (j.keep_scales) sc_out = stash(t.module + ".scales", total)->data() + off;
      if (j.keep_biases) bi_out = stash(t.module + ".biases", total)->data() + off;
    } else {
      codes.resize(static_cast<size_t>(j.n * row_words));
      code_out = codes.data();
    }
    for (int64_t r = j.r0; r < j.r0 + j.n; r += rb) {
      const int64_t n = std::min(rb, j.r0 + j.n - r), k = r - j.r0;
      synth_rows(t, r, n, vals.data());
      round_to_dtype(sdt, vals.data(), n * t.cols);
      quant::quantize_rows_as(vals.data(), n, t.cols, t.bits, t.group, code_out + k * row_words, sdt,
                              sc_out + k * row_sbytes, bi_out + k * row_sbytes);
    }
    if (t.role != SynthRole::QWeight) {
      s.size = sc.size();
      if (s.buf.size() < s.size) s.buf.resize(s.size);
      std::memcpy(s.buf.data(), t.role == SynthRole::QScales ? sc.data() : bi.data(), s.size);
    }
  }

  const SynthPlan& plan_;
  const SynthOptions& o_;
  Progress* progress_;
  std::vector<Job> jobs_;
  std::vector<Slot> slots_;
  std::atomic<size_t> next_{0};
  size_t written_ = 0;
  bool abort_ = false;
  std::exception_ptr error_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::vector<uint8_t>> pending_;
};

}  // namespace

void synth_rows(const SynthTensor& t, int64_t r0, int64_t n, float* out) {
  for (int64_t r = r0; r < r0 + n; ++r) {
    int64_t lr = t.block > 0 ? t.base + (r / t.block) * t.stride + r % t.block : t.base + r;
    float* o = out + (r - r0) * t.cols;
    if (t.init == SynthInit::LogUniform1To16) {
      uniform_fill(t.key_hash, lr * t.cols, t.cols, 1.0f, 16.0f, o);
      for (int64_t c = 0; c < t.cols; ++c) o[c] = std::log(o[c]);
    } else {
      uniform_fill(t.key_hash, lr * t.cols, t.cols, t.lo, t.hi, o);
    }
    if (t.add != 0)
      for (int64_t c = 0; c < t.cols; ++c) o[c] += t.add;
  }
}

SynthPlan synth_plan(const SynthOptions& o) {
  MERE_CHECK(o.dtype == DType::BF16 || o.dtype == DType::F16 || o.dtype == DType::F32, kWhere,
             "--dtype: expected bf16, f16 or f32, got ", dtype_name(o.dtype));
  MERE_CHECK(o.bits == 0 || o.bits == 4 || o.bits == 8, kWhere, "--bits: expected 4 or 8 (or none), got ", o.bits);
  if (o.bits) {
    MERE_CHECK(o.group_size == 32 || o.group_size == 64 || o.group_size == 128, kWhere,
               "--group-size: expected 32, 64 or 128, got ", o.group_size);
  }
  Geometry g = o.geometry;
  g.validate();
  SynthTokenizerLayout tok = synth_tokenizer_layout(g.vocab_size);
  if (g.eos_token_id < 0) g.eos_token_id = tok.endoftext;

  SynthOptions oo = o;
  oo.geometry = g;
  SynthPlan plan;
  PlanBuilder b(oo, &plan);
  b.build();

  const bool real_vocab = g.vocab_size >= 248077;
  Json c = Json::object();
  Json arch = Json::array();
  arch.push_back(g.is_moe() ? "Qwen3_5MoeForConditionalGeneration" : "Qwen3_5ForConditionalGeneration");
  c["architectures"] = std::move(arch);
  if (real_vocab) c["image_token_id"] = 248056;
  c["model_type"] = g.is_moe() ? "qwen3_5_moe" : "qwen3_5";
  if (o.bits) {
    Json q = Json::object();
    q["group_size"] = o.group_size;
    q["bits"] = o.bits;
    q["mode"] = "affine";
    for (const auto& kv : b.overrides().as_object()) q.as_object().push_back(kv);
    c["quantization"] = q;
    c["quantization_config"] = q;
  }
  c["text_config"] = geometry_text_config(g, torch_dtype_name(o.dtype));
  c["tie_word_embeddings"] = g.tie_word_embeddings;
  c["transformers_version"] = "4.57.0.dev0";
  if (real_vocab) c["video_token_id"] = 248057;
  c["vision_config"] = vision_config_stub(g);
  if (real_vocab) {
    c["vision_end_token_id"] = 248054;
    c["vision_start_token_id"] = 248053;
  }
  plan.config = std::move(c);

  Json gc = Json::object();
  gc["bos_token_id"] = tok.endoftext;
  gc["do_sample"] = true;
  Json eos = Json::array();
  eos.push_back(tok.im_end);
  eos.push_back(tok.endoftext);
  gc["eos_token_id"] = std::move(eos);
  gc["pad_token_id"] = tok.endoftext;
  gc["temperature"] = 0.6;
  gc["top_k"] = 20;
  gc["top_p"] = 0.95;
  gc["transformers_version"] = "4.57.0.dev0";
  plan.generation_config = std::move(gc);
  plan.tokenizer = synth_tokenizer_json(tok);
  plan.tokenizer_config = synth_tokenizer_config_json(tok);
  return plan;
}

Json SynthResult::summary() const {
  Json j = Json::object();
  j["out"] = out_dir;
  Json fl = Json::array();
  for (const auto& f : files) {
    Json e = Json::object();
    e["name"] = f.name;
    e["bytes"] = f.bytes;
    fl.push_back(std::move(e));
  }
  j["files"] = std::move(fl);
  j["bytes"] = bytes;
  j["tensor_bytes"] = tensor_bytes;
  j["tensors"] = tensor_count;
  j["parameters"] = param_count;
  j["seconds"] = seconds;
  j["mb_per_s"] = seconds > 0 ? bytes / 1e6 / seconds : 0.0;
  return j;
}

SynthResult write_synth_checkpoint(const SynthOptions& o) {
  auto t0 = std::chrono::steady_clock::now();
  SynthPlan plan = synth_plan(o);
  prepare_out_dir(o);
  const fs::path dir(o.out_dir);

  std::vector<TensorDecl> decls;
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    decls.push_back(plan.tensors[i].decl);
    index[plan.tensors[i].decl.name] = i;
  }
  ShardPlan shards = plan_shards(decls, o.shard_bytes);
  std::unordered_map<std::string, int64_t> write_pos;
  int64_t pos = 0;
  for (const auto& s : shards.shards)
    for (const auto& d : s) write_pos[d.name] = pos++;

  SynthResult r;
  r.out_dir = o.out_dir;
  r.tensor_count = static_cast<int64_t>(decls.size());
  r.param_count = plan.param_count;
  r.tensor_bytes = shards.total_bytes;

  Progress progress;
  progress.begin(o.progress && shards.total_bytes >= (int64_t{64} << 20), shards.total_bytes);
  ShardStreamer streamer(plan, o, &progress);
  for (size_t s = 0; s < shards.shards.size(); ++s) {
    fs::path p = dir / shards.files[s];
    streamer.write_shard(p.string(), shards.shards[s], index, write_pos);
    r.files.push_back({shards.files[s], static_cast<int64_t>(fs::file_size(p))});
  }
  progress.add(0, true);

  auto json_file = [&](const std::string& name, const Json& j) {
    std::string text = pretty(j);
    write_text_file(dir / name, text);
    r.files.push_back({name, static_cast<int64_t>(text.size())});
  };
  if (shards.shards.size() > 1) json_file("model.safetensors.index.json", shard_index_json(shards));
  json_file("tokenizer.json", plan.tokenizer);
  json_file("tokenizer_config.json", plan.tokenizer_config);
  json_file("generation_config.json", plan.generation_config);
  json_file("config.json", plan.config);  // last: a directory without config.json is incomplete
  for (const auto& f : r.files) r.bytes += f.bytes;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace mere
