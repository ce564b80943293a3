// MERERUN_Q35_* controls (mtp.md §5) and MTP eligibility: managed defaults for the dense 27B
// (block 8) and the 35B-A3B MoE (block 4) geometries, and for models that opt in through their
// generation_config.json ("mererun_mtp": {"enabled": true, "block_size": N}); off elsewhere.
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "core/json.h"
#include "runtime/generator.h"
#include "runtime/mtp_policy.h"

namespace mere {
namespace {

std::optional<bool> env_bool(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  std::string s(v);
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (s == "0" || s == "false" || s == "no" || s == "off") return false;
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  return std::nullopt;  // unrecognised: as if unset
}

// 0: not a managed geometry; else its block size.
int managed_block_size(const ModelConfig& c) {
  if (!c.is_moe && c.hidden_size == 5120 && c.num_layers == 64 && c.num_heads == 24 && c.num_kv_heads == 4 &&
      c.lin_v_heads == 48 && c.intermediate_size == 17408)
    return 8;
  if (c.is_moe && c.hidden_size == 2048 && c.num_layers == 40 && c.num_experts == 256 && c.experts_per_tok == 8 &&
      c.moe_intermediate_size == 512)
    return 4;
  return 0;
}

// The bundled models opt in through generation_config.json; returns their block size or 0.
int opted_in_block_size(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path p = fs::path(dir) / "generation_config.json";
  if (!fs::exists(p)) return 0;
  try {
    Json j = Json::parse_file(p.string());
    const Json* m = j.find("mererun_mtp");
    if (!m || !m->is_object() || !m->get_bool("enabled", false)) return 0;
    return static_cast<int>(m->get_int("block_size", 4));
  } catch (const Error&) {
    return 0;  // GenerationConfig::load reports malformed files
  }
}

}  // namespace

SpeculationOptions SpeculationOptions::from_env() {
  SpeculationOptions o;
  if (auto v = env_bool("MERERUN_Q35_MTP_SPECULATION")) o.mode = *v ? Mode::Forced : Mode::Off;
  if (const char* b = std::getenv("MERERUN_Q35_MTP_BLOCK_SIZE"); b && *b) {
    char* end = nullptr;
    const long v = std::strtol(b, &end, 10);
    if (end != b && *end == '\0' && v >= 2) o.block_size = static_cast<int>(std::min<long>(v, 64));
  }
  const char* ratio = std::getenv("MERERUN_Q35_MTP_HEAD_COST_RATIO");
  o.cost_ratio = parse_cost_ratio(ratio);
  if (const char* cm = std::getenv("MERERUN_Q35_MTP_COST_MODEL"); cm && *cm) {
    if (!std::strcmp(cm, "measured")) o.measured_costs = true;
    else if (!std::strcmp(cm, "fixed")) o.measured_costs = false;
  } else if (ratio && *ratio) {
    o.measured_costs = false;  // an explicit ratio selects the seed's fixed-ratio rule
  }
  o.pipelined_fallback = env_bool("MERERUN_Q35_MTP_PIPELINED_FALLBACK");
  o.profile = env_bool("MERERUN_Q35_MTP_PROFILE").value_or(false);
  o.scoped_compile = env_bool("MERERUN_Q35_SCOPED_COMPILE");
  o.async_decode_blocks = env_bool("MERERUN_Q35_ASYNC_DECODE_BLOCKS");
  return o;
}

ResolvedSpeculation resolve_speculation(const SpeculationOptions& opt, const Qwen35Model& model,
                                        const SamplingParams& params) {
  ResolvedSpeculation r;
  const int managed = managed_block_size(model.config());
  const int opted = managed ? managed : opted_in_block_size(model.dir());
  r.block_size = opt.block_size ? opt.block_size : (opted ? opted : 4);
  r.block_size = std::min(r.block_size, 9);  // the widest verification the backends guarantee (mtp.md §6)
  r.cost_ratio = opt.cost_ratio;
  r.measured_costs = opt.measured_costs.value_or(true);
  r.pipelined_fallback = opt.pipelined_fallback.value_or(opted != 0);
  // the pipelined decoder chains the device's argmax: greedy requests whose tokens need nothing else
  r.async_decode = opt.async_decode_blocks.value_or(managed != 0) && params.greedy() && !params.has_penalties();
  r.scoped_graphs = opt.scoped_compile.value_or(true);
  if (opt.mode == SpeculationOptions::Mode::Off) {
    r.reason = "speculation off";
    return r;
  }
  if (!model.has_mtp()) {
    r.reason = "the checkpoint has no MTP weights";
    return r;
  }
  if (opt.mode == SpeculationOptions::Mode::Auto && !opted) {
    r.reason = "not a managed model (opt in with MERERUN_Q35_MTP_SPECULATION=1)";
    return r;
  }
  if (params.has_penalties()) {
    r.reason = "sampling penalties are not eligible for MTP";
    return r;
  }
  r.enabled = true;
  return r;
}

}  // namespace mere
