// Test helper: a random-weight tiny checkpoint written once per process by `model synth`'s library
// entry point (f32, so comparisons are not blurred by rounding), loaded through the real loader.
#pragma once
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "model/geometry.h"
#include "model/qwen35.h"
#include "model/synth.h"

namespace mere::test {

inline std::string tiny_model_dir(const std::string& preset, mere::DType dtype = mere::DType::F32, int bits = 0) {
  namespace fs = std::filesystem;
  const std::string dir = (fs::temp_directory_path() /
                           ("mere_tiny_" + preset + "_" + dtype_name(dtype) + "_q" + std::to_string(bits) + "_" +
                            std::to_string(::getpid())))
                              .string();
  if (!fs::exists(fs::path(dir) / "config.json")) {
    SynthOptions o;
    o.geometry = geometry_preset(preset);
    o.dtype = dtype;
    o.bits = bits;
    o.seed = 42;
    o.out_dir = dir;
    o.force = true;
    o.threads = 1;
    write_synth_checkpoint(o);
  }
  return dir;
}

inline const Qwen35Model& tiny_model(const std::string& preset, mere::DType dtype = mere::DType::F32, int bits = 0) {
  static std::map<std::string, std::unique_ptr<Qwen35Model>> cache;
  const std::string key = preset + dtype_name(dtype) + std::to_string(bits);
  auto& m = cache[key];
  if (!m) m = Qwen35Model::load(tiny_model_dir(preset, dtype, bits));
  return *m;
}

}  // namespace mere::test
