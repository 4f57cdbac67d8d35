// The CPU backend's machinery below the ops: the vectorised exp kernel (every ISA this CPU has)
// and the worker pool. Expected exp values come from the f64 std::exp (libm), not from the kernel.
#include <sched.h>

#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "backend/cpu/strided.hpp"
#include "backend/cpu/thread_pool.hpp"
#include "backend/options.hpp"
#include "backend/cpu/vec_math.hpp"
#include "test_util.hpp"

using namespace wick;
using namespace wick::cpu;

namespace {

std::vector<VecIsa> isas() {
  std::vector<VecIsa> v{VecIsa::Generic};
  if (int(best_vec_isa()) >= int(VecIsa::Avx2)) v.push_back(VecIsa::Avx2);
  if (best_vec_isa() == VecIsa::Avx512) v.push_back(VecIsa::Avx512);
  return v;
}

// Inputs over the whole domain: a dense sweep, both ends (overflow, subnormal results,
// underflow), odd lengths for the vector tails, and the special values.
std::vector<float> exp_inputs() {
  std::vector<float> x;
  for (int i = 0; i <= 400000; ++i) x.push_back(-110.0f + 200.0f * float(i) / 400000.0f);
  for (float v = 88.5f; v < 89.5f; v = std::nextafter(v, 100.0f)) x.push_back(v);
  for (float v = -104.5f; v < -86.5f; v += 1.0f / 4096) x.push_back(v);
  for (float v = 1e-30f; v < 1e-3f; v *= 1.37f) x.push_back(v), x.push_back(-v);
  for (float v : {0.0f, -0.0f, 1.0f, -1.0f, 0x1.62e42ep6f, 0x1.62e430p6f, -0x1.9fe368p6f, -0x1.9fe36ap6f, INFINITY,
                  -INFINITY, std::numeric_limits<float>::max(), -std::numeric_limits<float>::max()})
    x.push_back(v);
  x.push_back(NAN);
  x.push_back(7.0f);  // odd length: exercises the tail path
  return x;
}

}  // namespace

TEST(VecExp, WithinOneUlpOnEveryIsa) {
  const std::vector<float> x = exp_inputs();
  for (VecIsa isa : isas()) {
    std::vector<float> y(x.size());
    exp_f32(x.data(), y.data(), x.size(), isa);
    size_t bad = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = std::exp(double(x[i]));
      const float want_f = float(want);  // inf / 0 where f32 overflows / underflows
      if (std::isnan(x[i])) {
        if (!std::isnan(y[i])) ++bad;
      } else if (std::isinf(want_f) || want_f == 0.0f) {
        // glibc's expf overflows above 0x1.62e42ep6 and flushes below -0x1.9fe368p6: the same cut
        if (y[i] != want_f && !(want_f == 0.0f && y[i] <= 0x1p-149f)) ++bad;
      } else {
        const double ulp = std::ldexp(1.0, std::max(std::ilogb(want_f), -126) - 23);
        if (!(std::fabs(double(y[i]) - want) <= ulp)) {
          if (bad++ < 5) ADD_FAILURE() << vec_isa_name(isa) << ": exp(" << x[i] << ") = " << y[i] << ", want " << want;
        }
      }
    }
    EXPECT_EQ(bad, 0u) << vec_isa_name(isa);
  }
}

