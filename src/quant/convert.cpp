// HF -> MLX affine conversion (see convert.h). Plan: every input tensor is mapped to an output
// module (experts of one layer are gathered into a stacked module, whose rows come from several
// source tensors or row ranges: "pieces"); quantised modules emit weight/scales/biases, plain ones
// are copied (norms +1, conv1d reshaped). The writer streams shards in the planned order; a
// quantised module is computed once (rows in parallel) and kept until its three tensors are out.
#include "quant/convert.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <unordered_map>

#include "core/error.h"
#include "core/thread_pool.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "model/config.h"
#include "quant/affine.h"

namespace mere {

namespace fs = std::filesystem;

namespace {

constexpr const char* kWhere = "quantize";

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }
bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}
bool is_float(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }

// Zero-centred RMSNorm weights (stored as w, used as 1 + w): every *norm.weight except the GDN's
// gated norm, plus the MTP's pre_fc_norm_{embedding,hidden} (qwen35.md §3.2, mlx-lm's norm_keys).
bool zero_centred_norm(const std::string& n) {
  if (ends_with(n, "linear_attn.norm.weight")) return false;
  return ends_with(n, "norm.weight") || ends_with(n, "pre_fc_norm_embedding.weight") ||
         ends_with(n, "pre_fc_norm_hidden.weight");
}

// Rows [row0, row0 + rows) of a source tensor viewed as [numel / cols, cols].
struct Piece {
  const TensorInfo* src = nullptr;
  int64_t row0 = 0, rows = 0;
};

struct Module {
  std::string name;             // output module path (no ".weight") or full name of a plain tensor
  std::vector<int64_t> shape;   // output float shape (plain) / logical [lead..., out, in] (quantised)
  DType dtype = DType::BF16;    // source dtype: plain output dtype, or scale dtype when quantised
  int64_t cols = 0, rows = 0;   // rows = product of all dims but the last
  std::vector<Piece> pieces;
  int bits = 0, group = 0;      // quantised when bits > 0
  bool shift = false;           // zero-centred norm: +1
};

struct Canon {
  enum Part { Body, LmHead, Mtp, Skip } part = Skip;
  std::string rest;
};

Canon canonical(const std::string& raw) {
  for (const char* v : {"model.visual.", "visual.", "vision_tower.", "model.vision_tower.", "language_model.vision_tower."})
    if (starts_with(raw, v)) return {};
  static const std::pair<const char*, Canon::Part> kMap[] = {
      {"model.language_model.", Canon::Body}, {"language_model.model.", Canon::Body}, {"language_model.lm_head.", Canon::LmHead},
      {"language_model.mtp.", Canon::Mtp},    {"model.mtp.", Canon::Mtp},             {"mtp.", Canon::Mtp},
      {"lm_head.", Canon::LmHead},            {"model.", Canon::Body}};
  for (const auto& [p, part] : kMap)
    if (starts_with(raw, p)) return {part, raw.substr(std::strlen(p))};
  fail(kWhere, cat("tensor \"", raw, "\": expected a Qwen3.5 name (model.language_model.*, model.*, lm_head.*, mtp.*)"));
}

std::string out_prefix(Canon::Part p) {
  switch (p) {
    case Canon::Body: return "language_model.model.";
    case Canon::LmHead: return "language_model.lm_head.";
    default: return "language_model.mtp.";
  }
}

int64_t prod(const std::vector<int64_t>& v, size_t n) {
  int64_t r = 1;
  for (size_t i = 0; i < n; ++i) r *= v[i];
  return r;
}

