// Synthetic checkpoints (tiny presets only): tensor names and shapes in the HF and MLX layouts,
// config/tokenizer files, sharding + index, determinism across seeds and thread counts, overwrite
// refusal, value sanity (norms, A_log), MLX = quantised HF values, and the CLI command end to end.
// Files are parsed here with mere::Json (independent of the runtime's safetensors reader).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/dtype.h"
#include "core/error.h"
#include "core/json.h"
#include "model/geometry.h"
#include "model/synth.h"
#include "model/synth_tokenizer.h"
#include "quant/affine.h"

namespace fs = std::filesystem;
using mere::DType;
using mere::Json;

namespace {

struct Tensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// All tensors of a checkpoint directory (single file or sharded), parsed by hand.
std::map<std::string, Tensor> read_dir(const fs::path& dir) {
  std::map<std::string, Tensor> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".safetensors") continue;
    std::string b = slurp(e.path());
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(b[static_cast<size_t>(i)]);
    EXPECT_EQ((8 + n) % 8, 0u);
    Json h = Json::parse(b.substr(8, n));
    int64_t end_max = 0;
    for (const auto& [name, v] : h.as_object()) {
      if (name == "__metadata__") continue;
      Tensor t;
      t.dtype = v.at("dtype").as_string();
      for (const auto& d : v.at("shape").as_array()) t.shape.push_back(d.as_int());
      int64_t a = v.at("data_offsets").at(0).as_int(), z = v.at("data_offsets").at(1).as_int();
      EXPECT_EQ(a % (t.dtype == "F32" || t.dtype == "U32" ? 4 : 2), 0) << name << " misaligned";
      t.bytes = b.substr(8 + n + static_cast<size_t>(a), static_cast<size_t>(z - a));
      end_max = std::max(end_max, z);
      out[name] = std::move(t);
    }
    EXPECT_EQ(static_cast<int64_t>(b.size()), static_cast<int64_t>(8 + n) + end_max) << e.path();
  }
  return out;
}

fs::path temp_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("mere_synth_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p;
}

mere::SynthOptions opts(const std::string& preset, const fs::path& dir, int bits = 0, uint64_t seed = 7) {
  mere::SynthOptions o;
  o.geometry = mere::geometry_preset(preset);
  o.bits = bits;
  o.seed = seed;
  o.out_dir = dir.string();
  o.threads = 2;
  return o;
}

std::map<std::string, mere::SynthTensor> plan_map(const mere::SynthOptions& o) {
  std::map<std::string, mere::SynthTensor> m;
  for (const auto& t : mere::synth_plan(o).tensors) m[t.decl.name] = t;
  return m;
}

std::vector<int64_t> shape_of(const std::map<std::string, mere::SynthTensor>& m, const std::string& n) {
  auto it = m.find(n);
  EXPECT_NE(it, m.end()) << "missing " << n;
  return it == m.end() ? std::vector<int64_t>{} : it->second.decl.shape;
}

using Shape = std::vector<int64_t>;

std::vector<float> as_f32(const Tensor& t) {
  std::vector<float> v;
  if (t.dtype == "F32") {
    v.resize(t.bytes.size() / 4);
    std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  } else {
    EXPECT_EQ(t.dtype, "BF16");
    for (size_t i = 0; i < t.bytes.size(); i += 2) {
      uint16_t h;
      std::memcpy(&h, t.bytes.data() + i, 2);
      v.push_back(mere::bf16_to_f32(h));
    }
  }
  return v;
}

}  // namespace

