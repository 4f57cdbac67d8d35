// Linked into every tests/gpu suite: without a usable GPU (a ROCm or CUDA build on a machine
// with no device, as in CI) every test is skipped with the reason, instead of failing; ctest
// reports them as skipped.
#include <gtest/gtest.h>

#include "wick/device.hpp"

namespace {

class RequireGpu : public ::testing::Environment {
 public:
  void SetUp() override {
    const std::string why = wick::gpu_unavailable_reason();
    if (wick::available_devices().size() < 2)
      GTEST_SKIP() << "no usable GPU: " << (why.empty() ? "none found" : why) << "; the GPU tests need one";
  }
};

const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new RequireGpu);

}  // namespace
