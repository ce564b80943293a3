// `model quantize` (quant/convert.h): an HF bf16 checkpoint converted to the MLX affine layout equals
// synth's own MLX writer for the same seed tensor for tensor (names, shapes, packed codes, scales,
// biases, config overrides; norms are bf16(bf16(w) + 1), as mlx-lm folds them), keeps the MTP head
// with stacked experts, loads back through the real loader, and dequantises with the MLX formula
// scale * q + bias bitwise. Also: refusal to overwrite without force, side files, bad inputs.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "core/error.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "model/geometry.h"
#include "model/qwen35.h"
#include "model/synth.h"
#include "quant/affine.h"
#include "quant/convert.h"

namespace fs = std::filesystem;
using namespace mere;

namespace {

std::string temp_dir(const std::string& tag) {
  return (fs::temp_directory_path() / ("mere_quantize_" + tag + "_" + std::to_string(::getpid()))).string();
}

std::string synth(const std::string& preset, int bits, const std::string& tag) {
  SynthOptions o;
  o.geometry = geometry_preset(preset);
  o.dtype = DType::BF16;
  o.bits = bits;
  o.seed = 7;
  o.threads = 1;
  o.force = true;
  o.out_dir = temp_dir(tag);
  write_synth_checkpoint(o);
  return o.out_dir;
}

std::string quantize(const std::string& in, const std::string& tag, int bits = 4, int group = 64) {
  QuantizeOptions o;
  o.in_dir = in;
  o.out_dir = temp_dir(tag);
  o.bits = bits;
  o.group_size = group;
  o.force = true;
  o.threads = 2;
  quantize_checkpoint(o);
  return o.out_dir;
}

bool same_bytes(const TensorInfo& a, const TensorInfo& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.nbytes == b.nbytes && std::memcmp(a.data, b.data, a.nbytes) == 0;
}

bool ends(const std::string& n, const std::string& s) { return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0; }
bool is_norm(const std::string& n) {  // zero-centred norms (the converter folds +1 into them)
  if (n.find("linear_attn.norm") != std::string::npos) return false;
  return ends(n, "norm.weight") || ends(n, "pre_fc_norm_embedding.weight") || ends(n, "pre_fc_norm_hidden.weight");
}

void expect_matches_synth(const std::string& preset, int bits, int group) {
  const std::string tag = preset + "_" + std::to_string(bits) + "_" + std::to_string(group);
  const std::string hf = synth(preset, 0, tag + "_hf");
  const std::string out = quantize(hf, tag + "_out", bits, group);
  SynthOptions so;
  so.geometry = geometry_preset(preset);
  so.dtype = DType::BF16;
  so.bits = bits;
  so.group_size = group;
  so.seed = 7;
  so.threads = 1;
  so.force = true;
  so.out_dir = temp_dir(tag + "_mlx");
  write_synth_checkpoint(so);
  TensorStore a(out), b(so.out_dir), src(hf);
  ASSERT_EQ(a.all().size(), b.all().size());
  for (const auto& [name, tb] : b.all()) {
    const TensorInfo* ta = a.find(name);
    ASSERT_NE(ta, nullptr) << "missing " << name;
    if (!is_norm(name)) {
      EXPECT_TRUE(same_bytes(*ta, tb)) << name;
      continue;
    }
    // zero-centred norms: out = bf16(w + 1) of the stored bf16 w
    ASSERT_EQ(ta->shape, tb.shape) << name;
    std::string hf_name = name;
    if (hf_name.rfind("language_model.model.", 0) == 0) hf_name = "model.language_model." + hf_name.substr(21);
    else if (hf_name.rfind("language_model.mtp.", 0) == 0) hf_name = "mtp." + hf_name.substr(19);
    const TensorInfo& s = src.get(hf_name);
    const auto* o16 = reinterpret_cast<const uint16_t*>(ta->data);
    const auto* s16 = reinterpret_cast<const uint16_t*>(s.data);
    for (int64_t i = 0; i < ta->numel(); ++i) ASSERT_EQ(o16[i], f32_to_bf16(bf16_to_f32(s16[i]) + 1.0f)) << name << "[" << i << "]";
  }
  Json qa = Json::parse_file(out + "/config.json"), qb = Json::parse_file(so.out_dir + "/config.json");
  EXPECT_TRUE(qa.at("quantization") == qb.at("quantization")) << qa.at("quantization").dump();
  EXPECT_TRUE(qa.at("quantization_config") == qa.at("quantization"));
  EXPECT_TRUE(fs::exists(out + "/tokenizer.json"));
  EXPECT_TRUE(fs::exists(out + "/generation_config.json"));
  for (const auto& t : {hf, out, so.out_dir}) fs::remove_all(t);
}

}  // namespace

