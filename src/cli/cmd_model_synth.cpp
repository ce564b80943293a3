// `mere.run model synth`: writes a random-weight Qwen3.5 checkpoint of a preset or JSON geometry,
// in the Hugging Face layout (bf16/f16/f32) or the mlx-community affine layout (--bits 4|8), with
// tokenizer files so text commands run on it. See docs/synth.md.
#include <cstdio>
#include <string>

#include "cli/command.h"
#include "core/error.h"
#include "model/geometry.h"
#include "model/synth.h"

namespace mere::cli {
namespace {

DType parse_weight_dtype(const std::string& s) {
  if (s == "bf16" || s == "bfloat16") return DType::BF16;
  if (s == "f16" || s == "fp16" || s == "float16") return DType::F16;
  if (s == "f32" || s == "fp32" || s == "float32") return DType::F32;
  fail("model synth", cat("--dtype: expected bf16, f16 or f32, got \"", s, "\""));
}

std::string preset_list() {
  std::string s;
  for (const auto& n : geometry_preset_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

int run_synth(const Args& a) {
  SynthOptions o;
  o.geometry = load_geometry(a.require("geometry"));
  o.dtype = parse_weight_dtype(a.get("dtype", "bf16"));
  o.bits = static_cast<int>(a.get_int("bits", 0));
  o.group_size = static_cast<int>(a.get_int("group-size", 64));
  MERE_CHECK(a.get_int("seed", 0) >= 0, "model synth", "--seed: expected >= 0, got ", a.get_int("seed", 0));
  o.seed = static_cast<uint64_t>(a.get_int("seed", 0));
  o.mtp = !a.flag("no-mtp");
  int64_t mb = a.get_int("shard-size-mb", 4096);
  MERE_CHECK(mb >= 0, "model synth", "--shard-size-mb: expected >= 0 (0: one file), got ", mb);
  o.shard_bytes = mb << 20;
  int64_t threads = a.get_int("threads", 0);
  MERE_CHECK(threads >= 0 && threads <= 1024, "model synth", "--threads: expected 0..1024, got ", threads);
  o.threads = static_cast<int>(threads);
  o.out_dir = a.require("out");
  o.force = a.flag("force");
  const bool json = a.flag("json");
  o.progress = !a.flag("quiet");

  SynthResult r = write_synth_checkpoint(o);
  if (json) {
    Json s = r.summary();
    s["geometry"] = o.geometry.name;
    s["layout"] = o.bits ? "mlx" : "hf";
    s["dtype"] = a.get("dtype", "bf16");
    s["bits"] = o.bits;
    if (o.bits) s["group_size"] = o.group_size;
    s["seed"] = static_cast<int64_t>(o.seed);
    s["mtp"] = o.mtp && o.geometry.mtp_num_hidden_layers > 0;
    std::printf("%s\n", s.dump().c_str());
  } else {
    std::printf("wrote %s: %zu files, %.3f GB, %lld tensors, %.3f B parameters in %.1f s (%.0f MB/s)\n",
                r.out_dir.c_str(), r.files.size(), r.bytes / 1e9, static_cast<long long>(r.tensor_count),
                r.param_count / 1e9, r.seconds, r.seconds > 0 ? r.bytes / 1e6 / r.seconds : 0.0);
  }
  return 0;
}

MERE_COMMAND(Command{
    "model synth",
    "write a random-weight Qwen3.5 checkpoint (real HF or MLX 4/8-bit layout) of any geometry",
    "Presets: " + preset_list() +
        ".\n--geometry FILE reads a JSON text_config (or a whole config.json). Values are deterministic in "
        "--seed for any --threads.\nWithout --bits: Hugging Face safetensors (model.language_model.*, lm_head, "
        "mtp.*).\nWith --bits 4|8: the mlx-community affine layout (language_model.model.*, norms +1 folded, "
        "router gates at 8 bits, MTP kept as language_model.mtp.*).",
    {
        {"geometry", "NAME|FILE", "preset name or JSON text_config file (required)", ""},
        {"dtype", "bf16|f16|f32", "weight dtype (MLX: scales/biases and unquantised tensors)", "bf16"},
        {"bits", "4|8", "write the MLX affine-quantised layout with this many bits", ""},
        {"group-size", "N", "MLX quantisation group size (32, 64, 128)", "64"},
        {"seed", "N", "random seed", "0"},
        {"out", "DIR", "output directory (required; must be new or empty unless --force)", ""},
        {"force", "", "replace the checkpoint files in an existing directory", ""},
        {"no-mtp", "", "leave out the mtp.* weights", ""},
        {"shard-size-mb", "N", "max tensor data per shard in MiB; 0 writes one model.safetensors", "4096"},
        {"threads", "N", "generator threads (0: all cores)", "0"},
        {"json", "", "print a JSON summary (files, bytes, parameter count) on stdout", ""},
        {"quiet", "", "no progress on stderr", ""},
    },
    run_synth,
});

}  // namespace
}  // namespace mere::cli
