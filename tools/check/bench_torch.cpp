// The cases of `wick bench --suite torch` (ops timed against PyTorch eager) and their timing.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include "backend/storage.hpp"
#include "check/bench.hpp"

namespace wick::check {

namespace {

using Body = std::function<void()>;
using Setup = std::function<Body(Device)>;

std::string count_name(size_t n) {
  if (n % (1u << 20) == 0) return std::to_string(n >> 20) + "M";
  if (n % (1u << 10) == 0) return std::to_string(n >> 10) + "K";
  return std::to_string(n);
}

std::string dims_name(const Shape& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += 'x';
    out += std::to_string(s[i]);
  }
  return out;
}

double nbytes(size_t n, DType d) { return double(n) * double(dtype_size(d)); }

Tensor rnd(const Shape& s, DType d, Device dev, uint64_t seed) { return Tensor::randn(s, d, dev, seed); }

class Builder {
 public:
  explicit Builder(bool quick) : quick_(quick) {}
  // Quick mode shrinks 1-D sizes 64x and each matrix dim 8x, so the suite runs on a CPU in seconds.
  size_t elems(size_t n) const { return quick_ ? n / 64 : n; }
  size_t dim(size_t n) const { return quick_ ? std::max<size_t>(n / 8, 1) : n; }

  void add(std::string name, std::string op, std::string dtype, Shape shape, double bytes, double flops,
           Setup setup, double ops_per_call = 0) {
    TorchCase c;
    c.name = std::move(name);
    c.op = std::move(op);
    c.dtype = std::move(dtype);
    c.shape = std::move(shape);
    c.bytes = bytes;
    c.flops = flops;
    c.ops_per_call = ops_per_call;
    c.setup = std::move(setup);
    out.push_back(std::move(c));
  }

  std::vector<TorchCase> out;