// AVX2 and AVX-512 fuse the same multiply-adds, so they agree bit for bit; every ISA gives the
// same bits in place, and for any length (vector tails), as over the whole array.
TEST(VecExp, SameBitsOnAvx2AndAvx512AndInPlace) {
  const std::vector<float> x = exp_inputs();
  for (VecIsa isa : isas()) {
    std::vector<float> ref(x.size());
    exp_f32(x.data(), ref.data(), x.size(), isa);
    for (size_t n : {size_t(1), size_t(15), size_t(17), size_t(33), x.size()}) {
      std::vector<float> y(x.begin(), x.begin() + n);
      exp_f32(y.data(), y.data(), n, isa);  // in place
      EXPECT_EQ(std::memcmp(y.data(), ref.data(), n * sizeof(float)), 0) << vec_isa_name(isa) << " n=" << n;
    }
  }
  if (best_vec_isa() != VecIsa::Avx512) GTEST_SKIP() << "no AVX-512 to compare AVX2 with";
  std::vector<float> a(x.size()), b(x.size());
  exp_f32(x.data(), a.data(), x.size(), VecIsa::Avx2);
  exp_f32(x.data(), b.data(), x.size(), VecIsa::Avx512);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

TEST(VecExp, AskingForAMissingIsaIsAnError) {
  if (best_vec_isa() == VecIsa::Avx512) GTEST_SKIP() << "this CPU has every ISA";
  float x = 0, y = 0;
  EXPECT_THROW(exp_f32(&x, &y, 1, VecIsa::Avx512), Error);
}

// Tensor::exp takes the kernel for contiguous and strided f32 and for the half types; the
// result must not depend on the layout.
TEST(VecExp, TensorExpSameForEveryLayout) {
  const size_t r = 300, c = 257;  // odd sizes: runs end off the vector width
  std::vector<float> v(r * c);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(int(i % 2000) - 1000) / 37.0f;
  Tensor t = Tensor::from_vector(v, {r, c});
  std::vector<float> want(v.size());
  exp_f32(v.data(), want.data(), v.size());
  EXPECT_EQ(t.exp().to_vector<float>(), want);
  EXPECT_EQ(wick::test::as_offset(t).exp().to_vector<float>(), want);
  // transposed storage: exp of the transposed view, read back transposed
  Tensor tt = Tensor::from_vector(v, {c, r}).t();  // (r, c) view with strides (1, r)
  std::vector<float> want_t(v.size());
  for (size_t i = 0; i < r; ++i)
    for (size_t j = 0; j < c; ++j) want_t[i * c + j] = want[j * r + i];
  EXPECT_EQ(tt.exp().to_vector<float>(), want_t);
  for (DType d : {DType::F16, DType::BF16}) {
    Tensor h = t.to_dtype(d);
    std::vector<float> hv = h.to_dtype(DType::F32).to_vector<float>();
    std::vector<float> e(hv.size());
    exp_f32(hv.data(), e.data(), hv.size());
    Tensor want_h = Tensor::from_vector(e, {r, c}).to_dtype(d);  // one rounding of the f32 result
    EXPECT_EQ(h.exp().to_dtype(DType::F32).to_vector<float>(), want_h.to_dtype(DType::F32).to_vector<float>());
    EXPECT_EQ(wick::test::as_transposed(h).exp().to_dtype(DType::F32).to_vector<float>(),
              want_h.to_dtype(DType::F32).to_vector<float>());
  }
}

// OMP_NUM_THREADS as OpenMP reads it (a positive integer, optionally the first of a nested list),
// else the CPUs this process may run on; the expected counts are the variable's values and the
// affinity mask that sched_setaffinity is given here.
TEST(ThreadPool, DefaultThreadsFollowsOmpNumThreadsAndAffinity) {
  // OMP_NUM_THREADS as libgomp reads it (the first level; junk ignored), through the options parser.
  auto omp = [](const char* value) {
    return backend::parse_options([&](const char* name) -> const char* {
             return std::string_view(name) == "OMP_NUM_THREADS" ? value : nullptr;
           })
        .cpu_threads;
  };
  EXPECT_EQ(omp("3"), 3u);
  EXPECT_EQ(omp(" 7,2"), 7u);
  EXPECT_EQ(omp("99999"), 1024u);
  EXPECT_EQ(omp(nullptr), 0u);
  for (const char* ignored : {"0", "-2", "two", "4x", ""}) EXPECT_EQ(omp(ignored), 0u) << "'" << ignored << "'";

  const backend::Options saved = backend::options();
  backend::Options o = saved;
  o.cpu_threads = 3;
  backend::set_options(o);
  EXPECT_EQ(default_threads(), 3u);
  o.cpu_threads = 0;  // unset: the CPUs of the affinity mask
  backend::set_options(o);
  cpu_set_t old_set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(old_set), &old_set), 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &old_set)) {
      CPU_SET(c, &one);
      break;
    }
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  EXPECT_EQ(default_threads(), 1u);
  ASSERT_EQ(sched_setaffinity(0, sizeof(old_set), &old_set), 0);
  EXPECT_EQ(default_threads(), size_t(CPU_COUNT(&old_set)));
  backend::set_options(saved);
}