class Planner {
 public:
  Planner(const QuantizeOptions& o, const TensorStore& store, bool tied) : o_(o) {
    bool mlx_names = false, mlx_conv = false;
    for (const auto& [name, t] : store.all()) {
      MERE_CHECK(!ends_with(name, ".scales") && !ends_with(name, ".biases") && t.dtype != DType::U32, kWhere, "tensor \"",
                 name, "\": the input is already quantised (expected a bf16/f16/f32 checkpoint)");
      Canon c = canonical(name);
      if (c.part == Canon::Skip) continue;
      if (c.part == Canon::LmHead && tied) continue;  // tied models use the embedding (mlx-lm drops it too)
      if (starts_with(name, "language_model.")) mlx_names = true;
      if (ends_with(name, "conv1d.weight") && t.shape.size() == 3 && t.shape[2] == 1 && t.shape[1] > 1) mlx_conv = true;
      inputs_.push_back({c, &t});
    }
    shift_norms_ = !(mlx_names || mlx_conv);
  }

  std::vector<Module> plan() {
    std::vector<Module> mods;
    // experts: key = output prefix + "...mlp." ; value: proj -> expert -> tensor (per-expert names) or fused
    struct Experts {
      const TensorInfo* gate_up = nullptr;
      const TensorInfo* down = nullptr;
      std::map<std::string, std::map<int64_t, const TensorInfo*>> per;  // proj -> e -> tensor
    };
    std::map<std::string, Experts> experts;
    for (const auto& [c, t] : inputs_) {
      const std::string full = out_prefix(c.part) + c.rest;
      const size_t ex = full.find("mlp.experts.");
      if (ex != std::string::npos) {
        const std::string key = full.substr(0, ex + 4);  // ".../mlp."
        const std::string tail = full.substr(ex + 12);   // "gate_up_proj" | "3.gate_proj.weight"
        Experts& e = experts[key];
        if (tail == "gate_up_proj") e.gate_up = t;
        else if (tail == "down_proj") e.down = t;
        else {
          const size_t dot = tail.find('.');
          MERE_CHECK(dot != std::string::npos && dot > 0 && ends_with(tail, ".weight"), kWhere, "tensor \"", t->name,
                     "\": unknown expert tensor");
          int64_t idx = -1;
          try {
            idx = std::stoll(tail.substr(0, dot));
          } catch (const std::exception&) {
          }
          MERE_CHECK(idx >= 0, kWhere, "tensor \"", t->name, "\": expected experts.<index>.<proj>.weight");
          e.per[tail.substr(dot + 1, tail.size() - dot - 1 - 7)][idx] = t;
        }
        continue;
      }
      mods.push_back(single(c, *t, full));
    }
    for (auto& [key, e] : experts) stack_experts(key, e.gate_up, e.down, e.per, &mods);
    return mods;
  }

  const Json& overrides() const { return overrides_; }

 private:
  Module single(const Canon& c, const TensorInfo& t, const std::string& full) {
    MERE_CHECK(is_float(t.dtype), kWhere, "tensor \"", t.name, "\": expected F32/BF16/F16, got ", dtype_name(t.dtype));
    Module m;
    m.dtype = t.dtype;
    m.shape = t.shape;
    m.cols = t.shape.empty() ? 1 : t.shape.back();
    m.rows = t.shape.empty() ? 1 : prod(t.shape, t.shape.size() - 1);
    m.pieces.push_back({&t, 0, m.rows});
    m.name = full;
    if (ends_with(full, "conv1d.weight")) {
      MERE_CHECK(t.shape.size() == 3, kWhere, "tensor \"", t.name, "\": conv1d weight must be 3-D, got ", t.shape_str());
      if (t.shape[1] == 1) m.shape = {t.shape[0], t.shape[2], 1};  // HF [C, 1, K] -> MLX [C, K, 1]: same bytes
      return m;
    }
    if (t.shape.size() == 1) {
      m.shift = shift_norms_ && zero_centred_norm(full);
      return m;
    }
    if (ends_with(full, ".weight") && t.shape.size() >= 2) {
      (void)c;
      quantise(full.substr(0, full.size() - 7), &m);
    }
    return m;
  }