TEST(Geometry, PresetsValidateAndMatchTheTable) {
  for (const auto& n : mere::geometry_preset_names()) EXPECT_NO_THROW(mere::geometry_preset(n)) << n;
  auto g = mere::geometry_preset("qwen3.5-27b");
  EXPECT_EQ(g.hidden_size, 5120);
  EXPECT_EQ(g.gdn_conv_dim(), 10240);
  EXPECT_EQ(g.q_proj_rows(), 12288);
  EXPECT_EQ(g.layer_types.size(), 64u);
  EXPECT_TRUE(g.is_full(63));
  EXPECT_FALSE(g.is_full(62));
  auto m = mere::geometry_preset("qwen3.5-35b-a3b");
  EXPECT_EQ(m.num_experts, 256);
  EXPECT_EQ(m.vocab_size, 248320);
  EXPECT_THROW(mere::geometry_preset("qwen9"), mere::Error);
  // A text_config round trip.
  auto back = mere::geometry_from_json(mere::geometry_text_config(m));
  EXPECT_EQ(back.moe_intermediate_size, 512);
  EXPECT_EQ(back.layer_types, m.layer_types);
  EXPECT_EQ(back.rope_theta, 1e7);
  // --geometry FILE: a text_config JSON (defaults for the fields every Qwen3.5 model shares).
  fs::path f = fs::temp_directory_path() / ("mere_geometry_" + std::to_string(::getpid()) + ".json");
  std::ofstream(f) << R"({"hidden_size": 256, "num_hidden_layers": 3, "num_attention_heads": 2,
    "num_key_value_heads": 1, "linear_num_value_heads": 32, "intermediate_size": 512, "vocab_size": 1024,
    "layer_types": ["linear_attention", "full_attention", "linear_attention"], "tie_word_embeddings": true})";
  auto fg = mere::load_geometry(f.string());
  fs::remove(f);
  EXPECT_EQ(fg.name, f.string());
  EXPECT_EQ(fg.head_dim, 256);
  EXPECT_EQ(fg.linear_num_key_heads, 16);
  EXPECT_TRUE(fg.is_full(1));
  EXPECT_TRUE(fg.tie_word_embeddings);
  mere::SynthOptions fo;
  fo.geometry = fg;
  auto fp = mere::synth_plan(fo);
  EXPECT_EQ(fp.config.at("text_config").at("layer_types").at(1).as_string(), "full_attention");
  EXPECT_EQ(fp.config.at("text_config").at("eos_token_id").as_int(), 256);
  EXPECT_THROW(mere::load_geometry("/no/such/geometry.json"), mere::Error);
  Json bad = Json::parse(R"({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 3,
    "num_key_value_heads": 2, "linear_num_value_heads": 4, "intermediate_size": 128})");
  EXPECT_THROW(mere::geometry_from_json(bad), mere::Error);
}

TEST(Synth, TinyDenseHfNamesAndShapes) {
  auto m = plan_map(opts("tiny-dense", "unused"));
  const std::string P = "model.language_model.";
  EXPECT_EQ(shape_of(m, P + "embed_tokens.weight"), (Shape{512, 128}));
  EXPECT_EQ(shape_of(m, "lm_head.weight"), (Shape{512, 128}));
  EXPECT_EQ(shape_of(m, P + "norm.weight"), (Shape{128}));
  EXPECT_EQ(shape_of(m, P + "layers.0.linear_attn.in_proj_qkv.weight"), (Shape{256, 128}));
  EXPECT_EQ(shape_of(m, P + "layers.0.linear_attn.in_proj_z.weight"), (Shape{128, 128}));
  EXPECT_EQ(shape_of(m, P + "layers.0.linear_attn.in_proj_b.weight"), (Shape{4, 128}));
  EXPECT_EQ(shape_of(m, P + "layers.0.linear_attn.conv1d.weight"), (Shape{256, 1, 4}));
  EXPECT_EQ(shape_of(m, P + "layers.0.linear_attn.A_log"), (Shape{4}));
  EXPECT_EQ(m[P + "layers.0.linear_attn.A_log"].decl.dtype, DType::F32);
  EXPECT_EQ(m[P + "layers.0.linear_attn.dt_bias"].decl.dtype, DType::BF16);
  EXPECT_EQ(shape_of(m, P + "layers.0.linear_attn.norm.weight"), (Shape{32}));
  EXPECT_EQ(shape_of(m, P + "layers.2.linear_attn.out_proj.weight"), (Shape{128, 128}));
  EXPECT_EQ(shape_of(m, P + "layers.3.self_attn.q_proj.weight"), (Shape{512, 128}));
  EXPECT_EQ(shape_of(m, P + "layers.3.self_attn.k_proj.weight"), (Shape{128, 128}));
  EXPECT_EQ(shape_of(m, P + "layers.3.self_attn.o_proj.weight"), (Shape{128, 256}));
  EXPECT_EQ(shape_of(m, P + "layers.3.self_attn.q_norm.weight"), (Shape{64}));
  EXPECT_EQ(shape_of(m, P + "layers.1.mlp.down_proj.weight"), (Shape{128, 256}));
  EXPECT_EQ(m.count(P + "layers.3.linear_attn.A_log"), 0u);
  EXPECT_EQ(m.count(P + "layers.0.self_attn.q_proj.weight"), 0u);
  // MTP: 4 head tensors + one full-attention layer with the dense MLP.
  EXPECT_EQ(shape_of(m, "mtp.fc.weight"), (Shape{128, 256}));
  EXPECT_EQ(shape_of(m, "mtp.pre_fc_norm_embedding.weight"), (Shape{128}));
  EXPECT_EQ(shape_of(m, "mtp.pre_fc_norm_hidden.weight"), (Shape{128}));
  EXPECT_EQ(shape_of(m, "mtp.norm.weight"), (Shape{128}));
  EXPECT_EQ(shape_of(m, "mtp.layers.0.self_attn.q_proj.weight"), (Shape{512, 128}));
  EXPECT_EQ(shape_of(m, "mtp.layers.0.mlp.gate_proj.weight"), (Shape{256, 128}));
  int mtp = 0;
  for (const auto& [k, v] : m) mtp += k.rfind("mtp.", 0) == 0;
  EXPECT_EQ(mtp, 4 + 2 + 6 + 3);

  auto tied = plan_map(opts("tiny-dense-tied", "unused"));
  EXPECT_EQ(tied.count("lm_head.weight"), 0u);
  auto o = opts("tiny-dense", "unused");
  o.mtp = false;
  for (const auto& t : mere::synth_plan(o).tensors) EXPECT_NE(t.decl.name.rfind("mtp.", 0), 0u) << t.decl.name;
}

