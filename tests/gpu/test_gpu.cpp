// GPU-only checks that the parity harness (wick check) cannot express: devices, memory,
// errors raised on the device, 64-bit indexing, and random numbers equal to the CPU's.
// Built only with -DWICK_GPU=cuda|rocm; run on a machine with a GPU.
#include <cmath>

#include "test_util.hpp"

using namespace wick;
using wick::test::all_close;
using wick::test::values;

namespace {

Device gpu() { return Device::gpu(0); }

TEST(GpuDevice, InfoAndBest) {
  Device d = gpu();
  EXPECT_TRUE(d.is_gpu());
  EXPECT_EQ(Device::best(), d);
  DeviceInfo info = device_info(d);
  EXPECT_FALSE(info.name.empty());
  EXPECT_FALSE(info.arch.empty());
  EXPECT_GT(info.total_memory, size_t(1) << 30);
  EXPECT_TRUE(info.warp_size == 32 || info.warp_size == 64);
  EXPECT_THROW(Device::gpu(999), Error);
}

TEST(GpuMemory, StatsFollowTensorsAndCacheIsReused) {
  Device d = gpu();
  MemoryStats before = memory_stats(d);
  {
    Tensor t = Tensor::zeros({1 << 20}, DType::F32, d);  // 4 MiB
    MemoryStats during = memory_stats(d);
    EXPECT_GE(during.in_use, before.in_use + (size_t(4) << 20));
  }
  MemoryStats after = memory_stats(d);
  EXPECT_EQ(after.in_use, before.in_use);
  EXPECT_GE(after.cached, size_t(4) << 20);
  empty_cache(d);
  EXPECT_EQ(memory_stats(d).cached, 0u);
}

TEST(GpuMemory, OutOfMemoryIsAnError) {
  Device d = gpu();
  try {
    Tensor t = Tensor::zeros({size_t(1) << 50}, DType::U8, d);  // 1 PiB
    FAIL() << "allocating 1 PiB succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::OutOfMemory);
    EXPECT_NE(std::string(e.what()).find("bytes"), std::string::npos);
  }
  // the device is still usable
  EXPECT_EQ(Tensor::ones({3}, DType::I32, d).to_vector<int32_t>(), (std::vector<int32_t>{1, 1, 1}));
}

TEST(GpuCopy, RoundTripEveryDType) {
  for (DType dt : kAllDTypes) {
    Tensor h = Tensor::arange(0, 50, 1, DType::F32).to_dtype(dt).reshape({5, 10});
    Tensor g = h.to_device(gpu());
    EXPECT_EQ(g.device(), gpu());
    EXPECT_TRUE(all_close(g.to_device(Device::cpu()), values(h), 0, 0)) << dtype_name(dt);
    EXPECT_TRUE(all_close(g.t().contiguous(), values(h.t().contiguous()), 0, 0)) << dtype_name(dt);
  }
}

TEST(GpuErrors, MixedDevicesAndBadIndices) {
  Tensor a = Tensor::ones({4}, DType::F32, gpu());
  Tensor b = Tensor::ones({4}, DType::F32);
  EXPECT_THROW(a.add(b), Error);
  Tensor ids = Tensor::from_vector(std::vector<int64_t>{0, 7}, {2}).to_device(gpu());
  try {
    a.index_select(ids, 0);
    FAIL() << "out-of-range id accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Index);
  }
  // a failed in-place scatter leaves the destination unchanged
  Tensor dst = Tensor::zeros({2, 3}, DType::F32, gpu());
  Tensor bad = Tensor::from_vector(std::vector<int64_t>{0, 1, 5}, {1, 3}).to_device(gpu());
  Tensor src = Tensor::ones({1, 3}, DType::F32, gpu());
  EXPECT_THROW(dst.scatter_set(bad, src, 0), Error);
  EXPECT_EQ(dst.to_vector<float>(), std::vector<float>(6, 0.0f));
  // the device is still usable after the error
  EXPECT_EQ(a.sum_all().to_vector<float>()[0], 4.0f);
}

TEST(GpuRandom, SameNumbersAsTheCpu) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
    Tensor c = Tensor::rand({1000}, dt, Device::cpu(), 11, -2.0, 5.0);
    Tensor g = Tensor::rand({1000}, dt, gpu(), 11, -2.0, 5.0);
    EXPECT_TRUE(all_close(g, values(c), 0, 0)) << dtype_name(dt);  // exact: same f64 arithmetic
    Tensor cn = Tensor::randn({1000}, dt, Device::cpu(), 12);
    Tensor gn = Tensor::randn({1000}, dt, gpu(), 12);
    // log/cos of the device libm may differ from glibc's in the last f64 bit
    EXPECT_TRUE(all_close(gn, values(cn), dt == DType::F64 ? 1e-14 : wick::test::rtol_for(dt), 1e-14))
        << dtype_name(dt);
  }
}

