// Tokenizer speed benchmark (single thread): encodes a file as one string and line by line with
// mere::Tokenizer, cold (empty word cache, fresh tokenizer) and warm (best of N), and prints JSON.
// Built and run by bench/tokenizer/run.sh next to the same measurement of HF tokenizers.
#include <algorithm>
#include <chrono>
#include <ctime>
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

// Wall and process CPU seconds of one pass (CPU time is robust to other load on a shared machine).
struct Timing {
  double wall = 1e300, cpu = 1e300;
  size_t tokens = 0;
  void keep_best(const Timing& o) {
    wall = std::min(wall, o.wall);
    cpu = std::min(cpu, o.cpu);
  }
};

template <class F>
static Timing measure(F&& f) {
  auto t = Clock::now();
  std::clock_t c = std::clock();
  Timing r;
  r.tokens = f();
  r.cpu = double(std::clock() - c) / CLOCKS_PER_SEC;
  r.wall = seconds_since(t);
  return r;
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
    auto whole = [&] { return tok.encode(text).size(); };
    auto per_line = [&] {
      size_t n = 0;
      for (const auto& l : lines) n += tok.encode(l).size();
      return n;
    };
    Timing cold_whole = measure(whole), warm_whole;
    for (int i = 0; i < repeats; ++i) warm_whole.keep_best(measure(whole));
    mere::Tokenizer fresh = mere::Tokenizer::from_dir(argv[1]);
    std::swap(tok, fresh);
    Timing cold_lines = measure(per_line), warm_lines;
    for (int i = 0; i < repeats; ++i) warm_lines.keep_best(measure(per_line));
    double mb = text.size() / 1e6;
    std::printf(
        "{\"impl\":\"mere\",\"bytes\":%zu,\"lines\":%zu,\"tokens\":%zu,\"tokens_per_line_sum\":%zu,\"load_s\":%.3f,"
        "\"whole_cold_mb_s\":%.2f,\"whole_warm_mb_s\":%.2f,\"lines_cold_mb_s\":%.2f,\"lines_warm_mb_s\":%.2f,"
        "\"cpu_whole_cold_mb_s\":%.2f,\"cpu_whole_warm_mb_s\":%.2f,\"cpu_lines_cold_mb_s\":%.2f,"
        "\"cpu_lines_warm_mb_s\":%.2f}\n",
        text.size(), lines.size(), cold_whole.tokens, cold_lines.tokens, load, mb / cold_whole.wall,
        mb / warm_whole.wall, mb / cold_lines.wall, mb / warm_lines.wall, mb / cold_whole.cpu, mb / warm_whole.cpu,
        mb / cold_lines.cpu, mb / warm_lines.cpu);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