 private:
  bool quick_;
};

const DType kFloat3[] = {DType::F32, DType::F16, DType::BF16};

void elementwise_cases(Builder& b) {
  for (size_t full : {size_t(1) << 24, size_t(1) << 28}) {
    const size_t n = b.elems(full);
    const std::string sz = count_name(full);
    for (DType d : kFloat3) {
      const std::string dn = dtype_name(d);
      b.add("exp_" + dn + "_" + sz, "exp", dn, {n}, 2 * nbytes(n, d), 0, [=](Device dev) {
        Tensor x = rnd({n}, d, dev, 1);
        return Body([x] { (void)x.exp(); });
      });
      b.add("add_" + dn + "_" + sz, "add", dn, {n}, 3 * nbytes(n, d), 0, [=](Device dev) {
        Tensor x = rnd({n}, d, dev, 2), y = rnd({n}, d, dev, 3);
        return Body([x, y] { (void)(x + y); });
      });
      // x * 2 + 1 as a wick user writes it: one affine op.
      b.add("affine_" + dn + "_" + sz, "affine", dn, {n}, 2 * nbytes(n, d), 0, [=](Device dev) {
        Tensor x = rnd({n}, d, dev, 4);
        return Body([x] { (void)x.affine(2.0, 1.0); });
      });
    }
    const std::pair<DType, DType> casts[] = {
        {DType::F32, DType::F16}, {DType::F16, DType::F32}, {DType::BF16, DType::F32}};
    for (auto [from, to] : casts) {
      const std::string fn = dtype_name(from), tn = dtype_name(to);
      b.add("cast_" + fn + "_" + tn + "_" + sz, "cast", fn + "->" + tn, {n}, nbytes(n, from) + nbytes(n, to), 0,
            [=](Device dev) {
              Tensor x = rnd({n}, from, dev, 5);
              return Body([x, to] { (void)x.to_dtype(to); });
            });
    }
  }
}

void layout_cases(Builder& b) {
  for (size_t full : {size_t(4096), size_t(16384)}) {
    const size_t s = b.dim(full);
    b.add("transpose_copy_f32_" + dims_name({full, full}), "transpose_copy", "f32", {s, s},
          2 * nbytes(s * s, DType::F32), 0, [=](Device dev) {
            Tensor x = rnd({s, s}, DType::F32, dev, 6);
            return Body([x] { (void)x.t().contiguous(); });
          });
  }
  const size_t s = b.dim(4096);
  b.add("add_transposed_f32_4096x4096", "add_transposed", "f32", {s, s}, 3 * nbytes(s * s, DType::F32), 0,
        [=](Device dev) {
          Tensor x = rnd({s, s}, DType::F32, dev, 7), y = rnd({s, s}, DType::F32, dev, 8);
          return Body([x, y] { (void)(x + y.t()); });
        });
  const size_t n = b.elems(size_t(1) << 28);
  b.add("copy_f32_256M", "copy", "f32", {n}, 2 * nbytes(n, DType::F32), 0, [=](Device dev) {
    Tensor x = rnd({n}, DType::F32, dev, 9);
    return Body([x] { (void)x.copy(); });
  });
}

void reduce_cases(Builder& b) {
  const Shape fulls[] = {{4096, 4096}, {32768, 1024}};
  for (const Shape& full : fulls) {
    const size_t r = b.dim(full[0]), c = b.dim(full[1]);
    for (DType d : {DType::F32, DType::F16}) {
      const std::string dn = dtype_name(d), sz = dims_name(full);
      for (bool is_max : {false, true}) {
        const std::string what = is_max ? "max" : "sum";
        b.add(what + "_last_" + dn + "_" + sz, what + "_last", dn, {r, c}, nbytes(r * c, d) + nbytes(r, d), 0,
              [=](Device dev) {
                Tensor x = rnd({r, c}, d, dev, 10);
                return Body([x, is_max] { (void)(is_max ? x.max({-1}) : x.sum({-1})); });
              });
        b.add(what + "_dim0_" + dn + "_" + sz, what + "_dim0", dn, {r, c}, nbytes(r * c, d) + nbytes(c, d), 0,
              [=](Device dev) {
                Tensor x = rnd({r, c}, d, dev, 11);
                return Body([x, is_max] { (void)(is_max ? x.max({0}) : x.sum({0})); });
              });
      }
    }
  }
  const size_t n = b.elems(size_t(1) << 28);
  b.add("sum_all_f32_256M", "sum_all", "f32", {n}, nbytes(n, DType::F32) + 4, 0, [=](Device dev) {
    Tensor x = rnd({n}, DType::F32, dev, 12);
    return Body([x] { (void)x.sum_all(); });
  });
  const size_t rows = b.dim(4096), cols = b.dim(32768);
  b.add("arg_sort_f32_4096x32768", "arg_sort", "f32", {rows, cols},
        nbytes(rows * cols, DType::F32) + nbytes(rows * cols, DType::U32), 0, [=](Device dev) {
          Tensor x = rnd({rows, cols}, DType::F32, dev, 13);
          return Body([x] { (void)x.arg_sort_last_dim(true); });
        });
  // The same elements in rows of 2048, within one tile: the tile sort alone, no merge pass.
  const size_t short_rows = b.dim(65536), short_cols = b.dim(2048);
  b.add("arg_sort_f32_65536x2048", "arg_sort", "f32", {short_rows, short_cols},
        nbytes(short_rows * short_cols, DType::F32) + nbytes(short_rows * short_cols, DType::U32), 0, [=](Device dev) {
          Tensor x = rnd({short_rows, short_cols}, DType::F32, dev, 13);
          return Body([x] { (void)x.arg_sort_last_dim(true); });
        });
}

void nn_cases(Builder& b) {
  const DType h = DType::F16;
  const Shape softmax_shapes[] = {{4096, 4096}, {1024, 32000}};
  for (const Shape& full : softmax_shapes) {
    const size_t r = b.dim(full[0]), c = b.dim(full[1]);
    b.add("softmax_f16_" + dims_name(full), "softmax", "f16", {r, c}, 2 * nbytes(r * c, h), 0, [=](Device dev) {
      Tensor x = rnd({r, c}, h, dev, 14);
      return Body([x] { (void)x.softmax_last_dim(); });
    });
  }
  {
    const size_t r = b.dim(4096), c = b.dim(4096);
    b.add("log_softmax_f16_4096x4096", "log_softmax", "f16", {r, c}, 2 * nbytes(r * c, h), 0, [=](Device dev) {
      Tensor x = rnd({r, c}, h, dev, 15);
      return Body([x] { (void)x.log_softmax_last_dim(); });
    });
  }
  const Shape norm_shapes[] = {{4096, 4096}, {32768, 1024}};
  for (const Shape& full : norm_shapes) {
    const size_t r = b.dim(full[0]), c = b.dim(full[1]);
    b.add("rms_norm_f16_" + dims_name(full), "rms_norm", "f16", {r, c}, 2 * nbytes(r * c, h) + nbytes(c, h), 0,
          [=](Device dev) {
            Tensor x = rnd({r, c}, h, dev, 16), w = rnd({c}, h, dev, 17);
            return Body([x, w] { (void)x.rms_norm(w, 1e-5); });
          });
    b.add("layer_norm_f16_" + dims_name(full), "layer_norm", "f16", {r, c},
          2 * nbytes(r * c, h) + 2 * nbytes(c, h), 0, [=](Device dev) {
            Tensor x = rnd({r, c}, h, dev, 18), w = rnd({c}, h, dev, 19), bias = rnd({c}, h, dev, 20);
            return Body([x, w, bias] { (void)x.layer_norm(w, bias, 1e-5); });
          });
  }
  {
    // (b, h, t, d) with half-split rotation; cos/sin are (t, d/2).
    const size_t bb = 1, hh = b.dim(32), t = b.dim(4096), d = 128;
    const size_t n = bb * hh * t * d;
    b.add("rope_f16_1x32x4096x128", "rope", "f16", {bb, hh, t, d}, 2 * nbytes(n, h) + 2 * nbytes(t * d / 2, h), 0,
          [=](Device dev) {
            Tensor x = rnd({bb, hh, t, d}, h, dev, 21);
            Tensor cos = Tensor::rand({t, d / 2}, h, dev, 22, -1.0, 1.0);
            Tensor sin = Tensor::rand({t, d / 2}, h, dev, 23, -1.0, 1.0);
            return Body([x, cos, sin] { (void)x.rope(cos, sin); });
          });
  }
  {
    const size_t n = b.elems(size_t(1) << 24);
    b.add("silu_mul_f16_16M", "silu_mul", "f16", {n}, 3 * nbytes(n, h), 0, [=](Device dev) {
      Tensor x = rnd({n}, h, dev, 24), up = rnd({n}, h, dev, 25);
      return Body([x, up] { (void)x.silu_mul(up); });
    });
  }
  // q, k, v (b, h, t, d); flops 4*b*h*t*t*d (QK^T and PV), halved when causal.
  struct Att {
    size_t t;
    bool causal;
  };
  for (Att a : {Att{4096, true}, Att{1024, false}}) {
    const size_t bb = 1, hh = b.dim(32), t = b.dim(a.t), d = 128;
    const double flops = 4.0 * double(bb * hh) * double(t) * double(t) * double(d) / (a.causal ? 2.0 : 1.0);
    const bool causal = a.causal;
    b.add(std::string("attention_f16_") + (causal ? "causal_" : "") + std::to_string(a.t),
          causal ? "attention_causal" : "attention", "f16", {bb, hh, t, d}, 4 * nbytes(bb * hh * t * d, h), flops,
          [=](Device dev) {
            Tensor q = rnd({bb, hh, t, d}, h, dev, 26), k = rnd({bb, hh, t, d}, h, dev, 27),
                   v = rnd({bb, hh, t, d}, h, dev, 28);
            return Body([q, k, v, causal] { (void)attention(q, k, v, causal); });
          });
  }
}

void matmul_cases(Builder& b) {
  for (DType d : kFloat3)
    for (size_t full : {size_t(4096), size_t(8192)}) {
      const size_t s = b.dim(full);
      const double ds = double(s);
      b.add("matmul_" + std::string(dtype_name(d)) + "_" + std::to_string(full), "matmul", dtype_name(d), {s, s, s},
            3 * nbytes(s * s, d), 2 * ds * ds * ds, [=](Device dev) {
              Tensor x = rnd({s, s}, d, dev, 30), w = rnd({s, s}, d, dev, 31);
              return Body([x, w] { (void)x.matmul(w); });
            });
    }
  // Decode: activations (m, k) times weights (k, n); mostly a read of the weights.
  const Shape decode[] = {{1, 4096, 4096}, {16, 4096, 11008}};
  for (DType d : {DType::F16, DType::BF16})
    for (const Shape& full : decode) {
      const size_t m = b.dim(full[0]), k = b.dim(full[1]), n = b.dim(full[2]);
      b.add("matmul_" + std::string(dtype_name(d)) + "_" + dims_name(full), "matmul_decode", dtype_name(d), {m, k, n},
            nbytes(m * k + k * n + m * n, d), 2.0 * double(m) * double(k) * double(n), [=](Device dev) {
              Tensor x = rnd({m, k}, d, dev, 32), w = rnd({k, n}, d, dev, 33);
              return Body([x, w] { (void)x.matmul(w); });
            });
    }
}

void overhead_cases(Builder& b) {
  // Dependent one-element adds: what a step of a small model's Python-free loop costs per op.
  const size_t chain = 10000;
  b.add("host_add_chain_10000", "host_add_chain", "f32", {1}, 0, 0,
        [=](Device dev) {
          Tensor x = rnd({1}, DType::F32, dev, 34), y = rnd({1}, DType::F32, dev, 35);
          // Also reports (on stderr, when the case ends) the host time to queue the chain,
          // without the wait for the GPU: whether the host or the device bounds this case.
          struct Enqueue {
            double best = 1e30;
            ~Enqueue() { std::fprintf(stderr, "host_add_chain: queueing alone takes %.3f us/op\n", best / chain * 1e6); }
          };
          auto stat = std::make_shared<Enqueue>();
          return Body([x, y, stat] {
            auto t0 = std::chrono::steady_clock::now();
            Tensor z = x;
            for (size_t i = 0; i < chain; ++i) z = z + y;
            stat->best = std::min(stat->best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
          });
        },
        double(chain));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t k = v.size();
  return k % 2 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2]);
}

}  // namespace