  // Router and shared-expert gate at 8 bits / group 64 (mlx-lm's quant_predicate); in % group != 0
  // stays unquantised (mlx-lm cannot quantise it either).
  void quantise(const std::string& module, Module* m) {
    const bool gate = ends_with(module, "mlp.gate") || ends_with(module, "mlp.shared_expert_gate");
    const int bits = gate ? 8 : o_.bits, group = gate ? 64 : o_.group_size;
    if (m->cols % group != 0) return;
    m->name = module;
    m->bits = bits;
    m->group = group;
    if (gate) {  // mlx-lm's predicate always names them, even when they equal the default
      Json ov = Json::object();
      ov["group_size"] = group;
      ov["bits"] = bits;
      overrides_.as_object().emplace_back(module, std::move(ov));
    }
  }

  void stack_experts(const std::string& key, const TensorInfo* gu, const TensorInfo* dn,
                     const std::map<std::string, std::map<int64_t, const TensorInfo*>>& per, std::vector<Module>* mods) {
    auto make = [&](const std::string& proj, int64_t E, int64_t out, int64_t in, DType dt) {
      Module m;
      m.name = key + "switch_mlp." + proj + ".weight";
      m.shape = {E, out, in};
      m.dtype = dt;
      m.cols = in;
      m.rows = E * out;
      return m;
    };
    if (gu || dn) {
      MERE_CHECK(gu && dn && per.empty(), kWhere, key, "experts: expected gate_up_proj and down_proj (fused) only");
      MERE_CHECK(is_float(gu->dtype) && is_float(dn->dtype), kWhere, gu->name, ": expected a float dtype");
      MERE_CHECK(gu->shape.size() == 3 && gu->shape[1] % 2 == 0 && dn->shape.size() == 3 && dn->shape[0] == gu->shape[0] &&
                     dn->shape[1] == gu->shape[2] && dn->shape[2] == gu->shape[1] / 2,
                 kWhere, gu->name, " ", gu->shape_str(), " / ", dn->name, " ", dn->shape_str(),
                 ": expected [E, 2I, H] and [E, H, I]");
      const int64_t E = gu->shape[0], I = gu->shape[1] / 2, H = gu->shape[2];
      Module g = make("gate_proj", E, I, H, gu->dtype), u = make("up_proj", E, I, H, gu->dtype),
             d = make("down_proj", E, H, I, dn->dtype);
      for (int64_t e = 0; e < E; ++e) {
        g.pieces.push_back({gu, e * 2 * I, I});
        u.pieces.push_back({gu, e * 2 * I + I, I});
      }
      d.pieces.push_back({dn, 0, E * H});
      for (Module* m : {&g, &u, &d}) {
        quantise(m->name.substr(0, m->name.size() - 7), m);
        mods->push_back(std::move(*m));
      }
      return;
    }
    for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
      auto it = per.find(proj);
      MERE_CHECK(it != per.end() && !it->second.empty(), kWhere, key, "experts: missing ", proj);
      const auto& byexp = it->second;
      const int64_t E = static_cast<int64_t>(byexp.size());
      const TensorInfo* t0 = byexp.begin()->second;
      MERE_CHECK(t0->shape.size() == 2 && is_float(t0->dtype), kWhere, t0->name, ": expected a 2-D float weight");
      Module m = make(proj, E, t0->shape[0], t0->shape[1], t0->dtype);
      int64_t want = 0;
      for (const auto& [e, t] : byexp) {
        MERE_CHECK(e == want++, kWhere, key, "experts.", want - 1, ".", proj, ": missing (experts must be 0..E-1)");
        MERE_CHECK(t->shape == t0->shape && t->dtype == t0->dtype, kWhere, t->name, ": shape/dtype differs from expert 0");
        m.pieces.push_back({t, 0, t0->shape[0]});
      }
      quantise(m.name.substr(0, m.name.size() - 7), &m);
      mods->push_back(std::move(m));
    }
    for (const auto& [proj, v] : per)
      MERE_CHECK(proj == "gate_proj" || proj == "up_proj" || proj == "down_proj", kWhere, key, "experts: unknown projection ",
                 proj);
  }

  const QuantizeOptions& o_;
  std::vector<std::pair<Canon, const TensorInfo*>> inputs_;
  bool shift_norms_ = true;
  Json overrides_ = Json::object();
};

