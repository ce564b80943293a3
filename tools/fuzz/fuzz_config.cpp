// libFuzzer target: the JSON parser and the config.json validator on arbitrary text.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "core/json.h"
#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    mere::Json j = mere::Json::parse(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    (void)j.dump();
    (void)mere::parse_model_config(j, "fuzz");
  } catch (const mere::Error&) {
  }
  return 0;
}