std::vector<TorchCase> torch_cases(bool quick) {
  Builder b(quick);
  elementwise_cases(b);
  layout_cases(b);
  reduce_cases(b);
  nn_cases(b);
  matmul_cases(b);
  overhead_cases(b);
  return std::move(b.out);
}

std::string torch_case_unit(const TorchCase& c) {
  if (c.ops_per_call > 0) return "us/op";
  return c.flops > 0 ? "TFLOP/s" : "GB/s";
}

TorchResult run_torch_case(const TorchCase& c, Device device, double min_repeat_s) {
  TorchResult res;
  res.unit = torch_case_unit(c);
  using clock = std::chrono::steady_clock;
  try {
    Body body = c.setup(device);
    Backend& be = backend_for(device);
    auto timed = [&](size_t n) {
      be.synchronize();
      auto t0 = clock::now();
      for (size_t i = 0; i < n; ++i) body();
      be.synchronize();
      return std::chrono::duration<double>(clock::now() - t0).count();
    };
    for (int i = 0; i < 3; ++i) body();  // warm-up: allocator caches, thread pool, BLAS, kernel loads
    // Calibrate N by doubling until a batch is long enough to time, then scale to min_repeat_s.
    size_t n = 1;
    double el = timed(n);
    while (el < min_repeat_s / 10 && n < (size_t(1) << 24)) {
      n *= 2;
      el = timed(n);
    }
    res.iters = std::max<size_t>(1, size_t(std::ceil(double(n) * min_repeat_s / std::max(el, 1e-9))));
    std::vector<double> per_call;
    for (int r = 0; r < 7; ++r) per_call.push_back(timed(res.iters) / double(res.iters));
    res.seconds = median(per_call);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Unsupported || e.kind() == ErrorKind::OutOfMemory) res.skipped = e.what();
    else res.error = e.what();
    return res;
  } catch (const std::exception& e) {
    res.error = e.what();
    return res;
  }
  if (res.seconds <= 0) return res;
  if (c.ops_per_call > 0) res.value = res.seconds / c.ops_per_call * 1e6;
  else if (c.flops > 0) res.value = c.flops / res.seconds / 1e12;
  else res.value = c.bytes / res.seconds / 1e9;
  return res;
}

}  // namespace wick::check
