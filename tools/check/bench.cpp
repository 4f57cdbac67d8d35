// Timed cases for `wick bench`.
#include "check/bench.hpp"

#include <algorithm>
#include <chrono>

#include "backend/storage.hpp"

namespace wick::check {

static std::string count_name(size_t n) {
  if (n % (1u << 20) == 0) return std::to_string(n >> 20) + "M";
  if (n % (1u << 10) == 0) return std::to_string(n >> 10) + "K";
  return std::to_string(n);
}

std::vector<BenchCase> bench_cases(BenchSize size) {
  // Small keeps the same names' shapes 16x (1-D) / 4x per side smaller, for smoke tests.
  const bool small = size == BenchSize::Small;
  const size_t m1 = small ? (1u << 16) : (1u << 20), m16 = small ? (1u << 20) : (1u << 24);
  const size_t sq = small ? 1024 : 4096, mm = small ? 256 : 1024, mm_big = small ? 1024 : 4096;
  const double f4 = 4;
  std::vector<BenchCase> out;
  auto rand_f32 = [](const Shape& s, Device d, uint64_t seed) { return Tensor::randn(s, DType::F32, d, seed); };

  for (size_t n : {m1, m16}) {
    out.push_back({"unary_exp_" + count_name(n), {n}, "f32", 2 * f4 * double(n), 0, false, [=](Device d) {
                     Tensor x = rand_f32({n}, d, 1);
                     return std::function<void()>([x] { (void)x.exp(); });
                   }});
  }
  for (size_t n : {m1, m16}) {
    out.push_back({"binary_add_" + count_name(n), {n}, "f32", 3 * f4 * double(n), 0, false, [=](Device d) {
                     Tensor a = rand_f32({n}, d, 2), b = rand_f32({n}, d, 3);
                     return std::function<void()>([a, b] { (void)a.add(b); });
                   }});
  }
  for (size_t n : {m1, m16})
    out.push_back({"cast_f32_f16_" + count_name(n), {n}, "f32->f16", 6.0 * double(n), 0, false, [=](Device d) {
                     Tensor x = rand_f32({n}, d, 4);
                     return std::function<void()>([x] { (void)x.to_dtype(DType::F16); });
                   }});
  out.push_back({"sum_all_" + count_name(m16), {m16}, "f32", f4 * double(m16), 0, false, [=](Device d) {
                   Tensor x = rand_f32({m16}, d, 5);
                   return std::function<void()>([x] { (void)x.sum_all(); });
                 }});
  out.push_back({"sum_last_dim_" + std::to_string(sq) + "x" + std::to_string(sq), {sq, sq}, "f32",
                 f4 * double(sq * sq + sq), 0, false, [=](Device d) {
                   Tensor x = rand_f32({sq, sq}, d, 6);
                   return std::function<void()>([x] { (void)x.sum({-1}); });
                 }});
  out.push_back({"transpose_copy_" + std::to_string(sq) + "x" + std::to_string(sq), {sq, sq}, "f32",
                 2 * f4 * double(sq * sq), 0, false, [=](Device d) {
                   Tensor x = rand_f32({sq, sq}, d, 7);
                   return std::function<void()>([x] { (void)x.t().contiguous(); });
                 }});
  for (size_t n : {mm, mm_big}) {
    double nn = double(n);
    out.push_back({"matmul_" + std::to_string(n), {n, n, n}, "f32", 3 * f4 * nn * nn, 2 * nn * nn * nn, n == mm_big,
                   [=](Device d) {
                     Tensor a = rand_f32({n, n}, d, 8), b = rand_f32({n, n}, d, 9);
                     return std::function<void()>([a, b] { (void)a.matmul(b); });
                   }});
  }
  return out;
}

BenchResult run_bench(const BenchCase& c, Device device, int reps) {
  auto body = c.setup(device);
  Backend& be = backend_for(device);
  be.synchronize();
  body();  // warm-up: first-touch page faults, thread pool start, BLAS init
  be.synchronize();
  std::vector<double> ms;
  for (int r = 0; r < std::max(reps, 1); ++r) {
    auto t0 = std::chrono::steady_clock::now();
    body();
    be.synchronize();
    auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  size_t k = ms.size();
  double med = k % 2 ? ms[k / 2] : 0.5 * (ms[k / 2 - 1] + ms[k / 2]);
  BenchResult res{c.name, shape_str(c.shape), c.dtype, med, 0, 0};
  if (c.bytes > 0) res.gbps = c.bytes / (med * 1e-3) / 1e9;
  if (c.flops > 0) res.gflops = c.flops / (med * 1e-3) / 1e9;
  return res;
}

}  // namespace wick::check
