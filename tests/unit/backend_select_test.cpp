// Backend selection: "cuda" / "cuda:N" names, and the clear error when the binary has no CUDA.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "backend/backend.h"
#include "core/error.h"
#include "model/qwen35.h"

using namespace mere;

namespace {
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
const std::string kModel = std::string(MERE_SOURCE_DIR) + "/models/qwen35-moe-tiny";
}  // namespace

TEST(BackendSelect, UnknownNameNamesTheChoices) {
  const std::string e = error_of([] { make_backend("tpu"); });
  EXPECT_NE(e.find("expected ref, cpu or cuda"), std::string::npos) << e;
}

TEST(BackendSelect, BadCudaOrdinalIsRejected) {
  const std::string e = error_of([] { Qwen35Model::load(kModel, "cuda:x"); });
  EXPECT_NE(e.find("expected cuda or cuda:N"), std::string::npos) << e;
}

#ifndef MERE_HAVE_CUDA
TEST(BackendSelect, CudaWithoutCudaBuiltInIsAClearError) {
  const std::string e = error_of([] { Qwen35Model::load(kModel, "cuda"); });
  EXPECT_NE(e.find("built without CUDA"), std::string::npos) << e;
  const std::string e2 = error_of([] { make_backend("cuda"); });
  EXPECT_NE(e2.find("built without CUDA"), std::string::npos) << e2;
}
#endif
