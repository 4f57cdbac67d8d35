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

namespace wick::check {

// `wick bench --suite torch`: ops timed as bench/vs_torch.py times PyTorch.
// Names do not change with `quick` (only the shapes shrink); vs_torch.py matches on name and op
// and rebuilds its inputs from `op`, `dtype` and `shape`.
struct TorchCase {
  std::string name;   // "exp_f16_16M"
  std::string op;     // what vs_torch.py runs: "exp", "sum_last", "matmul_decode", ...
  std::string dtype;  // "f16", "f32->f16"
  Shape shape;        // as run (matmul: {m, k, n}; attention and rope: {b, h, t, d})
  double bytes = 0;   // bytes read + written per call (the rate's numerator when flops == 0)
  double flops = 0;   // floating-point operations per call (then the unit is TFLOP/s)
  double ops_per_call = 0;  // > 0: a chain of this many ops per call, reported in us/op
  std::function<std::function<void()>(Device)> setup;
};

struct TorchResult {
  std::string skipped;  // why the case did not run (Unsupported, out of memory), else empty
  std::string error;    // any other failure: a bug in the case or the backend
  double seconds = 0;   // median time of one call
  size_t iters = 0;     // calls per timed repeat
  std::string unit;     // "GB/s", "TFLOP/s" or "us/op"
  double value = 0;
};

std::vector<TorchCase> torch_cases(bool quick);
// 3 warm-up calls, then 7 repeats of N calls between two synchronisations (N makes a repeat last
// at least min_repeat_s); the median repeat over N is one call's time.
TorchResult run_torch_case(const TorchCase& c, Device device, double min_repeat_s);
std::string torch_case_unit(const TorchCase& c);

}  // namespace wick::check

namespace wick::check {

// `wick bench --suite quant`: the quantized cases, each printed as a percentage of a rate
// measured in the same run on the same device: the matrix-vector products (1 x k x n, x f32, W
// (n, k) random valid blocks; calls rotate over copies of W filling 1 GiB, so W comes from memory,
// not a cache) as effective weight bandwidth (W's bytes / time) against the copy
// bandwidth (GPU: a 512 MiB device-to-device copy, counted as its 1 GiB read + written; CPU: a read
// loop over 1 GiB on every core), and the Q4_K batch product against wick's f16 matmul of the
// same shape.
struct QuantBenchCase {
  TorchCase timing;      // shape {m, k, n}; bytes (matvec: the weights) or flops
  std::string baseline;  // the case whose rate is 100%; empty for the two baselines
};
std::vector<QuantBenchCase> quant_bench_cases(bool quick);

}  // namespace wick::check