TEST(GpuLarge, SixtyFourBitIndexing) {
  // more than 2^31 elements: kernels must index with 64 bits
  const size_t n = (size_t(1) << 31) + 100;
  Tensor t = Tensor::cat({Tensor::zeros({n - 50}, DType::U8, gpu()), Tensor::full({50}, 3, DType::U8, gpu())}, 0);
  ASSERT_EQ(t.numel(), n);
  Tensor tail = t.narrow(0, n - 60, 60);
  std::vector<uint8_t> v = tail.to_vector<uint8_t>();
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(v[i], 0) << i;
  for (size_t i = 10; i < 60; ++i) EXPECT_EQ(v[i], 3) << i;
  Tensor s = t.affine(2, 1);  // element-wise kernel over 2^31 + 100 elements
  std::vector<uint8_t> w = s.narrow(0, n - 60, 60).to_vector<uint8_t>();
  EXPECT_EQ(w[0], 1);
  EXPECT_EQ(w[59], 7);
  EXPECT_EQ(s.to_dtype(DType::F32).narrow(0, 0, 1).to_vector<float>()[0], 1.0f);
}

// Rows past one tile (4096 positions, 2048 for 8-byte keys) take the merge passes: lengths that leave
// a last run shorter than its partner (5000, 70000) or alone (4097 with 2048 tiles), a power of two
// (32768), every key width (u8, f16, f32, i64/f64: 1- to 8-byte keys), many ties (the index order
// among equal keys), and a strided view.
TEST(GpuSort, LongRowsMatchTheCpu) {
  for (size_t n : {size_t(1), size_t(1000), size_t(4097), size_t(5000), size_t(32768), size_t(70000)})
    for (DType dt : {DType::F32, DType::F16, DType::I64, DType::U8, DType::F64}) {
      const double spread = dt == DType::U8 ? 40 : 10;
      Tensor x = Tensor::randn({3, n}, DType::F32, Device::cpu(), 5).affine(spread, 0).round();  // many ties
      if (dt == DType::U8) x = x.abs();
      x = x.to_dtype(dt);
      for (bool asc : {true, false}) {
        Tensor c = x.arg_sort_last_dim(asc);
        Tensor g = x.to_device(gpu()).arg_sort_last_dim(asc);
        EXPECT_EQ(g.to_vector<uint32_t>(), c.to_vector<uint32_t>())
            << n << " " << dtype_name(dt) << (asc ? " asc" : " desc");
      }
    }
  Tensor x = Tensor::randn({6000, 3}, DType::F32, Device::cpu(), 6).affine(10, 0).round();
  EXPECT_EQ(x.to_device(gpu()).t().arg_sort_last_dim(true).to_vector<uint32_t>(),
            x.t().arg_sort_last_dim(true).to_vector<uint32_t>())
      << "transposed (3, 6000)";
}

// top_k: the kernel's bounded gather (k <= 512), its radix select (larger k, or too many keys at
// the bound) and the whole sort (k > 1024) against the CPU, on
// rows of logit-like values (clustered top bytes), rows with many ties (ties cross the k-th place),
// a NaN, halves, a strided view and many rows.
TEST(GpuSort, TopKMatchesTheCpu) {
  auto check = [](const Tensor& x, size_t k, const std::string& what) {
    auto c = x.top_k_last_dim(k);
    auto g = x.to_device(gpu()).top_k_last_dim(k);
    EXPECT_EQ(g.second.to_vector<uint32_t>(), c.second.to_vector<uint32_t>()) << what << " k " << k;
    EXPECT_TRUE(test::all_close(g.first.to_device(Device::cpu()), test::values(c.first), 0, 0)) << what << " k " << k;
  };
  for (size_t n : {size_t(1), size_t(100), size_t(32000), size_t(152064)}) {
    Tensor logits = Tensor::randn({2, n}, DType::F32, Device::cpu(), 7).affine(3, 1);
    Tensor ties = Tensor::randn({2, n}, DType::F32, Device::cpu(), 8).affine(2, 0).round();
    for (size_t k : {size_t(1), size_t(40), size_t(1024), size_t(1500)}) {
      if (k > n) continue;
      check(logits, k, "logits " + std::to_string(n));
      check(ties, k, "ties " + std::to_string(n));
      check(ties.to_dtype(DType::F16), k, "f16 ties " + std::to_string(n));
    }
  }
  Tensor x = Tensor::randn({5, 300}, DType::F32, Device::cpu(), 9).affine(2, 0).round();
  std::vector<float> h = x.to_vector<float>();
  h[2 * 300 + 17] = std::nanf("");
  x = Tensor::from_data(h.data(), {5, 300}, DType::F32);
  check(x, 7, "nan row");
  check(x.t(), 3, "transposed");
  check(Tensor::randn({700, 50}, DType::BF16, Device::cpu(), 10), 9, "many rows");
  check(Tensor::arange(0, 4096, 1, DType::I64), 100, "i64");
  // Every key equal: the bound of the threads' smallest keys keeps the whole row (more than fits),
  // so the radix select runs, with ties across the k-th place; k = 600 goes there directly.
  check(Tensor::zeros({2, 5000}, DType::F32), 40, "all equal");
  check(Tensor::randn({2, 5000}, DType::F32, Device::cpu(), 12), 600, "k above the block");
}

