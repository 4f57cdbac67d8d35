// GPU f16/bf16 matmul with few rows of x against a transposed weight, x.matmul(w.t()): the
// matrix-vector kernel of kernels/matmul.cu for 1..8 rows when the layouts allow 16-byte loads,
// the vendor gemm otherwise (9 rows, odd k, unaligned views, a non-transposed rhs). Expected values:
// the same rounded inputs multiplied in f64 on the host. Bound per output: f32 accumulation over k
// products (k * 2^-23 of sum |x_j w_j|, generous for any summation order) plus one rounding of the
// result to the dtype (2^-11 f16, 2^-8 bf16, of |y|).
// Built only with -DWICK_GPU=cuda|rocm; run on a machine with a GPU.
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "wick/fast.hpp"

using namespace wick;

namespace {

Device gpu() { return Device::gpu(0); }

std::vector<float> normal(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// y = x w^T for host tensors x (m x k) and w (n x k), the GPU result `got`, checked against f64.
void expect_close(const Tensor& x, const Tensor& w, const Tensor& got, const std::string& what) {
  SCOPED_TRACE(what);
  const size_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  ASSERT_EQ(got.shape(), (Shape{m, n}));
  ASSERT_EQ(got.dtype(), x.dtype());
  const std::vector<double> xv = test::values(x), wv = test::values(w), yv = test::values(got);
  const double out_round = x.dtype() == DType::F16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
  size_t bad = 0;
  for (size_t i = 0; i < m; ++i)
    for (size_t r = 0; r < n; ++r) {
      double ref = 0, mag = 0;
      for (size_t j = 0; j < k; ++j) {
        ref += xv[i * k + j] * wv[r * k + j];
        mag += std::fabs(xv[i * k + j] * wv[r * k + j]);
      }
      const double bound = double(k) * std::ldexp(mag, -23) + out_round * std::fabs(ref) * 1.01 + 1e-30;
      const double y = yv[i * n + r];
      if (!(std::fabs(y - ref) <= bound) && bad++ < 5)
        ADD_FAILURE() << "y[" << i << ", " << r << "] = " << y << ", f64 reference " << ref << " (bound " << bound
                      << ")";
    }
  EXPECT_EQ(bad, 0u);
}

struct Case {
  size_t m, n, k;
};

void run(DType dt, const Case& c, uint32_t seed) {
  const Tensor x = Tensor::from_vector(normal(c.m * c.k, seed), {c.m, c.k}).to_dtype(dt);
  const Tensor w = Tensor::from_vector(normal(c.n * c.k, seed + 1), {c.n, c.k}).to_dtype(dt);
  const Tensor y = x.to_device(gpu()).matmul(w.to_device(gpu()).t());
  expect_close(x, w, y, std::string(dtype_name(dt)) + " m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) +
                            " k=" + std::to_string(c.k));
}

}  // namespace

TEST(GpuMatVec, RowCountsAndShapes) {
  // m 1..9 (9: the gemm), k a multiple of 8 (the kernel) or not (the gemm), n odd (a half block).
  const Case cases[] = {{1, 1, 8},      {1, 37, 64},    {2, 37, 64},  {3, 255, 520}, {4, 1000, 2048},
                        {5, 64, 4096},  {6, 33, 136},   {7, 129, 72}, {8, 513, 1032}, {9, 77, 512},
                        {1, 300, 12},   {2, 17, 4100},  {1, 2560, 2048}, {1, 4096, 11008},
                        // f16 rows whose last round of loads is at most half full: 2 rows per block
                        // (matmul.cu's half_round_choice), the last block half full.
                        {1, 301, 5632}, {1, 2049, 2048},
                        // the 7B shape's rows with few outputs or a partial last round
                        {1, 301, 4096}, {1, 77, 8200}, {1, 5000, 11008}};
  uint32_t seed = 1;
  for (DType dt : {DType::F16, DType::BF16})
    for (const Case& c : cases) run(dt, c, seed += 2);
}

TEST(GpuMatVec, StridedAndOffsetViews) {
  for (DType dt : {DType::F16, DType::BF16}) {
    const size_t m = 3, n = 50, k = 256;
    // x: rows of a wider tensor (row stride k + 24, offset 8: aligned) and (offset 3: unaligned, gemm).
    const Tensor xw = Tensor::from_vector(normal(m * (k + 24), 5), {m, k + 24}).to_dtype(dt);
    // w: rows 5.. of a taller weight (offset 5k: aligned), and a column window (row stride k + 8).
    const Tensor ww = Tensor::from_vector(normal((n + 9) * (k + 8), 6), {n + 9, k + 8}).to_dtype(dt);
    const Tensor xg = xw.to_device(gpu()), wg = ww.to_device(gpu());
    for (size_t xo : {size_t(8), size_t(3)})
      for (size_t wo : {size_t(0), size_t(1)}) {
        const Tensor x = xw.narrow(1, xo, k), w = ww.narrow(0, 5, n).narrow(1, wo * 8, k);
        const Tensor y = xg.narrow(1, xo, k).matmul(wg.narrow(0, 5, n).narrow(1, wo * 8, k).t());
        expect_close(x, w, y, std::string(dtype_name(dt)) + " x offset " + std::to_string(xo) + " w col offset " +
                                  std::to_string(wo * 8));
      }
    // A row-major (not transposed) rhs takes the gemm.
    const Tensor x1 = xw.narrow(0, 1, 1).narrow(1, 0, k);
    const Tensor y1 = xg.narrow(0, 1, 1).narrow(1, 0, k).matmul(wg.narrow(0, 0, n).narrow(1, 0, k).t().contiguous());
    expect_close(x1, ww.narrow(0, 0, n).narrow(1, 0, k), y1, "row-major rhs");
  }
}

TEST(GpuMatVec, NonFiniteValuesPropagate) {
  // An inf in x makes every output inf (all weights positive), a NaN in row 2 of w makes y[2] NaN.
  const size_t k = 64, n = 4;
  std::vector<float> xv(k, 0.5f), wv(n * k, 0.25f);
  xv[3] = std::numeric_limits<float>::infinity();
  wv[2 * k + 7] = std::numeric_limits<float>::quiet_NaN();
  for (DType dt : {DType::F16, DType::BF16}) {
    const Tensor x = Tensor::from_vector(xv, {1, k}, gpu()).to_dtype(dt);
    const Tensor w = Tensor::from_vector(wv, {n, k}, gpu()).to_dtype(dt);
    const std::vector<double> y = test::values(x.matmul(w.t()));
    ASSERT_EQ(y.size(), n);
    EXPECT_TRUE(std::isinf(y[0]) && y[0] > 0) << y[0];
    EXPECT_TRUE(std::isinf(y[1]) && y[1] > 0) << y[1];
    EXPECT_TRUE(std::isnan(y[2])) << y[2];
    EXPECT_TRUE(std::isinf(y[3]) && y[3] > 0) << y[3];
  }
}

// fast::matmul_swiglu(x, w.t()): the matrix-vector kernel with the silu product in its epilogue (gate row
// i and up row n + i in one block) for one f16 row whose k takes two rows per block (k = 2048,
// 5632, 64, 8 below: matmul.cu's half_round_choice), the composition for the other shapes.
// Expected: the f64 silu(g) * u within the bound of two f32 sums rounded to the dtype (the fused
// kernel's block sums in another order than the plain product's, so the two may differ in the last
// bit); the composition on the same GPU must meet the same bound.
TEST(GpuMatVec, MatmulSwigluIsMatmulThenSwiglu) {
  const Case cases[] = {{1, 2, 8},       {1, 74, 64},     {2, 74, 64},    {3, 510, 520}, {5, 128, 4096},
                        {8, 1026, 1032}, {9, 154, 512},   {1, 5632, 2048}, {1, 602, 5632}, {1, 8192, 4096},
                        {4, 34, 4100},   {1, 22, 12}};
  uint32_t seed = 101;
  for (DType dt : {DType::F16, DType::BF16})
    for (const Case& c : cases) {
      const std::string what = std::string(dtype_name(dt)) + " m=" + std::to_string(c.m) +
                               " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k);
      SCOPED_TRACE(what);
      // x scaled by 1/16 keeps silu(g) * u inside f16's range at k = 8192
      const Tensor x = Tensor::from_vector(normal(c.m * c.k, seed += 2), {c.m, c.k}).affine(1.0 / 16, 0).to_dtype(dt);
      const Tensor w = Tensor::from_vector(normal(c.n * c.k, seed + 1), {c.n, c.k}).to_dtype(dt);
      const Tensor xg = x.to_device(gpu()), wg = w.to_device(gpu());
      const Tensor got = fast::matmul_swiglu(xg, wg.t());
      const Tensor want = xg.matmul(wg.t()).swiglu();
      ASSERT_EQ(got.shape(), (Shape{c.m, c.n / 2}));
      const std::vector<double> gv = test::values(got), wantv = test::values(want);
      const std::vector<double> xv = test::values(x), wv = test::values(w);
      size_t bad = 0;
      const size_t h = c.n / 2;
      for (size_t i = 0; i < c.m; ++i)
        for (size_t r = 0; r < h; ++r) {
          const double y = gv[i * h + r], y2 = wantv[i * h + r];
          double g = 0, u = 0, mg = 0, mu = 0;
          for (size_t j = 0; j < c.k; ++j) {
            g += xv[i * c.k + j] * wv[r * c.k + j];
            u += xv[i * c.k + j] * wv[(h + r) * c.k + j];
            mg += std::fabs(xv[i * c.k + j] * wv[r * c.k + j]);
            mu += std::fabs(xv[i * c.k + j] * wv[(h + r) * c.k + j]);
          }
          const double ref = g / (1 + std::exp(-g)) * u;
          // g and u: f32 sums over k then one rounding each (2^-11 f16, 2^-8 bf16); silu's slope is
          // at most 1.1 and |silu(g)| <= |g|; then the result's own rounding. Doubled for slack.
          const double e = dt == DType::F16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
          const double dg = e * std::fabs(g) + double(c.k) * std::ldexp(mg, -23);
          const double du = e * std::fabs(u) + double(c.k) * std::ldexp(mu, -23);
          const double bound = 2 * (1.1 * dg * (std::fabs(u) + du) + std::fabs(g) * du + e * std::fabs(ref)) + 1e-6;
          if (!(std::fabs(y - ref) <= bound) && bad++ < 5)
            ADD_FAILURE() << "y[" << i << ", " << r << "] = " << y << ", f64 silu(g) * u " << ref << " (bound " << bound
                          << ")";
          if (!(std::fabs(y2 - ref) <= bound) && bad++ < 5)
            ADD_FAILURE() << "matmul then swiglu [" << i << ", " << r << "] = " << y2 << ", f64 " << ref;
        }
      EXPECT_EQ(bad, 0u);
    }
  // An offset view of x (the fused kernel) and an odd product width (Error(Shape) naming the op).
  const Tensor xw = Tensor::from_vector(normal(80, 7), {1, 80}).to_dtype(DType::F16).to_device(gpu());
  const Tensor w = Tensor::from_vector(normal(40 * 64, 8), {40, 64}).to_dtype(DType::F16).to_device(gpu());
  const Tensor x = xw.narrow(1, 8, 64);
  const std::vector<double> a = test::values(fast::matmul_swiglu(x, w.t())), b = test::values(x.matmul(w.t()).swiglu());
  ASSERT_EQ(a.size(), 20u);
  for (size_t i = 0; i < a.size(); ++i)  // a few f16 ulps apart at most (sum order, then the roundings)
    EXPECT_LE(std::fabs(a[i] - b[i]), std::ldexp(std::fabs(b[i]), -8) + 1e-4) << i << ": " << a[i] << " vs " << b[i];
  try {
    (void)fast::matmul_swiglu(x, w.narrow(0, 0, 39).t());
    ADD_FAILURE() << "an odd product width was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Shape);
    EXPECT_NE(std::string(e.what()).find("matmul_swiglu"), std::string::npos) << e.what();
  }
}
