// Kernels launched back to back on a GPU, each reading what the one before wrote: with programmatic
// dependent launch (CUDA, sm_90+: device_utils.cuh's launch_kernel) a kernel may be resident before
// its predecessor ends, and kernel_entry() must hold it until then. Chains of different kernels, run
// op by op and as a recorded graph, against exact host arithmetic (small integers in f32 are exact).
// Also add_rms_norm on the device: the same bits as add then rms_norm there, in the kernel that holds
// a row in registers and in the one for rows too long for them.
// Built only with -DWICK_GPU=cuda|rocm; run on a machine with a GPU.
#include <cmath>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "wick/wick.hpp"

using namespace wick;

namespace {

Device gpu() { return Device::gpu(0); }

// x (1, n) through `steps` rounds of: add 1 (element-wise kernel), scale the transpose's copy back
// (tiled transpose kernels), slice_set of a row into a buffer and read back (copy kernel), sum over
// rows of a 1-row view (reduction kernel). Each round's result is x + 1: exact for small integers.
Tensor chain(Tensor x, int steps) {
  const size_t n = x.dim(1);
  for (int i = 0; i < steps; ++i) {
    Tensor y = x.add(1.0);
    y = y.t().contiguous().t().contiguous();  // transpose there and back: same values
    Tensor buf = Tensor::zeros({2, n}, y.dtype(), y.device());
    buf.slice_set(y, 0, 1);
    x = buf.narrow(0, 1, 1).sum({0}, true);
  }
  return x;
}

}  // namespace

TEST(GpuLaunch, DependentKernelChainsSeeEachResult) {
  const size_t n = 4099;  // not a multiple of any block or vector width
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(i % 17);
  const Tensor x = Tensor::from_vector(v, {1, n}, gpu());
  const int steps = 200;
  const std::vector<double> got = test::values(chain(x, steps));
  std::vector<double> want(n);
  for (size_t i = 0; i < n; ++i) want[i] = double(i % 17) + steps;
  EXPECT_TRUE(test::all_close(got, want, 0, 0));
}

TEST(GpuLaunch, RecordedChainReplaysOnNewInput) {
  const size_t n = 1000;
  Tensor x = Tensor::zeros({1, n}, DType::F32, gpu());
  Tensor y;
  Graph g = Graph::capture(gpu(), [&] { y = chain(x, 50); });
  for (int r = 0; r < 3; ++r) {
    x.copy_from(Tensor::full({1, n}, double(10 * r), DType::F32, gpu()));
    g.replay();
    EXPECT_TRUE(test::all_close(y, std::vector<double>(n, 10.0 * r + 50), 0, 0)) << "replay " << r;
  }
}

TEST(GpuLaunch, AddRmsNormIsAddThenRmsNormOnTheDevice) {
  // Row lengths for the register kernel (64, 5000) and the long kernel (40000); a transposed
  // residual and an offset input; both results, bit for bit against the two separate ops.
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (size_t n : {size_t(64), size_t(5000), size_t(40000)}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " n=" + std::to_string(n));
      std::vector<float> a(3 * (n + 5)), b(3 * n), w(n);
      for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37f * float(i)) * 3.0f;
      for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.11f * float(i)) * 0.5f;
      for (size_t i = 0; i < n; ++i) w[i] = 0.5f + float(i % 7) * 0.125f;
      const Tensor x = Tensor::from_vector(a, {3, n + 5}, gpu()).to_dtype(dt).narrow(1, 5, n);
      const Tensor r = Tensor::from_vector(b, {n, 3}, gpu()).to_dtype(dt).t();
      const Tensor wt = Tensor::from_vector(w, {n}, gpu()).to_dtype(dt);
      auto [s, y] = x.add_rms_norm(r, wt, 1e-5);
      const Tensor s_ref = x.add(r);
      EXPECT_TRUE(test::all_close(s, test::values(s_ref), 0, 0));
      EXPECT_TRUE(test::all_close(y, test::values(s_ref.rms_norm(wt, 1e-5)), 0, 0));
    }
}
