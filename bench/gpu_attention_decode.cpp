// Decode attention speed (tg @ d8192): one query token against a long KV cache, through
// the public attention_kv_len on full-capacity cache views (what a recorded LLaMA decode step
// runs), for the 1.1B (32 q heads on 4 KV heads, d 64) and 7B (32 heads, d 128) shapes, f16.
// Each case records one graph of `layers` calls, each on its own cache (more K/V bytes than 3x the
// L2, as in a decode step where every layer's cache is cold), and times its replays: us per call,
// and the K/V bytes it reads per second beside the device copy bandwidth (read + write of 1 GiB).
// The kernel choices are the library's (WICK_DECODE_ATTN / WICK_DECODE_MERGE pick others).
// Built in GPU builds with the tests (target gpu_attention_decode); run: build/gpu_attention_decode
// [1.1B|7B [keys]]
#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <cstdio>
#include <vector>

#include "wick/device.hpp"
#include "wick/tensor.hpp"

using namespace wick;

namespace {

double seconds_of(const Device& dev, int reps, const std::function<void()>& f) {
  f();
  synchronize(dev);
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) f();
    synchronize(dev);
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    best = std::min(best, dt.count() / reps);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  // Optional filters: a shape name (1.1B, 7B) and a key count.
  const std::string only_shape = argc > 1 ? argv[1] : "";
  const size_t only_keys = argc > 2 ? std::stoul(argv[2]) : 0;
  const Device dev = Device::gpu(0);
  const DeviceInfo info = device_info(dev);
  std::printf("gpu_attention_decode: %s (%s), %d SMs/CUs\n", info.name.c_str(), info.arch.c_str(), info.compute_units);
  // Copy bandwidth: a 1 GiB f16 tensor copied in place into another (bytes read + written).
  const size_t big = size_t(1) << 29;
  Tensor src = Tensor::ones({big}, DType::F16, dev), dst = Tensor::zeros({big}, DType::F16, dev);
  const double tc = seconds_of(dev, 5, [&] { dst.copy_from(src); });
  const double copy_bw = 2.0 * double(big) * 2 / tc;
  std::printf("device copy bandwidth: %.0f GB/s\n", copy_bw / 1e9);
  src = Tensor();
  dst = Tensor();

  struct Shape {
    const char* what;
    size_t h_q, h_kv, d, layers;
  };
  const Shape shapes[] = {{"1.1B", 32, 4, 64, 22}, {"7B", 32, 32, 128, 8}};
  std::printf("%-5s %7s %9s %10s %9s %8s\n", "shape", "keys", "K/V MiB", "us / call", "GB/s", "% copy");
  for (const Shape& sh : shapes) {
    if (!only_shape.empty() && only_shape != sh.what) continue;
    for (size_t keys : {size_t(512), size_t(2048), size_t(8192)}) {
      if (only_keys && keys != only_keys) continue;
      const size_t cap = keys + 128;  // the cache is longer than what it holds, as in llama-bench -d
      std::vector<Tensor> kc, vc, q, out(sh.layers);
      for (size_t l = 0; l < sh.layers; ++l) {
        kc.push_back(Tensor::randn({1, sh.h_kv, cap, sh.d}, DType::F16, dev, 2 * l + 1));
        vc.push_back(Tensor::randn({1, sh.h_kv, cap, sh.d}, DType::F16, dev, 2 * l + 2));
        q.push_back(Tensor::randn({1, sh.h_q, 1, sh.d}, DType::F16, dev, 1000 + l));
      }
      const Tensor len = Tensor::from_vector(std::vector<int64_t>{int64_t(keys)}, {1}, dev);
      const Graph g = Graph::capture(dev, [&] {
        for (size_t l = 0; l < sh.layers; ++l) out[l] = attention_kv_len(q[l], kc[l], vc[l], len, /*causal=*/true);
      });
      const double t = seconds_of(dev, 50, [&] { g.replay(); }) / double(sh.layers);
      const double bytes = 2.0 * double(sh.h_kv * keys * sh.d) * 2;
      std::printf("%-5s %7zu %9.1f %10.2f %9.0f %7.1f%%\n", sh.what, keys, bytes / 1048576.0, t * 1e6, bytes / t / 1e9,
                  100.0 * bytes / t / copy_bw);
    }
  }
  return 0;
}
