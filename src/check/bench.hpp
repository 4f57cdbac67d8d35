#pragma once
// The timed cases behind `wick bench`. Names are stable: bench/cpu_vs_numpy.py matches on them.
#include <functional>
#include <string>
#include <vector>

#include "wick/tensor.hpp"

namespace wick::check {

enum class BenchSize { Small, Default, Large };

struct BenchCase {
  std::string name;   // "unary_exp_16M"
  Shape shape;        // the main operand's shape (matmul: {m, n, k})
  std::string dtype;  // "f32", "f32->f16"
  double bytes = 0;   // bytes read + written per run (0: report GFLOP/s only)
  double flops = 0;   // floating-point operations per run (0: report GB/s only)
  bool large_only = false;  // run only when asked by name or with BenchSize::Large
  // Builds the inputs on a device and returns the timed body.
  std::function<std::function<void()>(Device)> setup;
};

struct BenchResult {
  std::string name, shape, dtype;
  double median_ms = 0, gbps = 0, gflops = 0;
};

std::vector<BenchCase> bench_cases(BenchSize size);
// Warm-up once, then the median of `reps` timed runs (each synchronised with the device).
BenchResult run_bench(const BenchCase& c, Device device, int reps);

}  // namespace wick::check
