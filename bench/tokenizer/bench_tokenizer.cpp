// Tokenizer speed benchmark (single thread): encodes a file as one string and line by line with
// mere::Tokenizer, cold (empty word cache, fresh tokenizer) and warm (best of N), and prints JSON.
// Built and run by bench/tokenizer/run.sh next to the same measurement of HF tokenizers.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "text/tokenizer.h"

using Clock = std::chrono::steady_clock;

static double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_tokenizer MODEL_DIR TEXT_FILE [REPEATS]\n");
    return 2;
  }
  try {
    int repeats = argc > 3 ? std::atoi(argv[3]) : 5;
    std::ifstream f(argv[2], std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string text = ss.str();
    std::vector<std::string> lines;
    for (size_t p = 0; p < text.size();) {
      size_t e = text.find('\n', p);
      e = e == std::string::npos ? text.size() : e + 1;
      lines.push_back(text.substr(p, e - p));
      p = e;
    }
    auto t0 = Clock::now();
    mere::Tokenizer tok = mere::Tokenizer::from_dir(argv[1]);
    double load = seconds_since(t0);
    auto whole = [&] {
      auto t = Clock::now();
      size_t n = tok.encode(text).size();
      return std::make_pair(seconds_since(t), n);
    };
    auto per_line = [&] {
      auto t = Clock::now();
      size_t n = 0;
      for (const auto& l : lines) n += tok.encode(l).size();
      return std::make_pair(seconds_since(t), n);
    };
    auto [cold_whole, tokens] = whole();
    double best_whole = cold_whole;
    for (int i = 0; i < repeats; ++i) best_whole = std::min(best_whole, whole().first);
    mere::Tokenizer fresh = mere::Tokenizer::from_dir(argv[1]);
    std::swap(tok, fresh);
    auto [cold_lines, tokens_lines] = per_line();
    double best_lines = cold_lines;
    for (int i = 0; i < repeats; ++i) best_lines = std::min(best_lines, per_line().first);
    double mb = text.size() / 1e6;
    std::printf(
        "{\"impl\":\"mere\",\"bytes\":%zu,\"lines\":%zu,\"tokens\":%zu,\"tokens_per_line_sum\":%zu,\"load_s\":%.3f,"
        "\"whole_cold_mb_s\":%.2f,\"whole_warm_mb_s\":%.2f,\"lines_cold_mb_s\":%.2f,\"lines_warm_mb_s\":%.2f}\n",
        text.size(), lines.size(), tokens, tokens_lines, load, mb / cold_whole, mb / best_whole, mb / cold_lines,
        mb / best_lines);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
