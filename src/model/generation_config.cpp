// Loading generation_config.json / config.json sampling defaults and EOS ids, and the merge of
// built-in defaults < model file < request. JSON nulls read as absent; wrong types and out-of-range
// values are errors naming the file and field.
#include "model/generation_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <utility>

#include "core/error.h"
#include "core/json.h"

namespace mere {

namespace {

const Json* field(const Json& doc, std::string_view key) {
  const Json* v = doc.find(key);
  return v && !v->is_null() ? v : nullptr;
}

std::optional<double> get_number(const Json& doc, std::string_view key, const std::string& where) {
  const Json* v = field(doc, key);
  if (!v) return std::nullopt;
  MERE_CHECK(v->is_number(), where, key, ": expected a number, got ", Json::type_name(v->type()));
  return v->as_number();
}

std::optional<float> get_float(const Json& doc, std::string_view key, const std::string& where) {
  auto d = get_number(doc, key, where);
  if (!d) return std::nullopt;
  return static_cast<float>(*d);
}

std::optional<int64_t> get_integer(const Json& doc, std::string_view key, const std::string& where) {
  const Json* v = field(doc, key);
  if (!v) return std::nullopt;
  MERE_CHECK(v->is_number() && v->as_number() == std::floor(v->as_number()) &&
                 std::fabs(v->as_number()) <= 9.007199254740992e15,
             where, key,
             ": expected an integer, got ", v->is_number() ? v->dump() : Json::type_name(v->type()));
  return v->as_int();
}

TokenId token_id(const Json& v, std::string_view key, const std::string& where) {
  MERE_CHECK(v.is_number() && v.as_number() == std::floor(v.as_number()) && v.as_number() >= 0 &&
                 v.as_number() <= std::numeric_limits<TokenId>::max(),
             where, key, ": expected a token id (integer >= 0), got ", v.dump());
  return static_cast<TokenId>(v.as_int());
}

// eos_token_id: an id, a list of ids, or null.
void append_eos(const Json& doc, const std::string& where, std::vector<TokenId>& out) {
  const Json* v = field(doc, "eos_token_id");
  if (!v) return;
  if (v->is_array()) {
    for (const Json& e : v->as_array()) out.push_back(token_id(e, "eos_token_id[]", where));
    return;
  }
  MERE_CHECK(v->is_number(), where, "eos_token_id: expected an integer or a list of integers, got ",
             Json::type_name(v->type()));
  out.push_back(token_id(*v, "eos_token_id", where));
}

}  // namespace

GenerationConfig GenerationConfig::from_json(const Json* gen, const Json* config,
                                             const std::string& gen_where,
                                             const std::string& config_where) {
  GenerationConfig g;
  if (gen) {
    MERE_CHECK(gen->is_object(), gen_where, "expected a JSON object, got ", Json::type_name(gen->type()));
    const std::string& w = gen_where;
    append_eos(*gen, w, g.eos_token_ids);
    if (const Json* v = field(*gen, "do_sample")) {
      MERE_CHECK(v->is_bool(), w, "do_sample: expected true or false, got ", v->dump());
      g.do_sample = v->as_bool();
    }
    g.temperature = get_float(*gen, "temperature", w);
    if (auto k = get_integer(*gen, "top_k", w)) {
      MERE_CHECK(*k >= -1 && *k <= std::numeric_limits<int>::max(), w,
                 "top_k: expected an integer >= 0 (0 or -1 disable), got ", *k);
      g.top_k = static_cast<int>(std::max<int64_t>(*k, 0));
    }
    g.top_p = get_float(*gen, "top_p", w);
    g.min_p = get_float(*gen, "min_p", w);
    g.repetition_penalty = get_float(*gen, "repetition_penalty", w);
    g.presence_penalty = get_float(*gen, "presence_penalty", w);
    g.frequency_penalty = get_float(*gen, "frequency_penalty", w);
    g.max_new_tokens = get_integer(*gen, "max_new_tokens", w);

    // Range-check the file's own values, so a bad file is reported as the file's fault.
    SamplingParams p;
    p.temperature = g.temperature.value_or(p.temperature);
    p.top_k = g.top_k.value_or(p.top_k);
    p.top_p = g.top_p.value_or(p.top_p);
    p.min_p = g.min_p.value_or(p.min_p);
    p.repetition_penalty = g.repetition_penalty.value_or(p.repetition_penalty);
    p.presence_penalty = g.presence_penalty.value_or(p.presence_penalty);
    p.frequency_penalty = g.frequency_penalty.value_or(p.frequency_penalty);
    if (g.max_new_tokens)
      MERE_CHECK(*g.max_new_tokens >= 1, w, "max_new_tokens: expected >= 1, got ", *g.max_new_tokens);
    p.validate(w);
  }
  if (config) {
    MERE_CHECK(config->is_object(), config_where, "expected a JSON object, got ",
               Json::type_name(config->type()));
    append_eos(*config, config_where, g.eos_token_ids);
    if (const Json* text = field(*config, "text_config")) {
      MERE_CHECK(text->is_object(), config_where, "text_config: expected an object, got ",
                 Json::type_name(text->type()));
      append_eos(*text, config_where + " text_config", g.eos_token_ids);
    }
  }
  // Unique, keeping first-seen order (generation_config.json's first).
  std::vector<TokenId> unique;
  for (TokenId id : g.eos_token_ids)
    if (std::find(unique.begin(), unique.end(), id) == unique.end()) unique.push_back(id);
  g.eos_token_ids = std::move(unique);
  return g;
}

GenerationConfig GenerationConfig::load(const std::string& model_dir) {
  namespace fs = std::filesystem;
  const fs::path dir(model_dir);
  auto read = [](const fs::path& p) -> std::optional<Json> {
    std::error_code ec;
    if (!fs::exists(p, ec)) return std::nullopt;
    return Json::parse_file(p.string());
  };
  const fs::path gen_path = dir / "generation_config.json";
  const fs::path config_path = dir / "config.json";
  const std::optional<Json> gen = read(gen_path);
  const std::optional<Json> config = read(config_path);
  return from_json(gen ? &*gen : nullptr, config ? &*config : nullptr, gen_path.string(),
                   config_path.string());
}

SamplingParams GenerationConfig::resolve(const SamplingOverrides& r) const {
  SamplingParams p;  // built-in defaults
  if (do_sample == false) p.temperature = 0.0f;
  else if (temperature) p.temperature = *temperature;
  if (top_k) p.top_k = *top_k;
  if (top_p) p.top_p = *top_p;
  if (min_p) p.min_p = *min_p;
  if (repetition_penalty) p.repetition_penalty = *repetition_penalty;
  if (presence_penalty) p.presence_penalty = *presence_penalty;
  if (frequency_penalty) p.frequency_penalty = *frequency_penalty;
  if (max_new_tokens) p.max_tokens = *max_new_tokens;

  if (r.temperature) p.temperature = *r.temperature;
  if (r.top_k) p.top_k = *r.top_k;
  if (r.top_p) p.top_p = *r.top_p;
  if (r.min_p) p.min_p = *r.min_p;
  if (r.repetition_penalty) p.repetition_penalty = *r.repetition_penalty;
  if (r.presence_penalty) p.presence_penalty = *r.presence_penalty;
  if (r.frequency_penalty) p.frequency_penalty = *r.frequency_penalty;
  if (r.seed) p.seed = *r.seed;
  if (r.max_tokens) p.max_tokens = *r.max_tokens;
  p.stop = r.stop;
  p.stop_token_ids = r.stop_token_ids;
  p.ignore_eos = r.ignore_eos;
  p.validate("request");
  return p;
}

}  // namespace mere