// Output tensors of a module: plain -> one; quantised -> weight, scales, biases.
std::vector<TensorDecl> decls_of(const Module& m) {
  if (!m.bits) return {TensorDecl{m.name, m.dtype, m.shape}};
  std::vector<int64_t> w = m.shape, s = m.shape;
  w.back() = quant::packed_cols(m.cols, m.bits);
  s.back() = m.cols / m.group;
  return {TensorDecl{m.name + ".weight", DType::U32, w}, TensorDecl{m.name + ".scales", m.dtype, s},
          TensorDecl{m.name + ".biases", m.dtype, s}};
}

// Rows [r0, r0 + n) of a module as f32 into out [n, cols].
void module_rows_f32(const Module& m, int64_t r0, int64_t n, float* out) {
  int64_t base = 0;
  for (const Piece& p : m.pieces) {
    const int64_t lo = std::max(r0, base), hi = std::min(r0 + n, base + p.rows);
    if (lo < hi) {
      const size_t es = dtype_size(p.src->dtype);
      convert_to_f32(p.src->dtype, p.src->data + static_cast<size_t>((p.row0 + lo - base) * m.cols) * es,
                     out + (lo - r0) * m.cols, static_cast<size_t>((hi - lo) * m.cols));
    }
    base += p.rows;
  }
}

void store_from_f32(DType t, const float* src, int64_t n, uint8_t* dst) {
  auto* d = reinterpret_cast<uint16_t*>(dst);
  if (t == DType::F32) std::memcpy(dst, src, static_cast<size_t>(n) * 4);
  else if (t == DType::BF16)
    for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
  else
    for (int64_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
}

struct Progress {
  bool on = false, tty = false;
  int64_t total = 0, done = 0;
  int last_decile = -1;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now(), last = start;
  void add(int64_t n, bool final = false) {
    done += n;
    if (!on) return;
    auto now = std::chrono::steady_clock::now();
    const double el = std::chrono::duration<double>(now - start).count(), mbs = el > 0 ? done / 1e6 / el : 0;
    const double frac = total ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
    if (tty) {
      if (!final && now - last < std::chrono::milliseconds(200)) return;
      last = now;
      const int w = 30, fill = static_cast<int>(frac * w);
      std::fprintf(stderr, "\r[quantize] [%.*s%*s] %5.1f%% %7.2f / %.2f GB %6.0f MB/s", fill,
                   "##############################", w - fill, "", 100 * frac, done / 1e9, total / 1e9, mbs);
      if (final) std::fprintf(stderr, "\n");
    } else {
      const int dec = static_cast<int>(10 * frac);
      if (dec == last_decile && !final) return;
      last_decile = dec;
      std::fprintf(stderr, "[quantize] %3d%% %.2f / %.2f GB %.0f MB/s\n", dec * 10, done / 1e9, total / 1e9, mbs);
    }
  }
};

bool is_checkpoint_output(const std::string& n) {
  return n == "config.json" || n == "model.safetensors" || n == "model.safetensors.index.json" ||
         (starts_with(n, "model-") && ends_with(n, ".safetensors")) || ends_with(n, ".tmp");
}

bool is_side_file(const std::string& n) {
  for (const char* p : {"tokenizer", "vocab", "merges", "special_tokens_map", "added_tokens", "generation_config",
                        "chat_template", "preprocessor_config", "video_preprocessor_config"})
    if (starts_with(n, p)) return true;
  return ends_with(n, ".jinja");
}

void prepare_out_dir(const QuantizeOptions& o) {
  std::error_code ec;
  const fs::path in = fs::weakly_canonical(o.in_dir, ec), out = fs::weakly_canonical(o.out_dir, ec);
  MERE_CHECK(in != out, kWhere, "--out: expected a directory other than --model, got \"", o.out_dir, "\"");
  if (fs::exists(out)) {
    MERE_CHECK(fs::is_directory(out), kWhere, "--out \"", o.out_dir, "\": expected a directory, got a file");
    if (fs::directory_iterator(out) != fs::directory_iterator()) {
      MERE_CHECK(o.force, kWhere, "--out \"", o.out_dir,
                 "\": expected a new or empty directory, got an existing one (pass --force to overwrite)");
      for (const auto& e : fs::directory_iterator(out))
        if (e.is_regular_file() && is_checkpoint_output(e.path().filename().string())) fs::remove(e.path());
    }
  } else {
    fs::create_directories(out, ec);
    MERE_CHECK(!ec, kWhere, "cannot create \"", o.out_dir, "\": ", ec.message());
  }
}

void write_text(const fs::path& p, const std::string& text) {
  const std::string tmp = p.string() + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  MERE_CHECK(f != nullptr, kWhere, "cannot create \"", tmp, "\": ", std::strerror(errno));
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = std::fclose(f) == 0 && ok;
  MERE_CHECK(ok, kWhere, "writing \"", tmp, "\" failed: ", std::strerror(errno));
  fs::rename(tmp, p);
}

}  // namespace

