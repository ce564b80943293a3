// `mere.run model quantize`: converts a bf16/f16/f32 Hugging Face Qwen3.5 checkpoint to the
// mlx-community affine 4/8-bit layout (readable by mlx-lm), keeping the MTP head. See
// quant/convert.h and docs/cpu-backend.md.
#include <cstdio>

#include "cli/command.h"
#include "core/error.h"
#include "quant/convert.h"

namespace mere::cli {
namespace {

int run_quantize(const Args& a) {
  QuantizeOptions o;
  o.in_dir = a.require("model");
  o.out_dir = a.require("out");
  o.bits = static_cast<int>(a.get_int("bits", 4));
  o.group_size = static_cast<int>(a.get_int("group-size", 64));
  o.force = a.flag("force");
  o.progress = !a.flag("quiet");
  const int64_t threads = a.get_int("threads", 0);
  MERE_CHECK(threads >= 0 && threads <= 1024, "model quantize", "--threads: expected 0..1024, got ", threads);
  o.threads = static_cast<int>(threads);
  const int64_t mb = a.get_int("shard-size-mb", 5120);
  MERE_CHECK(mb >= 0, "model quantize", "--shard-size-mb: expected >= 0 (0: one file), got ", mb);
  o.shard_bytes = mb << 20;
  QuantizeResult r = quantize_checkpoint(o);
  if (a.flag("json")) {
    std::printf("%s\n", r.summary().dump().c_str());
  } else {
    std::printf("wrote %s: %lld tensors (%lld modules quantised at %d-bit, group %d), %.3f GB -> %.3f GB in %.1f s\n",
                r.out_dir.c_str(), static_cast<long long>(r.tensors), static_cast<long long>(r.quantized_modules), o.bits,
                o.group_size, r.in_bytes / 1e9, r.out_bytes / 1e9, r.seconds);
  }
  return 0;
}

MERE_COMMAND(Command{
    "model quantize",
    "convert a bf16/f16/f32 Hugging Face checkpoint to the MLX affine 4/8-bit layout (MTP kept)",
    "Writes language_model.model.* / language_model.lm_head / language_model.mtp.* with norms +1 folded,\n"
    "conv1d as [C, K, 1], experts stacked as switch_mlp.*, the MoE router and shared_expert_gate at 8 bits\n"
    "(group 64), and norms, conv1d, A_log and dt_bias unquantised; copies tokenizer and generation files.",
    {
        {"model", "DIR", "input checkpoint directory (required)", ""},
        {"out", "DIR", "output directory (required; must be new or empty unless --force)", ""},
        {"bits", "4|8", "bits per weight", "4"},
        {"group-size", "N", "quantisation group size (32, 64, 128)", "64"},
        {"force", "", "overwrite the checkpoint files in an existing output directory", ""},
        {"threads", "N", "worker threads (0: physical cores)", "0"},
        {"shard-size-mb", "N", "max tensor data per shard in MiB; 0 writes one model.safetensors", "5120"},
        {"json", "", "print a JSON summary on stdout", ""},
        {"quiet", "", "no progress on stderr", ""},
    },
    run_quantize,
});

}  // namespace
}  // namespace mere::cli