TEST(ThreadPool, EveryChunkRunsOnce) {
  EXPECT_GE(pool_threads(), 1u);
  for (size_t chunks : {0, 1, 2, 3, 16, 1000}) {
    std::vector<std::atomic<int>> hits(chunks);
    auto fn = [](void* p, size_t c) { (*static_cast<std::vector<std::atomic<int>>*>(p))[c].fetch_add(1); };
    for (int rep = 0; rep < 50; ++rep) parallel_chunks(chunks, fn, &hits);
    for (size_t c = 0; c < chunks; ++c) EXPECT_EQ(hits[c].load(), 50) << "chunk " << c << " of " << chunks;
  }
}

TEST(ThreadPool, ParallelForCoversTheRangeOnce) {
  for (size_t n : {size_t(0), size_t(1), size_t(65535), size_t(65536), size_t(1000003)}) {
    std::vector<uint8_t> seen(n, 0);
    parallel_for(n, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) seen[i]++;
    });
    size_t ones = 0;
    for (uint8_t s : seen) ones += s == 1;
    EXPECT_EQ(ones, n) << "n=" << n;
  }
}

TEST(ThreadPool, NestedCallsRunInline) {
  std::atomic<size_t> total{0};
  parallel_for(1 << 20, [&](size_t b, size_t e) {
    parallel_for(
        e - b, [&](size_t b2, size_t e2) { total += e2 - b2; }, 1024);
  });
  EXPECT_EQ(total.load(), size_t(1) << 20);
}

TEST(ThreadPool, ExceptionReachesTheCallerAndThePoolStillWorks) {
  EXPECT_THROW(parallel_for(1 << 20,
                            [](size_t b, size_t) {
                              if (b == 0) throw std::runtime_error("chunk failed");
                            }),
               std::runtime_error);
  std::atomic<size_t> total{0};
  parallel_for(1 << 20, [&](size_t b, size_t e) { total += e - b; });
  EXPECT_EQ(total.load(), size_t(1) << 20);
}

// Back-to-back jobs of different sizes: no chunk may run for a job other than the one it was
// claimed for, nor after parallel_chunks returned. A worker that had read the last job's claim word
// (next chunk == its count) could once claim chunk `count` of the next, larger job before that job's
// word was stored, so run() returned one chunk early while it still ran on the dead ctx (a segfault
// in the quantized matvec on a 16-thread machine). Each job's ctx is poisoned when the call returns;
// a chunk that sees the poison, an index out of range or a second run of its index fails the test.
TEST(ThreadPool, NoChunkOutlivesItsJob) {
  struct Job {
    std::atomic<int> alive{1};
    size_t chunks = 0;
    std::atomic<int> hits[64];
  };
  static std::atomic<int> stray{0};
  stray = 0;
  auto fn = [](void* p, size_t c) {
    Job& j = *static_cast<Job*>(p);
    if (!j.alive.load() || c >= j.chunks || j.hits[c].fetch_add(1) != 0) stray++;
    std::atomic<int> spin{0};  // uneven chunk lengths, so claims interleave differently
    while (spin.fetch_add(1) < int(c % 7) * 20) {
    }
  };
  int wrong = 0;
  for (int rep = 0; rep < 20000; ++rep) {
    Job j;
    j.chunks = 2 + size_t(rep * 7) % 62;  // sizes that alternate up and down
    for (auto& h : j.hits) h = 0;
    parallel_chunks(j.chunks, fn, &j);
    for (size_t c = 0; c < j.chunks; ++c) wrong += j.hits[c].load() != 1;
    j.alive = 0;
  }
  EXPECT_EQ(stray.load(), 0) << "chunks ran outside their job (" << pool_threads() << " threads)";
  EXPECT_EQ(wrong, 0);
}

