// `mere.run text tokenize`: encodes text with a model directory's tokenizer.json and prints the ids
// as JSON (one array per input; with --jsonl one line per input line). --roundtrip prints the decoded
// ids instead (the reference test checks decode(encode(s)) == NFC(s)); --time reports encode speed.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/command.h"
#include "core/error.h"
#include "core/json.h"
#include "text/tokenizer.h"

namespace mere::cli {
namespace {

std::string read_file(const std::string& path) {
  if (path == "-") {
    std::stringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("text tokenize", cat("cannot open ", path, ": expected a readable file"));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Output {
  bool json = false, roundtrip = false;
  const Tokenizer* tok = nullptr;

  std::string render(const std::vector<int32_t>& ids, const EncodeInfo& info) const {
    std::string out;
    if (roundtrip && !json) {
      json_escape(out, tok->decode(ids));
      return out;
    }
    std::string arr = "[";
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) arr += ',';
      arr += std::to_string(ids[i]);
    }
    arr += ']';
    if (!json) return arr;
    out = "{\"ids\":" + arr + ",\"tokens\":[";
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) out += ',';
      json_escape(out, tok->id_to_token(ids[i]).value_or(""));
    }
    out += "],\"count\":" + std::to_string(ids.size()) + ",\"invalid_utf8\":" + std::to_string(info.invalid_utf8);
    if (roundtrip) {
      out += ",\"decoded\":";
      json_escape(out, tok->decode(ids));
    }
    out += '}';
    return out;
  }
};

void warn_invalid(const EncodeInfo& info, const std::string& where) {
  if (info.invalid_utf8)
    std::fprintf(stderr, "warning: %s: %zu ill-formed UTF-8 sequence(s) replaced with U+FFFD\n", where.c_str(),
                 info.invalid_utf8);
}

int run_tokenize(const Args& a) {
  int sources = a.has("text") + a.has("text-file") + a.has("jsonl");
  if (sources != 1)
    fail("text tokenize", cat("input: expected exactly one of --text, --text-file, --jsonl, got ", sources));
  Tokenizer tok = Tokenizer::from_dir(a.require("model"));
  EncodeOptions opt;
  opt.add_special = !a.flag("no-special");
  opt.parse_special = !a.flag("no-parse-special");
  Output out;
  out.json = a.flag("json");
  out.roundtrip = a.flag("roundtrip");
  out.tok = &tok;
  int64_t repeat = a.get_int("repeat", 1);
  if (repeat < 1) fail("text tokenize", cat("--repeat: expected >= 1, got ", repeat));

  std::vector<std::string> inputs;
  if (a.has("text")) {
    inputs.push_back(a.get("text"));
  } else if (a.has("text-file")) {
    inputs.push_back(read_file(a.get("text-file")));
  } else {
    std::string all = read_file(a.get("jsonl"));
    size_t line_no = 0, pos = 0;
    while (pos < all.size()) {
      size_t nl = all.find('\n', pos);
      if (nl == std::string::npos) nl = all.size();
      std::string_view line(all.data() + pos, nl - pos);
      pos = nl + 1;
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.empty()) continue;
      Json j = Json::parse(line, cat(a.get("jsonl"), ":", line_no));
      if (!j.is_string())
        fail("text tokenize", cat(a.get("jsonl"), ":", line_no, ": expected a JSON string, got ", Json::type_name(j.type())));
      inputs.push_back(j.as_string());
    }
  }

  double best = 1e300;
  size_t bytes = 0, tokens = 0;
  std::vector<std::vector<int32_t>> results(inputs.size());
  std::vector<EncodeInfo> infos(inputs.size());
  for (int64_t r = 0; r < repeat; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < inputs.size(); ++i) results[i] = tok.encode(inputs[i], opt, &infos[i]);
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, dt);
  }
  std::string text;
  for (size_t i = 0; i < inputs.size(); ++i) {
    bytes += inputs[i].size();
    tokens += results[i].size();
    warn_invalid(infos[i], inputs.size() == 1 ? "input" : cat("input line ", i + 1));
    text += out.render(results[i], infos[i]);
    text += '\n';
  }
  if (!a.flag("quiet")) std::fwrite(text.data(), 1, text.size(), stdout);
  if (a.flag("time"))
    std::fprintf(stderr, "{\"bytes\":%zu,\"tokens\":%zu,\"inputs\":%zu,\"best_seconds\":%.6f,\"mb_per_s\":%.3f}\n",
                 bytes, tokens, inputs.size(), best, best > 0 ? bytes / best / 1e6 : 0.0);
  return 0;
}

MERE_COMMAND(Command{
    "text tokenize",
    "encode text into token ids with the model's tokenizer.json",
    "Prints a JSON array of ids per input. With --jsonl F each line of F (\"-\": stdin) is a JSON\n"
    "string and each output line holds its ids. Ill-formed UTF-8 is replaced with U+FFFD (warning\n"
    "on stderr).",
    {
        {"model", "DIR", "model directory holding tokenizer.json", ""},
        {"text", "S", "text to encode", ""},
        {"text-file", "F", "encode the whole file F (\"-\": stdin)", ""},
        {"jsonl", "F", "encode each line of F, a JSON string (\"-\": stdin)", ""},
        {"no-special", "", "do not add the post-processor's special tokens (HF add_special_tokens=False)", ""},
        {"no-parse-special", "", "treat special tokens written in the text as plain text", ""},
        {"json", "", "print {ids, tokens, count, invalid_utf8} objects instead of bare arrays", ""},
        {"roundtrip", "", "print decode(encode(text)) as a JSON string (with --json: a \"decoded\" field)", ""},
        {"time", "", "report encode time and MB/s (JSON) on stderr", ""},
        {"repeat", "N", "encode N times and report the best time (with --time)", "1"},
        {"quiet", "", "print nothing on stdout (for --time)", ""},
    },
    run_tokenize,
});

}  // namespace
}  // namespace mere::cli
