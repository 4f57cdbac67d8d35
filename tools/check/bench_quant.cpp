// The cases of `wick bench --suite quant` (bench.hpp): quantized matrix-vector products against the
// device's copy bandwidth, the Q4_K batch product against the f16 matmul.
#include <algorithm>
#include <cstring>
#include <memory>
#include <thread>

#include "check/bench.hpp"
#include "check/quant_util.hpp"
#include "wick/quant.hpp"

namespace wick::check {
namespace {

using Body = std::function<void()>;

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string dims_name(size_t m, size_t k, size_t n) {
  return std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n);
}

// The host's read bandwidth: every hardware thread sums its slice of a buffer (the adds vectorise
// and hide behind the loads, so memory bounds the loop).
Body cpu_read_loop(size_t bytes) {
  auto buf = std::make_shared<std::vector<uint64_t>>(bytes / 8);
  for (size_t i = 0; i < buf->size(); ++i) (*buf)[i] = i * 0x9e3779b97f4a7c15ull;  // touched: no zero page
  auto sink = std::make_shared<uint64_t>(0);
  return [buf, sink] {
    const size_t threads = std::max(1u, std::thread::hardware_concurrency());
    std::vector<uint64_t> part(threads, 0);
    std::vector<std::thread> pool;
    const size_t n = buf->size(), per = (n + threads - 1) / threads;
    for (size_t t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        const uint64_t* p = buf->data();
        uint64_t s = 0;
        for (size_t i = t * per, e = std::min(n, (t + 1) * per); i < e; ++i) s += p[i];
        part[t] = s;
      });
    for (auto& th : pool) th.join();
    for (uint64_t v : part) *sink += v;
  };
}

}  // namespace

std::vector<QuantBenchCase> quant_bench_cases(bool quick) {
  // Quick: each dim an eighth, rounded up to whole 256-blocks.
  auto dim = [quick](size_t n) { return quick ? std::max<size_t>(256, (n / 8 + 255) / 256 * 256) : n; };
  std::vector<QuantBenchCase> out;
  auto add = [&out](std::string name, std::string op, std::string dtype, Shape shape, double bytes, double flops,
                    std::function<Body(Device)> setup, std::string baseline) {
    TorchCase c;
    c.name = std::move(name);
    c.op = std::move(op);
    c.dtype = std::move(dtype);
    c.shape = std::move(shape);
    c.bytes = bytes;
    c.flops = flops;
    c.setup = std::move(setup);
    out.push_back({std::move(c), std::move(baseline)});
  };

  // 1 GiB of traffic per call: a GPU copies 512 MiB (read + write), the CPU reads 1 GiB.
  const size_t traffic = quick ? (size_t(16) << 20) : (size_t(1) << 30);
  add(
      "copy_bandwidth", "copy", "u8", {traffic}, double(traffic), 0,
      [traffic](Device d) -> Body {
        if (d.is_cpu()) return cpu_read_loop(traffic);
        Tensor x = Tensor::zeros({traffic / 8}, DType::F32, d);
        return [x] { (void)x.copy(); };
      },
      "");
  const size_t bm = dim(512), bk = dim(4096), bn = dim(4096);
  const double bflops = 2.0 * double(bm) * double(bk) * double(bn);
  const std::string bshape = dims_name(512, 4096, 4096);
  add(
      "matmul_f16_" + bshape, "matmul", "f16", {bm, bk, bn}, 0, bflops,
      [=](Device d) -> Body {
        Tensor x = Tensor::randn({bm, bk}, DType::F16, d, 1), w = Tensor::randn({bk, bn}, DType::F16, d, 2);
        return [x, w] { (void)x.matmul(w); };
      },
      "");

  const GGMLType types[] = {GGMLType::Q4_0, GGMLType::Q4_K, GGMLType::Q6_K, GGMLType::Q8_0, GGMLType::MXFP4};
  const size_t shapes[][2] = {{4096, 4096}, {4096, 11008}, {11008, 4096}, {4096, 32000}};  // k, n
  for (GGMLType t : types)
    for (const auto& kn : shapes) {
      const size_t k = dim(kn[0]), n = dim(kn[1]);
      const double wbytes = double(n * (k / ggml_block_size(t)) * ggml_type_size(t));
      add(
          "qmatvec_" + lower(ggml_type_name(t)) + "_" + dims_name(1, kn[0], kn[1]), "qmatvec", ggml_type_name(t),
          {1, k, n}, wbytes, 0,
          [=](Device d) -> Body {
            // Calls rotate over copies of W filling `traffic` bytes, so that no call finds its
            // weights in a cache (a GPU's L2; this CPU's L3 holds 260 MiB): a model's decode step
            // streams every layer's weights from memory.
            const std::vector<uint8_t> b = random_qblocks(t, n, k, 7);
            const size_t copies = std::clamp<size_t>(size_t(double(traffic) / wbytes + 1), 1, 64);
            auto qs = std::make_shared<std::vector<QTensor>>();
            for (size_t i = 0; i < copies; ++i) qs->push_back(QTensor::from_bytes(t, {n, k}, b.data(), b.size(), d));
            Tensor x = Tensor::randn({1, k}, DType::F32, d, 3);
            auto next = std::make_shared<size_t>(0);
            return [qs, x, next] {
              (void)(*qs)[*next].matmul_t(x);
              *next = (*next + 1) % qs->size();
            };
          },
          "copy_bandwidth");
    }
  add(
      "qmatmul_q4_k_" + bshape, "qmatmul", "Q4_K", {bm, bk, bn}, 0, bflops,
      [=](Device d) -> Body {
        const std::vector<uint8_t> b = random_qblocks(GGMLType::Q4_K, bn, bk, 8);
        QTensor q = QTensor::from_bytes(GGMLType::Q4_K, {bn, bk}, b.data(), b.size(), d);
        Tensor x = Tensor::randn({bm, bk}, DType::F16, d, 4);
        return [q, x] { (void)q.matmul_t(x); };
      },
      "matmul_f16_" + bshape);
  return out;
}

}  // namespace wick::check