TEST(Quantize, DenseMatchesSynthMlxWriter) { expect_matches_synth("tiny-dense", 4, 64); }
TEST(Quantize, MoeMatchesSynthMlxWriter) { expect_matches_synth("tiny-moe", 4, 32); }
TEST(Quantize, Dense8BitGroup128MatchesSynthMlxWriter) { expect_matches_synth("tiny-dense-tied", 8, 128); }

TEST(Quantize, MoeKeepsMtpStackedAndRouterAt8Bits) {
  const std::string hf = synth("tiny-moe", 0, "moe_mtp_hf");
  const std::string out = quantize(hf, "moe_mtp_out");
  TensorStore s(out);
  const std::string L = "language_model.model.layers.0.mlp.";
  EXPECT_EQ(s.get(L + "switch_mlp.gate_proj.weight").shape, (std::vector<int64_t>{8, 64, 16}));
  EXPECT_EQ(s.get(L + "gate.weight").shape, (std::vector<int64_t>{8, 32}));  // 8-bit: 128 / 4 words
  EXPECT_EQ(s.get(L + "shared_expert_gate.scales").shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(s.get("language_model.mtp.layers.0.mlp.switch_mlp.down_proj.weight").shape, (std::vector<int64_t>{8, 128, 8}));
  EXPECT_EQ(s.get("language_model.model.layers.0.linear_attn.conv1d.weight").shape, (std::vector<int64_t>{256, 4, 1}));
  EXPECT_EQ(s.get("language_model.model.layers.0.linear_attn.A_log").dtype, DType::F32);
  EXPECT_EQ(s.get("language_model.model.layers.0.linear_attn.dt_bias").dtype, DType::BF16);
  for (const auto& [n, t] : s.all()) EXPECT_EQ(n.find("experts."), std::string::npos) << n;
  auto m = Qwen35Model::load(out, "ref");
  EXPECT_TRUE(m->has_mtp());
  EXPECT_EQ(m->weights().format, "mlx");
  EXPECT_EQ(m->weights().layers[0].moe.router.bits, 8);
  EXPECT_EQ(m->weights().layers[0].moe.experts[3].up.bits, 4);
  EXPECT_EQ(m->weights().mtp.layer.moe.experts[7].down.group, 64);
  fs::remove_all(hf);
  fs::remove_all(out);
}

// The loader's quantised matrices dequantise exactly as MLX: w = scale * q + bias (fp32), bitwise,
// checked against the raw packed tensors of the file.
TEST(Quantize, DequantisedWeightsEqualMlxFormulaBitwise) {
  const std::string hf = synth("tiny-dense", 0, "deq_hf");
  for (int bits : {4, 8}) {
    for (int group : {32, 64, 128}) {
      const std::string out = quantize(hf, "deq_out", bits, group);
      auto m = Qwen35Model::load(out, "cpu");
      TensorStore s(out);
      const TensorInfo& w = s.get("language_model.model.layers.1.mlp.down_proj.weight");
      const TensorInfo& sc = s.get("language_model.model.layers.1.mlp.down_proj.scales");
      const TensorInfo& bi = s.get("language_model.model.layers.1.mlp.down_proj.biases");
      const Matrix& M = m->weights().layers[1].mlp.down;
      ASSERT_EQ(M.bits, bits);
      ASSERT_EQ(M.group, group);
      const int64_t rows = M.rows, cols = M.cols, groups = cols / group;
      std::vector<float> got(static_cast<size_t>(cols)), ref(static_cast<size_t>(rows * cols));
      quant::dequantize_rows_as(reinterpret_cast<const uint32_t*>(w.data), sc.dtype, sc.data, bi.data, rows, cols, bits, group,
                                ref.data());
      const auto* packed = reinterpret_cast<const uint32_t*>(w.data);
      const auto* s16 = reinterpret_cast<const uint16_t*>(sc.data);
      const auto* b16 = reinterpret_cast<const uint16_t*>(bi.data);
      for (int64_t r = 0; r < rows; ++r) {
        M.row_f32(r, got.data());
        for (int64_t c = 0; c < cols; ++c) {
          const uint32_t q = quant::code_at(packed + r * cols * bits / 32, c, bits);
          const float f = bf16_to_f32(s16[r * groups + c / group]) * static_cast<float>(q) + bf16_to_f32(b16[r * groups + c / group]);
          ASSERT_EQ(std::memcmp(&got[static_cast<size_t>(c)], &f, 4), 0) << bits << "-bit g" << group << " [" << r << "," << c << "]";
          ASSERT_EQ(std::memcmp(&ref[static_cast<size_t>(r * cols + c)], &f, 4), 0);
        }
      }
      // quantised embedding: gathered rows dequantised with the same formula (fast backend)
      const Matrix& E = m->weights().embed;
      std::vector<float> row(static_cast<size_t>(E.cols)), emb(static_cast<size_t>(E.cols));
      const int32_t id = 77;
      m->backend().embed(E, &id, 1, emb.data());
      E.row_f32(id, row.data());
      EXPECT_EQ(std::memcmp(row.data(), emb.data(), row.size() * 4), 0);
      fs::remove_all(out);
    }
  }
  fs::remove_all(hf);
}

TEST(Quantize, RefusesOverwriteWithoutForceAndBadInputs) {
  const std::string hf = synth("tiny-dense", 0, "refuse_hf");
  const std::string out = quantize(hf, "refuse_out");
  QuantizeOptions o;
  o.in_dir = hf;
  o.out_dir = out;
  EXPECT_THROW(quantize_checkpoint(o), Error);  // exists, no force
  o.force = true;
  EXPECT_NO_THROW(quantize_checkpoint(o));
  QuantizeOptions again;  // an already-quantised input
  again.in_dir = out;
  again.out_dir = temp_dir("refuse_again");
  EXPECT_THROW(quantize_checkpoint(again), Error);
  QuantizeOptions same;  // output onto the input
  same.in_dir = hf;
  same.out_dir = hf;
  same.force = true;
  EXPECT_THROW(quantize_checkpoint(same), Error);
  QuantizeOptions bad = o;
  bad.bits = 5;
  EXPECT_THROW(quantize_checkpoint(bad), Error);
  bad = o;
  bad.group_size = 48;
  EXPECT_THROW(quantize_checkpoint(bad), Error);
  fs::remove_all(hf);
  fs::remove_all(out);
}

namespace {

// Copies a one-file checkpoint, letting `edit` drop (return false) or reshape tensors on the way.
// The replacement data is zeros of the new size (enough to reach the loader's checks).
std::string rewrite_checkpoint(const std::string& in, const std::string& tag,
                               const std::function<bool(TensorDecl&)>& edit) {
  const std::string out = temp_dir(tag);
  fs::remove_all(out);
  fs::create_directories(out);
  for (const auto& e : fs::directory_iterator(in))
    if (e.path().extension() != ".safetensors") fs::copy_file(e.path(), fs::path(out) / e.path().filename());
  SafetensorsFile src((fs::path(in) / "model.safetensors").string());
  std::vector<TensorDecl> decls;
  std::vector<const TensorInfo*> from;
  for (const TensorInfo& t : src.tensors()) {
    TensorDecl d{t.name, t.dtype, t.shape};
    if (!edit(d)) continue;
    decls.push_back(d);
    from.push_back(&t);
  }
  SafetensorsWriter w((fs::path(out) / "model.safetensors").string(), decls);
  for (size_t i = 0; i < decls.size(); ++i) {
    if (decls[i].shape == from[i]->shape) {
      w.write(from[i]->data, from[i]->nbytes);
    } else {
      const std::vector<uint8_t> zeros(static_cast<size_t>(decls[i].nbytes()), 0);
      w.write(zeros.data(), zeros.size());
    }
  }
  w.finish();
  return out;
}

std::string load_error(const std::string& dir) {
  try {
    Qwen35Model::load(dir, "ref");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// A 4-bit checkpoint with a missing biases tensor, or scales whose group count does not divide the
// input width, is refused at load with an error naming the tensor.
TEST(QuantizedLoad, BadCheckpointsFailNamingTheTensor) {
  const std::string q = synth("tiny-dense", 4, "badload_q");
  ASSERT_TRUE(fs::exists(fs::path(q) / "model.safetensors"));
  std::string victim;
  const std::string no_bias = rewrite_checkpoint(q, "badload_nobias", [&](TensorDecl& d) {
    if (victim.empty() && d.name.find("mlp.down_proj.biases") != std::string::npos) {
      victim = d.name;
      return false;
    }
    return true;
  });
  ASSERT_FALSE(victim.empty());
  std::string err = load_error(no_bias);  // names it without the checkpoint's prefix
  EXPECT_NE(err.find(victim.substr(victim.find("layers."))), std::string::npos) << err;
  EXPECT_NE(err.find("missing"), std::string::npos) << err;

  std::string scales;
  const std::string bad_groups = rewrite_checkpoint(q, "badload_groups", [&](TensorDecl& d) {
    const bool hit = d.name.find("mlp.down_proj.") != std::string::npos &&
                     (d.name.find(".scales") != std::string::npos || d.name.find(".biases") != std::string::npos);
    if (hit && d.shape.back() > 1) {
      d.shape.back() = d.shape.back() * 64 / 48 + 1;  // a group count that does not divide the width
      if (d.name.find(".scales") != std::string::npos) scales = d.name;
    }
    return true;
  });
  ASSERT_FALSE(scales.empty());
  err = load_error(bad_groups);
  EXPECT_NE(err.find("down_proj"), std::string::npos) << err;
  EXPECT_NE(err.find("group"), std::string::npos) << err;
  for (const auto& d : {q, no_bias, bad_groups}) fs::remove_all(d);
}