// The sampler's tensor entry on a GPU row: the ids of the whole-row host chain (test_util.cpp).
TEST(GpuSampler, TopKCandidatesDrawTheHostIds) { test::expect_sampler_paths_agree(gpu(), 32000); }

TEST(GpuReduce, ArgOpsOverAnyDimMatchTheCpu) {
  Tensor x = Tensor::randn({37, 129, 5}, DType::F32, Device::cpu(), 9).affine(4, 0).round();
  Tensor g = x.to_device(gpu());
  for (int64_t d : {0, 1, 2}) {
    EXPECT_EQ(g.argmax(d).to_vector<uint32_t>(), x.argmax(d).to_vector<uint32_t>()) << d;
    EXPECT_EQ(g.argmin(d).to_vector<uint32_t>(), x.argmin(d).to_vector<uint32_t>()) << d;
  }
}

// The fused nn ops refuse a CPU operand beside a GPU one (each checks every operand's device).
TEST(GpuErrors, NnOpsRefuseMixedDevices) {
  Tensor a = Tensor::zeros({2, 4}, DType::F32), g = a.to_device(gpu());
  EXPECT_THROW(a.silu_mul(g), Error);
  EXPECT_THROW(a.rms_norm(Tensor::ones({4}, DType::F32, gpu()), 1e-5), Error);
  EXPECT_THROW(a.layer_norm(Tensor(), Tensor::ones({4}, DType::F32, gpu()), 1e-5), Error);
  Tensor q = Tensor::zeros({1, 2, 3, 4}, DType::F32);
  EXPECT_THROW(attention(q, q.to_device(gpu()), q), Error);
  Tensor x = Tensor::zeros({1, 2, 3, 4}, DType::F32), cs = Tensor::zeros({3, 2}, DType::F32);
  EXPECT_THROW(x.rope(cs.to_device(gpu()), cs), Error);
}

// Rows longer than the parity cases reach: softmax's two-pass online kernel (>= 16384 columns,
// vector and scalar loads) and the norms' re-reading kernel, with -inf, NaN and all -inf rows.
TEST(GpuNn, LongRowsMatchTheCpu) {
  for (size_t n : {size_t(16384), size_t(20001), size_t(40000)}) {
    std::vector<float> v(4 * n);
    Tensor r = Tensor::randn({4 * n}, DType::F32, Device::cpu(), 11).affine(8, 0);
    std::vector<float> rv = r.to_vector<float>();
    for (size_t i = 0; i < 4 * n; ++i) v[i] = rv[i];
    for (size_t j = 0; j < n / 2; ++j) v[n + j] = -INFINITY;  // row 1: a -inf first half
    v[2 * n + n - 1] = NAN;                                    // row 2: a NaN at the end
    for (size_t j = 0; j < n; ++j) v[3 * n + j] = -INFINITY;  // row 3: nothing finite -> NaN
    Tensor x = Tensor::from_vector(v, {4, n});
    for (DType d : {DType::F32, DType::F16}) {
      Tensor xc = x.to_dtype(d), xg = xc.to_device(gpu());
      const double tol = d == DType::F32 ? 1e-5 : 2e-3;
      EXPECT_TRUE(all_close(xg.softmax_last_dim(), values(xc.softmax_last_dim()), tol, 1e-7)) << n;
      EXPECT_TRUE(all_close(xg.log_softmax_last_dim(), values(xc.log_softmax_last_dim()), tol, tol)) << n;
      Tensor xf = xc.narrow(0, 0, 1);  // finite rows only for the norms
      // f32 norms: the CPU and GPU sum 40000 squares in different orders (relative ~1e-5 apart,
      // seen on an H200), and b + (x - mean) * rstd * w cancels to small values.
      const double ntol = d == DType::F32 ? 1e-4 : tol;
      Tensor w = Tensor::randn({n}, d, Device::cpu(), 12);
      EXPECT_TRUE(all_close(xf.to_device(gpu()).rms_norm(w.to_device(gpu()), 1e-5), values(xf.rms_norm(w, 1e-5)), ntol,
                            ntol))
          << n;
      EXPECT_TRUE(all_close(xf.to_device(gpu()).layer_norm(w.to_device(gpu()), w.to_device(gpu()), 1e-5),
                            values(xf.layer_norm(w, w, 1e-5)), ntol, ntol))
          << n;
    }
  }
}

}  // namespace