TEST(Synth, TinyMoeHfNamesAndShapes) {
  auto m = plan_map(opts("tiny-moe", "unused"));
  const std::string L = "model.language_model.layers.1.mlp.";
  EXPECT_EQ(shape_of(m, L + "gate.weight"), (Shape{8, 128}));
  EXPECT_EQ(shape_of(m, L + "experts.gate_up_proj"), (Shape{8, 128, 128}));
  EXPECT_EQ(shape_of(m, L + "experts.down_proj"), (Shape{8, 128, 64}));
  EXPECT_EQ(shape_of(m, L + "shared_expert.gate_proj.weight"), (Shape{128, 128}));
  EXPECT_EQ(shape_of(m, L + "shared_expert.down_proj.weight"), (Shape{128, 128}));
  EXPECT_EQ(shape_of(m, L + "shared_expert_gate.weight"), (Shape{1, 128}));
  EXPECT_EQ(m.count(L + "gate_proj.weight"), 0u);
  // MTP experts are per-expert tensors, as in the released checkpoints.
  EXPECT_EQ(shape_of(m, "mtp.layers.0.mlp.experts.7.gate_proj.weight"), (Shape{64, 128}));
  EXPECT_EQ(shape_of(m, "mtp.layers.0.mlp.experts.0.down_proj.weight"), (Shape{128, 64}));
  EXPECT_EQ(m.count("mtp.layers.0.mlp.experts.gate_up_proj"), 0u);
  int mtp = 0;
  for (const auto& [k, v] : m) mtp += k.rfind("mtp.", 0) == 0;
  EXPECT_EQ(mtp, 4 + 2 + 6 + 1 + 3 + 1 + 8 * 3);  // the 785-tensor pattern at E = 8
}

TEST(Synth, TinyMoeMlxNamesShapesAndOverrides) {
  auto o = opts("tiny-moe", "unused", 4);
  auto m = plan_map(o);
  const std::string L = "language_model.model.layers.0.";
  EXPECT_EQ(shape_of(m, "language_model.model.embed_tokens.weight"), (Shape{512, 16}));
  EXPECT_EQ(m["language_model.model.embed_tokens.weight"].decl.dtype, DType::U32);
  EXPECT_EQ(shape_of(m, "language_model.model.embed_tokens.scales"), (Shape{512, 2}));
  EXPECT_EQ(shape_of(m, "language_model.model.embed_tokens.biases"), (Shape{512, 2}));
  EXPECT_EQ(shape_of(m, "language_model.lm_head.weight"), (Shape{512, 16}));
  EXPECT_EQ(shape_of(m, L + "linear_attn.conv1d.weight"), (Shape{256, 4, 1}));
  EXPECT_EQ(m[L + "linear_attn.A_log"].decl.dtype, DType::F32);
  EXPECT_EQ(shape_of(m, L + "linear_attn.in_proj_b.weight"), (Shape{4, 16}));
  EXPECT_EQ(shape_of(m, L + "mlp.switch_mlp.gate_proj.weight"), (Shape{8, 64, 16}));
  EXPECT_EQ(shape_of(m, L + "mlp.switch_mlp.gate_proj.scales"), (Shape{8, 64, 2}));
  EXPECT_EQ(shape_of(m, L + "mlp.switch_mlp.down_proj.weight"), (Shape{8, 128, 8}));
  EXPECT_EQ(shape_of(m, L + "mlp.switch_mlp.down_proj.scales"), (Shape{8, 128, 1}));
  // Router and shared-expert gate at 8 bits / group 64.
  EXPECT_EQ(shape_of(m, L + "mlp.gate.weight"), (Shape{8, 32}));
  EXPECT_EQ(shape_of(m, L + "mlp.gate.scales"), (Shape{8, 2}));
  EXPECT_EQ(shape_of(m, L + "mlp.shared_expert_gate.weight"), (Shape{1, 32}));
  EXPECT_EQ(m.count(L + "mlp.experts.gate_up_proj"), 0u);
  // MTP kept, quantised, experts stacked.
  EXPECT_EQ(shape_of(m, "language_model.mtp.fc.weight"), (Shape{128, 32}));
  EXPECT_EQ(shape_of(m, "language_model.mtp.layers.0.mlp.switch_mlp.up_proj.weight"), (Shape{8, 64, 16}));
  EXPECT_EQ(shape_of(m, "language_model.mtp.norm.weight"), (Shape{128}));
  for (const auto& [k, v] : m) EXPECT_EQ(k.find("experts."), std::string::npos) << k;

  auto plan = mere::synth_plan(o);
  const Json& q = plan.config.at("quantization");
  EXPECT_EQ(q.at("bits").as_int(), 4);
  EXPECT_EQ(q.at("group_size").as_int(), 64);
  EXPECT_EQ(q.at("mode").as_string(), "affine");
  EXPECT_EQ(q.at("language_model.model.layers.0.mlp.gate").at("bits").as_int(), 8);
  EXPECT_EQ(q.at("language_model.model.layers.3.mlp.shared_expert_gate").at("group_size").as_int(), 64);
  EXPECT_EQ(q.at("language_model.mtp.layers.0.mlp.gate").at("bits").as_int(), 8);
  EXPECT_TRUE(plan.config.at("quantization_config") == q);

  // Group 128: in-dims of 64 cannot be quantised and stay plain (as mlx-lm leaves them).
  o.group_size = 128;
  auto g128 = plan_map(o);
  EXPECT_EQ(g128[L + "mlp.switch_mlp.down_proj.weight"].decl.dtype, DType::BF16);
  EXPECT_EQ(shape_of(g128, L + "mlp.switch_mlp.down_proj.weight"), (Shape{8, 128, 64}));
  EXPECT_EQ(g128.count(L + "mlp.switch_mlp.down_proj.scales"), 0u);
  EXPECT_EQ(shape_of(g128, L + "mlp.switch_mlp.gate_proj.scales"), (Shape{8, 64, 1}));
}

