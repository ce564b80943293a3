// `mere.run model info`: geometry, layer kinds, dtypes, parameter count and memory estimate.
#include <cstdio>
#include <map>

#include "cli/command.h"
#include "core/error.h"
#include "core/json.h"
#include "model/model_stats.h"
#include "model/qwen35.h"

namespace mere::cli {
namespace {

int run_model_info(const Args& a) {
  auto model = Qwen35Model::load(a.require("model"));
  const ModelConfig& c = model->config();
  const ModelStats s = compute_model_stats(c, model->weights());
  std::map<std::string, int64_t> dtypes;
  for (const auto& [name, t] : model->store().all()) dtypes[dtype_name(t.dtype)] += 1;
  std::string kinds;
  for (auto k : c.layer_types) kinds += k == LayerKind::Full ? 'F' : 'L';
  const int64_t ctx = a.get_int("context", 8192);

  Json j = Json::object();
  j["architecture"] = c.architecture;
  j["model_type"] = c.model_type;
  j["format"] = model->weights().format;
  j["moe"] = c.is_moe;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["layers"] = c.num_layers;
  j["layer_kinds"] = kinds;
  j["full_attention_layers"] = c.num_full_layers();
  j["attention"] = Json(Json::Object{{"heads", c.num_heads}, {"kv_heads", c.num_kv_heads}, {"head_dim", c.head_dim},
                                     {"rotary_dim", c.rotary_dim}, {"rope_theta", c.rope_theta}});
  j["gated_deltanet"] = Json(Json::Object{{"key_heads", c.lin_k_heads}, {"key_dim", c.lin_k_dim},
                                          {"value_heads", c.lin_v_heads}, {"value_dim", c.lin_v_dim},
                                          {"conv_kernel", c.conv_kernel}});
  if (c.is_moe)
    j["moe_config"] = Json(Json::Object{{"experts", c.num_experts}, {"top_k", c.experts_per_tok},
                                        {"expert_intermediate", c.moe_intermediate_size},
                                        {"shared_intermediate", c.shared_intermediate_size}});
  else
    j["intermediate_size"] = c.intermediate_size;
  j["tied_embeddings"] = c.tie_word_embeddings;
  j["mtp"] = model->has_mtp();
  if (c.quant.bits) j["quantization"] = Json(Json::Object{{"bits", c.quant.bits}, {"group_size", c.quant.group_size}});
  Json dt = Json::object();
  for (const auto& [k, n] : dtypes) dt[k] = n;
  j["tensor_dtypes"] = dt;
  j["params_main"] = s.params_main;
  j["params_active_per_token"] = s.params_active;
  j["params_mtp"] = s.params_mtp;
  j["weight_bytes"] = static_cast<int64_t>(s.weight_bytes_main + s.weight_bytes_mtp);
  j["kv_bytes_per_token"] = static_cast<int64_t>(s.kv_bytes_per_token);
  j["state_bytes_per_sequence"] = static_cast<int64_t>(s.state_bytes);
  j["context_for_estimate"] = ctx;
  j["memory_estimate_bytes"] =
      static_cast<int64_t>(s.weight_bytes_main + s.weight_bytes_mtp + s.state_bytes + s.kv_bytes_per_token * static_cast<size_t>(ctx));

  if (a.flag("json")) {
    std::printf("%s\n", j.dump(JsonDumpOptions{2}).c_str());
    return 0;
  }
  auto gib = [](double b) { return b / (1024.0 * 1024.0 * 1024.0); };
  std::printf("model        %s (%s, %s layout)\n", c.architecture.c_str(), c.model_type.c_str(), model->weights().format.c_str());
  std::printf("geometry     hidden %lld, vocab %lld, %lld layers [%s]\n", (long long)c.hidden_size, (long long)c.vocab_size,
              (long long)c.num_layers, kinds.c_str());
  std::printf("attention    %lld q heads / %lld kv heads x %lld, rotary %lld, theta %g\n", (long long)c.num_heads,
              (long long)c.num_kv_heads, (long long)c.head_dim, (long long)c.rotary_dim, c.rope_theta);
  std::printf("deltanet     %lld key heads x %lld, %lld value heads x %lld, conv %lld\n", (long long)c.lin_k_heads,
              (long long)c.lin_k_dim, (long long)c.lin_v_heads, (long long)c.lin_v_dim, (long long)c.conv_kernel);
  if (c.is_moe)
    std::printf("ffn          MoE %lld experts, top-%lld, expert %lld, shared %lld\n", (long long)c.num_experts,
                (long long)c.experts_per_tok, (long long)c.moe_intermediate_size, (long long)c.shared_intermediate_size);
  else
    std::printf("ffn          SwiGLU %lld\n", (long long)c.intermediate_size);
  std::printf("embeddings   %s, MTP head %s\n", c.tie_word_embeddings ? "tied" : "untied", model->has_mtp() ? "present" : "absent");
  std::string dts;
  for (const auto& [k, n] : dtypes) dts += k + " x" + std::to_string(n) + " ";
  std::printf("dtypes       %s%s\n", dts.c_str(), c.quant.bits ? cat("(affine ", c.quant.bits, "-bit g", c.quant.group_size, ")").c_str() : "");
  std::printf("parameters   %.3f M main (%.3f M active per token), %.3f M MTP\n", s.params_main / 1e6, s.params_active / 1e6,
              s.params_mtp / 1e6);
  std::printf("memory       weights %.3f GiB, state %.3f MiB/seq, KV %.1f KiB/token; at %lld tokens: %.3f GiB\n",
              gib(static_cast<double>(s.weight_bytes_main + s.weight_bytes_mtp)), s.state_bytes / 1048576.0,
              s.kv_bytes_per_token / 1024.0, (long long)ctx, gib(j.at("memory_estimate_bytes").as_number()));
  return 0;
}

MERE_COMMAND(Command{"model info", "show a checkpoint's geometry, layer kinds, dtypes, parameters and memory", "",
                     {{"model", "DIR", "model directory (config.json + safetensors)", ""},
                      {"context", "N", "context length for the memory estimate", "8192"},
                      {"json", "", "print JSON", ""}},
                     run_model_info});

}  // namespace
}  // namespace mere::cli