Json QuantizeResult::summary() const {
  Json j = Json::object();
  j["out"] = out_dir;
  j["tensors"] = tensors;
  j["quantized_modules"] = quantized_modules;
  j["in_bytes"] = in_bytes;
  j["out_bytes"] = out_bytes;
  j["files"] = files;
  j["seconds"] = seconds;
  return j;
}

QuantizeResult quantize_checkpoint(const QuantizeOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  MERE_CHECK(o.bits == 2 || o.bits == 4 || o.bits == 8, kWhere, "--bits: expected 4 or 8 (or 2), got ", o.bits);
  MERE_CHECK(o.group_size == 32 || o.group_size == 64 || o.group_size == 128, kWhere,
             "--group-size: expected 32, 64 or 128, got ", o.group_size);
  MERE_CHECK(fs::exists(fs::path(o.in_dir) / "config.json"), kWhere, "--model \"", o.in_dir,
             "\": expected a checkpoint directory with config.json");
  Json config = Json::parse_file((fs::path(o.in_dir) / "config.json").string());
  MERE_CHECK(!config.contains("quantization") && !config.contains("quantization_config"), kWhere, "--model \"", o.in_dir,
             "\": config.json already has a quantization entry (expected a bf16/f16/f32 checkpoint)");
  const ModelConfig cfg = parse_model_config(config, (fs::path(o.in_dir) / "config.json").string());
  TensorStore store(o.in_dir);
  Planner planner(o, store, cfg.tie_word_embeddings);
  std::vector<Module> mods = planner.plan();
  prepare_out_dir(o);

  // declarations, module lookup, shards
  std::vector<TensorDecl> decls;
  std::unordered_map<std::string, size_t> module_of;
  QuantizeResult r;
  r.out_dir = o.out_dir;
  for (size_t i = 0; i < mods.size(); ++i) {
    for (auto& d : decls_of(mods[i])) {
      module_of[d.name] = i;
      decls.push_back(d);
    }
    r.quantized_modules += mods[i].bits ? 1 : 0;
    for (const auto& p : mods[i].pieces) r.in_bytes += p.rows * mods[i].cols * static_cast<int64_t>(dtype_size(p.src->dtype));
  }
  ShardPlan shards = plan_shards(decls, o.shard_bytes);
  r.tensors = static_cast<int64_t>(decls.size());
  r.out_bytes = shards.total_bytes;

  ThreadPool pool(o.threads);
  Progress progress;
  progress.on = o.progress && shards.total_bytes >= (int64_t{64} << 20);
  progress.tty = isatty(2);
  progress.total = shards.total_bytes;
  std::map<std::string, std::vector<uint8_t>> pending;  // computed tensors not yet written
  const fs::path dir(o.out_dir);
  for (size_t s = 0; s < shards.shards.size(); ++s) {
    SafetensorsWriter w((dir / shards.files[s]).string(), shards.shards[s]);
    for (const auto& d : shards.shards[s]) {
      const Module& m = mods[module_of.at(d.name)];
      if (!m.bits) {  // plain: stream in row blocks (norms +1)
        const int64_t block = std::max<int64_t>(1, (int64_t{8} << 20) / std::max<int64_t>(1, m.cols));
        std::vector<float> f;
        std::vector<uint8_t> buf;
        for (int64_t r0 = 0; r0 < m.rows; r0 += block) {
          const int64_t n = std::min(block, m.rows - r0);
          f.resize(static_cast<size_t>(n * m.cols));
          module_rows_f32(m, r0, n, f.data());
          if (m.shift)
            for (auto& v : f) v += 1.0f;
          buf.resize(f.size() * dtype_size(m.dtype));
          store_from_f32(m.dtype, f.data(), static_cast<int64_t>(f.size()), buf.data());  // exact for the source dtype
          w.write(buf.data(), buf.size());
          progress.add(static_cast<int64_t>(buf.size()));
        }
        continue;
      }
      auto it = pending.find(d.name);
      if (it == pending.end()) {
        const int64_t words = quant::packed_cols(m.cols, m.bits), groups = m.cols / m.group;
        const size_t ss = dtype_size(m.dtype);
        std::vector<uint8_t> wq(static_cast<size_t>(m.rows * words) * 4), sc(static_cast<size_t>(m.rows * groups) * ss),
            bi(sc.size());
        pool.parallel_for(m.rows, std::max<int64_t>(1, (int64_t{1} << 18) / m.cols), [&](int64_t a, int64_t b) {
          std::vector<float> f(static_cast<size_t>((b - a) * m.cols));
          module_rows_f32(m, a, b - a, f.data());
          quant::quantize_rows_as(f.data(), b - a, m.cols, m.bits, m.group,
                                  reinterpret_cast<uint32_t*>(wq.data()) + a * words, m.dtype,
                                  sc.data() + static_cast<size_t>(a * groups) * ss, bi.data() + static_cast<size_t>(a * groups) * ss);
        });
        pending[m.name + ".weight"] = std::move(wq);
        pending[m.name + ".scales"] = std::move(sc);
        pending[m.name + ".biases"] = std::move(bi);
        it = pending.find(d.name);
      }
      w.write(it->second.data(), it->second.size());
      progress.add(static_cast<int64_t>(it->second.size()));
      pending.erase(it);
    }
    w.finish();
  }
  progress.add(0, true);

  // config (quantization + per-module overrides), index, side files
  Json q = Json::object();
  q["group_size"] = o.group_size;
  q["bits"] = o.bits;
  q["mode"] = "affine";
  for (const auto& kv : planner.overrides().as_object()) q.as_object().push_back(kv);
  config["quantization"] = q;
  config["quantization_config"] = q;
  JsonDumpOptions pretty;
  pretty.indent = 2;
  pretty.item_sep = ",";
  pretty.key_sep = ": ";
  if (shards.shards.size() > 1) write_text(dir / "model.safetensors.index.json", shard_index_json(shards).dump(pretty) + "\n");
  for (const auto& e : fs::directory_iterator(o.in_dir)) {
    const std::string n = e.path().filename().string();
    if (e.is_regular_file() && is_side_file(n)) fs::copy_file(e.path(), dir / n, fs::copy_options::overwrite_existing);
  }
  write_text(dir / "config.json", config.dump(pretty) + "\n");  // last: a directory without config.json is incomplete
  r.files = static_cast<int64_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace mere
