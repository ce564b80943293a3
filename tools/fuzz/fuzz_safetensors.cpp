// libFuzzer target: the safetensors header parser must reject or accept any bytes without crashing,
// hanging or allocating without bound.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto h = mere::parse_safetensors(data, size, "fuzz");
    for (const auto& t : h.tensors) (void)t.numel();
  } catch (const mere::Error&) {
  }
  return 0;
}