// Several user threads at once: one gets the pool, the others run their loops inline.
TEST(ThreadPool, ConcurrentCallers) {
  std::vector<std::thread> ts;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&] {
      for (int rep = 0; rep < 100; ++rep) {
        std::atomic<size_t> total{0};
        parallel_for(
            200000, [&](size_t b, size_t e) { total += e - b; }, 4096);
        if (total.load() != 200000) wrong++;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

// Copies and casts of transposed views go by tiles (strided.hpp); expected values by index math.
TEST(StridedMap, TransposedCopiesAndCastsByTiles) {
  for (auto [b, r, c] : {std::array<size_t, 3>{1, 16, 16}, {3, 37, 45}, {2, 300, 70}, {1, 1000, 17}}) {
    std::vector<float> v(b * r * c);
    for (size_t i = 0; i < v.size(); ++i) v[i] = float(i) * 0.5f - 7.0f;
    Tensor x = Tensor::from_vector(v, {b, r, c});
    Tensor xt = x.transpose(1, 2);  // (b, c, r) view: row stride 1, column stride c
    std::vector<float> want(v.size());
    for (size_t k = 0; k < b; ++k)
      for (size_t i = 0; i < c; ++i)
        for (size_t j = 0; j < r; ++j) want[(k * c + i) * r + j] = v[(k * r + j) * c + i];
    EXPECT_EQ(xt.contiguous().to_vector<float>(), want) << b << "x" << r << "x" << c;
    std::vector<double> want_d(want.begin(), want.end());
    EXPECT_EQ(xt.to_dtype(DType::F64).to_vector<double>(), want_d);
    // an offset view: the tiles start from the view's offset
    Tensor xn = x.narrow(2, 1, c - 1).transpose(1, 2);
    std::vector<float> want_n;
    for (size_t k = 0; k < b; ++k)
      for (size_t i = 1; i < c; ++i)
        for (size_t j = 0; j < r; ++j) want_n.push_back(v[(k * r + j) * c + i]);
    EXPECT_EQ(xn.contiguous().to_vector<float>(), want_n);
  }
}

// Gemms big enough to be split into row panels (m >= n) or column panels (m < n), with each
// operand stored plain or transposed; expected values by a naive f64 loop.
TEST(SplitGemm, PanelsMatchNaiveProduct) {
  for (auto [m, k, n] : {std::array<size_t, 3>{70, 90, 65}, {33, 100, 150}, {300, 64, 40}}) {
    std::vector<float> a(m * k), b(k * n);
    for (size_t i = 0; i < a.size(); ++i) a[i] = float(int(i * 7 % 23) - 11) / 8.0f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = float(int(i * 5 % 19) - 9) / 4.0f;
    std::vector<double> want(m * n, 0.0);
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j)
        for (size_t p = 0; p < k; ++p) want[i * n + j] += double(a[i * k + p]) * double(b[p * n + j]);
    std::vector<float> at(k * m), bt(n * k);  // the same matrices stored transposed
    for (size_t i = 0; i < m; ++i)
      for (size_t p = 0; p < k; ++p) at[p * m + i] = a[i * k + p];
    for (size_t p = 0; p < k; ++p)
      for (size_t j = 0; j < n; ++j) bt[j * k + p] = b[p * n + j];
    Tensor A = Tensor::from_vector(a, {m, k}), B = Tensor::from_vector(b, {k, n});
    Tensor At = Tensor::from_vector(at, {k, m}).t(), Bt = Tensor::from_vector(bt, {n, k}).t();
    for (const auto& [x, y] : {std::pair{A, B}, std::pair{At, B}, std::pair{A, Bt}, std::pair{At, Bt}}) {
      EXPECT_TRUE(wick::test::all_close(x.matmul(y), want, 1e-5, 1e-4)) << m << "x" << k << "x" << n;
      EXPECT_TRUE(wick::test::all_close(x.to_dtype(DType::F64).matmul(y.to_dtype(DType::F64)), want, 1e-12, 1e-12));
    }
  }
}