TEST(Synth, TinyDenseMlx8BitShapes) {
  auto m = plan_map(opts("tiny-dense", "unused", 8));
  EXPECT_EQ(shape_of(m, "language_model.model.layers.3.self_attn.q_proj.weight"), (Shape{512, 32}));
  EXPECT_EQ(shape_of(m, "language_model.model.layers.3.self_attn.o_proj.scales"), (Shape{128, 4}));
  EXPECT_EQ(shape_of(m, "language_model.model.layers.1.mlp.down_proj.weight"), (Shape{128, 64}));
  EXPECT_EQ(plan_map(opts("tiny-dense", "unused", 8)).count("language_model.model.layers.0.mlp.gate.weight"), 0u);
  auto plan = mere::synth_plan(opts("tiny-dense", "unused", 8));
  EXPECT_EQ(plan.config.at("quantization").size(), 3u);  // no overrides for dense models
}

TEST(Synth, WritesCheckpointWithConfigAndTokenizer) {
  fs::path dir = temp_dir("write");
  auto o = opts("tiny-moe", dir);
  auto r = mere::write_synth_checkpoint(o);
  EXPECT_TRUE(fs::exists(dir / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "model.safetensors.index.json"));
  for (const char* f : {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"})
    EXPECT_TRUE(fs::exists(dir / f)) << f;
  int64_t total = 0;
  for (const auto& f : r.files) total += static_cast<int64_t>(fs::file_size(dir / f.name));
  EXPECT_EQ(total, r.bytes);
  Json s = r.summary();
  EXPECT_EQ(s.at("parameters").as_int(), r.param_count);
  EXPECT_GT(r.param_count, 1000000);

  Json c = Json::parse_file((dir / "config.json").string());
  EXPECT_EQ(c.at("architectures").at(0).as_string(), "Qwen3_5MoeForConditionalGeneration");
  EXPECT_EQ(c.at("model_type").as_string(), "qwen3_5_moe");
  EXPECT_FALSE(c.at("tie_word_embeddings").as_bool());
  EXPECT_TRUE(c.at("vision_config").is_object());
  const Json& t = c.at("text_config");
  for (const char* k :
       {"vocab_size", "hidden_size", "num_hidden_layers", "layer_types", "full_attention_interval",
        "num_attention_heads", "num_key_value_heads", "head_dim", "attn_output_gate", "attention_bias",
        "linear_num_key_heads", "linear_key_head_dim", "linear_num_value_heads", "linear_value_head_dim",
        "linear_conv_kernel_dim", "num_experts", "num_experts_per_tok", "moe_intermediate_size",
        "shared_expert_intermediate_size", "rms_norm_eps", "hidden_act", "rope_parameters",
        "max_position_embeddings", "mamba_ssm_dtype", "mtp_num_hidden_layers", "mtp_use_dedicated_embeddings",
        "eos_token_id", "tie_word_embeddings", "model_type", "mlp_only_layers"})
    EXPECT_TRUE(t.contains(k)) << k;
  EXPECT_EQ(t.at("model_type").as_string(), "qwen3_5_moe_text");
  EXPECT_EQ(t.at("layer_types").size(), 4u);
  EXPECT_EQ(t.at("layer_types").at(3).as_string(), "full_attention");
  EXPECT_EQ(t.at("mtp_num_hidden_layers").as_int(), 1);
  EXPECT_EQ(t.at("eos_token_id").as_int(), 256);
  for (const char* k : {"rope_theta", "partial_rotary_factor", "mrope_section", "mrope_interleaved", "rope_type"})
    EXPECT_TRUE(t.at("rope_parameters").contains(k)) << k;
  EXPECT_EQ(t.at("rope_parameters").at("rope_theta").as_int(), 10000000);

  Json tok = Json::parse_file((dir / "tokenizer.json").string());
  EXPECT_EQ(tok.at("model").at("type").as_string(), "BPE");
  EXPECT_EQ(tok.at("model").at("vocab").size(), 256u);
  EXPECT_EQ(tok.at("model").at("merges").size(), 0u);
  EXPECT_EQ(tok.at("model").at("vocab").at("Ġ").as_int(), 32);  // GPT-2 byte map: space -> U+0120
  EXPECT_EQ(tok.at("model").at("vocab").at("a").as_int(), 97);
  EXPECT_EQ(tok.at("added_tokens").size(), 7u);
  EXPECT_EQ(tok.at("added_tokens").at(2).at("content").as_string(), "<|im_end|>");
  EXPECT_EQ(tok.at("normalizer").at("type").as_string(), "NFC");
  EXPECT_EQ(tok.at("decoder").at("type").as_string(), "ByteLevel");
  Json tc = Json::parse_file((dir / "tokenizer_config.json").string());
  EXPECT_NE(tc.at("chat_template").as_string().find("<|im_start|>"), std::string::npos);
  EXPECT_EQ(tc.at("eos_token").as_string(), "<|im_end|>");
  Json gc = Json::parse_file((dir / "generation_config.json").string());
  EXPECT_EQ(gc.at("eos_token_id").at(0).as_int(), 258);

  // The file holds exactly the planned tensors with the planned dtypes and shapes.
  auto files = read_dir(dir);
  auto plan = mere::synth_plan(o);
  EXPECT_EQ(files.size(), plan.tensors.size());
  for (const auto& p : plan.tensors) {
    auto it = files.find(p.decl.name);
    ASSERT_NE(it, files.end()) << p.decl.name;
    EXPECT_EQ(it->second.dtype, mere::dtype_name(p.decl.dtype)) << p.decl.name;
    EXPECT_EQ(it->second.shape, p.decl.shape) << p.decl.name;
  }
  // Sane values: A_log = log U(1, 16); zero-centred norms small; GDN norm near 1.
  for (float v : as_f32(files["model.language_model.layers.0.linear_attn.A_log"])) {
    EXPECT_GE(v, 0.0f);
    EXPECT_LE(v, std::log(16.0f));
  }
  for (float v : as_f32(files["model.language_model.layers.0.input_layernorm.weight"])) EXPECT_LE(std::fabs(v), 0.06f);
  for (float v : as_f32(files["model.language_model.layers.0.linear_attn.norm.weight"])) EXPECT_NEAR(v, 1.0f, 0.06f);
  auto emb = as_f32(files["model.language_model.embed_tokens.weight"]);
  double ss = 0;
  for (float v : emb) ss += v * v;
  EXPECT_NEAR(std::sqrt(ss / emb.size()), 1.0, 0.05);  // untied embedding: unit variance
  fs::remove_all(dir);
}

TEST(Synth, RealVocabUsesRealSpecialIds) {
  auto plan = mere::synth_plan(opts("qwen3.5-0.8b", "unused"));
  EXPECT_EQ(plan.config.at("text_config").at("eos_token_id").as_int(), 248044);
  EXPECT_EQ(plan.config.at("text_config").at("vocab_size").as_int(), 248320);
  EXPECT_EQ(plan.config.at("image_token_id").as_int(), 248056);
  EXPECT_TRUE(plan.config.at("tie_word_embeddings").as_bool());
  EXPECT_EQ(plan.generation_config.at("eos_token_id").at(0).as_int(), 248046);
  EXPECT_EQ(plan.tokenizer.at("added_tokens").at(5).at("id").as_int(), 248068);
  int64_t bytes = 0;
  for (const auto& t : plan.tensors) bytes += t.decl.nbytes();
  EXPECT_GT(bytes, int64_t{1400} << 20);  // ~0.77B params in bf16 incl. MTP
  EXPECT_LT(bytes, int64_t{1600} << 20);
  int64_t f32_extra = 0;  // A_log is f32: 2 more bytes per element than bf16
  for (const auto& t : plan.tensors)
    if (t.decl.dtype == DType::F32) f32_extra += t.decl.numel() * 2;
  EXPECT_EQ(plan.param_count * 2, bytes - f32_extra);
  auto l = mere::synth_tokenizer_layout(512);
  EXPECT_EQ(l.im_start, 257);
  EXPECT_THROW(mere::synth_tokenizer_layout(100), mere::Error);
  EXPECT_EQ(mere::byte_level_char(0), "Ā");
  EXPECT_EQ(mere::byte_level_char(10), "Ċ");
  EXPECT_EQ(mere::byte_level_char(173), "Ń");
}

// The tokenizer files load in Hugging Face's own tokenizers (Rust, via Node) and its Jinja, with the
// expected ids for both special-id layouts. Skipped where node or tests/npm/node_modules is missing.
TEST(Synth, TokenizerWorksInHuggingFaceTokenizers) {
  const fs::path npm = fs::path(MERE_SOURCE_DIR) / "tests" / "npm" / "node_modules";
  if (!fs::exists(npm / "@anush008" / "tokenizers") || !fs::exists(npm / "@huggingface" / "jinja") ||
      std::system("node --version > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "node or tests/npm/node_modules not available";
  fs::path dir = temp_dir("hf_tokenizer");
  fs::create_directories(dir);
  for (int64_t v : {512, 248320}) {
    auto l = mere::synth_tokenizer_layout(v);
    std::ofstream(dir / ("tok" + std::to_string(v) + ".json")) << mere::synth_tokenizer_json(l).dump();
    std::ofstream(dir / ("cfg" + std::to_string(v) + ".json")) << mere::synth_tokenizer_config_json(l).dump();
  }
  std::ofstream(dir / "check.js") << "const {Tokenizer} = require('" << (npm / "@anush008" / "tokenizers").string()
                                  << "');\nconst {Template} = require('" << (npm / "@huggingface" / "jinja").string()
                                  << "');\n" << R"JS(
const fs = require('fs');
(async () => {
  const out = {};
  for (const v of [512, 248320]) {
    const t = Tokenizer.fromFile(`${process.argv[2]}/tok${v}.json`);
    const cfg = JSON.parse(fs.readFileSync(`${process.argv[2]}/cfg${v}.json`));
    const text = new Template(cfg.chat_template).render(
        {messages: [{role: 'user', content: 'hé 1'}], add_generation_prompt: true});
    const ids = (await t.encode(text + '</think><tool_call><|endoftext|>')).getIds();
    out[v] = {text, ids: Array.from(ids), back: await t.decode(ids, false)};
  }
  console.log(JSON.stringify(out));
})();
)JS";
  std::string cmd = "node " + (dir / "check.js").string() + " " + dir.string() + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  ASSERT_EQ(pclose(p), 0) << out;
  Json j = Json::parse(out);
  const std::string text = "<|im_start|>user\nhé 1<|im_end|>\n<|im_start|>assistant\n<think>\n";
  auto ids_of = [&](const char* v) {
    std::vector<int64_t> ids;
    for (const auto& e : j.at(v).at("ids").as_array()) ids.push_back(e.as_int());
    return ids;
  };
  EXPECT_EQ(j.at("512").at("text").as_string(), text);
  EXPECT_EQ(j.at("512").at("back").as_string(), text + "</think><tool_call><|endoftext|>");
  // Bytes are their own ids ("é" is two UTF-8 bytes); specials are atomic.
  const std::vector<int64_t> body = {117, 115, 101, 114, 10, 104, 195, 169, 32, 49};
  std::vector<int64_t> small = {257};
  small.insert(small.end(), body.begin(), body.end());
  for (int64_t x : {258, 10, 257, 97, 115, 115, 105, 115, 116, 97, 110, 116, 10, 259, 10, 260, 261, 256}) small.push_back(x);
  EXPECT_EQ(ids_of("512"), small);
  std::vector<int64_t> real = {248045};
  real.insert(real.end(), body.begin(), body.end());
  for (int64_t x : {248046, 10, 248045, 97, 115, 115, 105, 115, 116, 97, 110, 116, 10, 248068, 10, 248069, 248058, 248044})
    real.push_back(x);
  EXPECT_EQ(ids_of("248320"), real);
  EXPECT_EQ(j.at("248320").at("back").as_string(), text + "</think><tool_call><|endoftext|>");
  fs::remove_all(dir);
}

TEST(Synth, DeterministicBySeedAcrossThreadCounts) {
  fs::path a = temp_dir("det_a"), b = temp_dir("det_b"), c = temp_dir("det_c");
  auto oa = opts("tiny-dense", a, 4, 11);
  oa.threads = 1;
  auto ob = opts("tiny-dense", b, 4, 11);
  ob.threads = 3;
  auto oc = opts("tiny-dense", c, 4, 12);
  mere::write_synth_checkpoint(oa);
  mere::write_synth_checkpoint(ob);
  mere::write_synth_checkpoint(oc);
  EXPECT_EQ(slurp(a / "model.safetensors"), slurp(b / "model.safetensors"));
  EXPECT_NE(slurp(a / "model.safetensors"), slurp(c / "model.safetensors"));
  EXPECT_EQ(slurp(a / "config.json"), slurp(c / "config.json"));
  fs::remove_all(a);
  fs::remove_all(b);
  fs::remove_all(c);
}

TEST(Synth, ShardsWithIndex) {
  fs::path dir = temp_dir("shards");
  auto o = opts("tiny-moe", dir, 4);
  o.shard_bytes = 256 << 10;
  auto r = mere::write_synth_checkpoint(o);
  Json idx = Json::parse_file((dir / "model.safetensors.index.json").string());
  auto files = read_dir(dir);
  EXPECT_EQ(idx.at("weight_map").size(), files.size());
  int64_t total = 0;
  std::map<std::string, int> per_file;
  for (const auto& [name, t] : files) total += static_cast<int64_t>(t.bytes.size());
  for (const auto& [name, f] : idx.at("weight_map").as_object()) {
    EXPECT_TRUE(files.count(name)) << name;
    EXPECT_TRUE(fs::exists(dir / f.as_string())) << f.as_string();
    per_file[f.as_string()]++;
  }
  EXPECT_EQ(idx.at("metadata").at("total_size").as_int(), total);
  EXPECT_EQ(total, r.tensor_bytes);
  EXPECT_GT(per_file.size(), 2u);
  EXPECT_FALSE(fs::exists(dir / "model.safetensors"));
  std::string first = per_file.begin()->first;
  EXPECT_NE(first.find("-of-0000"), std::string::npos);
  for (const auto& e : fs::directory_iterator(dir)) EXPECT_NE(e.path().extension(), ".tmp");

  // Same seed, one file: identical tensors.
  fs::path one = temp_dir("shards_one");
  auto o1 = opts("tiny-moe", one, 4);
  o1.shard_bytes = 0;
  mere::write_synth_checkpoint(o1);
  auto single = read_dir(one);
  ASSERT_EQ(single.size(), files.size());
  for (const auto& [name, t] : files) EXPECT_EQ(single[name].bytes, t.bytes) << name;
  fs::remove_all(dir);
  fs::remove_all(one);
}

TEST(Synth, RefusesToOverwriteUnlessForced) {
  fs::path dir = temp_dir("overwrite");
  auto o = opts("tiny-dense", dir);
  mere::write_synth_checkpoint(o);
  std::ofstream(dir / "notes.txt") << "keep me";
  try {
    mere::write_synth_checkpoint(o);
    FAIL() << "overwrote an existing checkpoint";
  } catch (const mere::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--force"), std::string::npos) << e.what();
  }
  // --force replaces a sharded checkpoint by a single file without stale shards.
  o.force = true;
  o.shard_bytes = 128 << 10;
  mere::write_synth_checkpoint(o);
  EXPECT_FALSE(fs::exists(dir / "model.safetensors"));
  o.shard_bytes = 0;
  mere::write_synth_checkpoint(o);
  EXPECT_TRUE(fs::exists(dir / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "model.safetensors.index.json"));
  int shards = 0;
  for (const auto& e : fs::directory_iterator(dir)) shards += e.path().filename().string().find("-of-") != std::string::npos;
  EXPECT_EQ(shards, 0);
  EXPECT_TRUE(fs::exists(dir / "notes.txt"));
  // An empty existing directory is fine; a file is not.
  fs::path empty = temp_dir("overwrite_empty");
  fs::create_directories(empty);
  EXPECT_NO_THROW(mere::write_synth_checkpoint(opts("tiny-dense", empty)));
  EXPECT_THROW(mere::write_synth_checkpoint(opts("tiny-dense", dir / "notes.txt")), mere::Error);
  fs::remove_all(dir);
  fs::remove_all(empty);
}

TEST(Synth, MlxHoldsTheQuantisedHfValues) {
  fs::path hf = temp_dir("same_hf"), mlx = temp_dir("same_mlx");
  auto oh = opts("tiny-moe", hf, 0, 5);
  auto om = opts("tiny-moe", mlx, 4, 5);
  mere::write_synth_checkpoint(oh);
  mere::write_synth_checkpoint(om);
  auto H = read_dir(hf), M = read_dir(mlx);
  auto dequant = [&](const std::string& m, int64_t rows, int64_t cols, int bits) {
    const Tensor& w = M[m + ".weight"];
    std::vector<uint32_t> packed(w.bytes.size() / 4);
    std::memcpy(packed.data(), w.bytes.data(), w.bytes.size());
    std::vector<uint16_t> s(M[m + ".scales"].bytes.size() / 2), b(s.size());
    std::memcpy(s.data(), M[m + ".scales"].bytes.data(), s.size() * 2);
    std::memcpy(b.data(), M[m + ".biases"].bytes.data(), b.size() * 2);
    std::vector<float> out(static_cast<size_t>(rows * cols));
    mere::quant::dequantize_rows(packed.data(), s.data(), b.data(), rows, cols, bits, 64, out.data());
    return out;
  };
  auto close = [](const std::vector<float>& a, const std::vector<float>& b, float tol) {
    ASSERT_EQ(a.size(), b.size());
    float worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
    EXPECT_LE(worst, tol);
  };
  // Plain linear: |error| <= one quantisation step of U(±sqrt(3/128)) over 15 levels.
  close(dequant("language_model.model.layers.3.self_attn.q_proj", 512, 128, 4),
        as_f32(H["model.language_model.layers.3.self_attn.q_proj.weight"]), 0.03f);
  // Router at 8 bits.
  close(dequant("language_model.model.layers.0.mlp.gate", 8, 128, 8),
        as_f32(H["model.language_model.layers.0.mlp.gate.weight"]), 0.004f);
  // Fused HF gate_up [E, 2Ie, H] == MLX gate_proj / up_proj [E, Ie, H] stacked per expert.
  auto gu = as_f32(H["model.language_model.layers.1.mlp.experts.gate_up_proj"]);
  auto up = dequant("language_model.model.layers.1.mlp.switch_mlp.up_proj", 8 * 64, 128, 4);
  std::vector<float> up_ref;
  for (int e = 0; e < 8; ++e)
    up_ref.insert(up_ref.end(), gu.begin() + (e * 128 + 64) * 128, gu.begin() + (e * 128 + 128) * 128);
  close(up, up_ref, 0.03f);
  // HF per-expert MTP experts == MLX stacked MTP experts.
  auto mg = dequant("language_model.mtp.layers.0.mlp.switch_mlp.gate_proj", 8 * 64, 128, 4);
  auto e5 = as_f32(H["mtp.layers.0.mlp.experts.5.gate_proj.weight"]);
  close(std::vector<float>(mg.begin() + 5 * 64 * 128, mg.begin() + 6 * 64 * 128), e5, 0.03f);
  // Zero-centred norms carry the +1 in MLX files (also in the MTP block); the GDN norm does not.
  auto hn = as_f32(H["model.language_model.layers.0.input_layernorm.weight"]);
  auto mn = as_f32(M["language_model.model.layers.0.input_layernorm.weight"]);
  for (size_t i = 0; i < hn.size(); ++i) EXPECT_NEAR(mn[i], 1.0f + hn[i], 0.008f);
  auto hm = as_f32(H["mtp.norm.weight"]);
  auto mm = as_f32(M["language_model.mtp.norm.weight"]);
  for (size_t i = 0; i < hm.size(); ++i) EXPECT_NEAR(mm[i], 1.0f + hm[i], 0.008f);
  EXPECT_EQ(H["model.language_model.layers.0.linear_attn.norm.weight"].bytes,
            M["language_model.model.layers.0.linear_attn.norm.weight"].bytes);
  EXPECT_EQ(H["model.language_model.layers.0.linear_attn.conv1d.weight"].bytes,
            M["language_model.model.layers.0.linear_attn.conv1d.weight"].bytes);
  EXPECT_EQ(H["model.language_model.layers.0.linear_attn.A_log"].bytes,
            M["language_model.model.layers.0.linear_attn.A_log"].bytes);
  fs::remove_all(hf);
  fs::remove_all(mlx);
}

TEST(Synth, CliWritesJsonSummary) {
  fs::path dir = temp_dir("cli");
  std::string cmd = std::string(MERE_BINARY) + " model synth --geometry tiny-moe --bits 4 --seed 3 --threads 2 --out " +
                    dir.string() + " --json 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  int rc = pclose(p);
  ASSERT_EQ(rc, 0) << out;
  Json j = Json::parse(out);
  EXPECT_EQ(j.at("layout").as_string(), "mlx");
  EXPECT_EQ(j.at("bits").as_int(), 4);
  EXPECT_GT(j.at("parameters").as_int(), 0);
  EXPECT_GE(j.at("files").size(), 5u);
  EXPECT_TRUE(fs::exists(dir / "config.json"));
  // A second run without --force fails with a clear message and a non-zero exit.
  p = popen(cmd.c_str(), "r");
  out.clear();
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  EXPECT_NE(pclose(p), 0);
  EXPECT_NE(out.find("--force"), std::string::npos) << out;
  std::string bad = std::string(MERE_BINARY) + " model synth --geometry nope --out " + dir.string() + " 2>&1";
  p = popen(bad.c_str(), "r");
  out.clear();
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  EXPECT_NE(pclose(p), 0);
  EXPECT_NE(out.find("tiny-dense"), std::string::npos) << out;
  fs::remove_all(dir);
}
