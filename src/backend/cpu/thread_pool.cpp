// The CPU worker pool (see thread_pool.hpp for why it replaces OpenMP regions).
#include "backend/cpu/thread_pool.hpp"

#include "backend/options.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#ifdef __linux__
#include <sched.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace wick::cpu {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// How long an idle worker polls for the next job before it sleeps: long enough to catch the next
// op of a sequence without a futex wake-up, short enough to leave the CPU to other processes.
constexpr auto kSpin = std::chrono::microseconds(50);

thread_local bool t_in_chunk = false;  // nested calls run inline

// A bound on OMP_NUM_THREADS, so that a typo (40000) cannot start tens of thousands of threads.
constexpr size_t kMaxThreads = 1024;

class Pool {
 public:
  explicit Pool(size_t threads) : threads_(threads < 1 ? 1 : threads) {
    for (size_t i = 1; i < threads_; ++i) workers_.emplace_back([this] { worker(); });
  }
  // Never destroyed (see pool()): workers may be running when static destructors run.

  size_t threads() const { return threads_; }

  void run(size_t chunks, void (*fn)(void*, size_t), void* ctx) {
    bool expected = false;
    if (workers_.empty() || chunks < 2 || chunks >= kClosed || t_in_chunk ||
        !busy_.compare_exchange_strong(expected, true)) {
      run_inline(chunks, fn, ctx);
      return;
    }
    // Publish the job. First close the claim word to the new generation with no chunk left
    // (kClosed): a worker that read the last job's word and then reads a field of this job must
    // fail its claim. Without it, a worker holding the old word (last job, next chunk == its
    // count) could claim chunk `old count` of this job before its word is stored, run it, and count
    // it as done, so run() returned while a chunk was still running on a dead ctx (seen on a
    // 16-thread machine: a segfault in the quantized matvec). Then the fields, then the open claim
    // word, then the generation that wakes the workers. seq_cst throughout: a worker that reads a
    // new field value then claims after the closing store in the single total order.
    const uint32_t gen = uint32_t(state_.load() >> 32) + 1;  // wraps
    state_.store((uint64_t(gen) << 32) | kClosed);
    fn_.store(fn);
    ctx_.store(ctx);
    chunks_.store(chunks);
    done_.store(0);
    state_.store(uint64_t(gen) << 32);
    gen_.store(gen);  // seq_cst: pairs with the sleepers_ check below (no lost wake-up)
    if (sleepers_.load() > 0) {
      std::lock_guard<std::mutex> lock(mu_);
      cv_.notify_all();
    }
    work(gen);
    // Wait only for chunks that were claimed: a worker still asleep or not yet scheduled has none.
    auto t0 = std::chrono::steady_clock::now();
    for (unsigned i = 0; done_.load(std::memory_order_acquire) < chunks; ++i) {
      if (i < 4096 || std::chrono::steady_clock::now() - t0 < kSpin)
        cpu_relax();
      else
        std::this_thread::yield();  // a worker was preempted inside a chunk
    }
    std::exception_ptr err;
    {
      std::lock_guard<std::mutex> lock(err_mu_);
      err = std::exchange(err_, nullptr);
    }
    busy_.store(false, std::memory_order_release);
    if (err) std::rethrow_exception(err);
  }

 private:
  static void run_inline(size_t chunks, void (*fn)(void*, size_t), void* ctx) {
    const bool outer = t_in_chunk;
    t_in_chunk = true;
    try {
      for (size_t c = 0; c < chunks; ++c) fn(ctx, c);
    } catch (...) {
      t_in_chunk = outer;
      throw;
    }
    t_in_chunk = outer;
  }

  // Claims and runs chunks of job `gen` until none is left or a newer job replaced it.
  void work(uint32_t gen) {
    t_in_chunk = true;
    for (;;) {
      uint64_t s = state_.load();
      if (uint32_t(s >> 32) != gen) break;
      // Read the job before claiming: if the claim succeeds, the word was still s, so no later
      // job had closed it (see run()) and the fields read were job `gen`'s.
      const size_t c = size_t(uint32_t(s));
      if (c == kClosed) break;
      auto* fn = fn_.load();
      void* ctx = ctx_.load();
      const size_t chunks = chunks_.load();
      if (c >= chunks) break;
      if (!state_.compare_exchange_weak(s, s + 1)) continue;
      try {
        fn(ctx, c);
      } catch (...) {
        std::lock_guard<std::mutex> lock(err_mu_);
        if (!err_) err_ = std::current_exception();
      }
      done_.fetch_add(1, std::memory_order_release);
    }
    t_in_chunk = false;
  }

  void worker() {
    uint32_t seen = 0;
    for (;;) {
      auto t0 = std::chrono::steady_clock::now();
      unsigned i = 0;
      while (gen_.load(std::memory_order_acquire) == seen) {
        cpu_relax();
        if (++i % 64 == 0 && std::chrono::steady_clock::now() - t0 > kSpin) {
          std::unique_lock<std::mutex> lock(mu_);
          sleepers_.fetch_add(1);  // seq_cst: pairs with the gen_ store in run()
          cv_.wait(lock, [&] { return gen_.load() != seen; });
          sleepers_.fetch_sub(1);
          break;
        }
      }
      seen = gen_.load(std::memory_order_acquire);
      work(seen);
    }
  }

  static constexpr uint32_t kClosed = UINT32_MAX;  // claim index of a job being published
  const size_t threads_;
  std::vector<std::thread> workers_;
  std::atomic<bool> busy_{false};   // a caller has the pool
  std::atomic<uint64_t> state_{0};  // generation << 32 | next chunk to claim
  std::atomic<uint32_t> gen_{0};    // the workers wait for it to change
  std::atomic<void (*)(void*, size_t)> fn_{nullptr};
  std::atomic<void*> ctx_{nullptr};
  std::atomic<size_t> chunks_{0};
  std::atomic<size_t> done_{0};  // chunks finished
  std::atomic<int> sleepers_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::mutex err_mu_;
  std::exception_ptr err_;
};

Pool& pool() {
  static Pool* p = new Pool(default_threads());
  return *p;
}

}  // namespace

size_t pool_threads() { return pool().threads(); }

size_t default_threads() {
  if (const size_t n = backend::options().cpu_threads; n >= 1) return n;  // OMP_NUM_THREADS
#ifdef __linux__
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n >= 1) return size_t(n);
  }  // fails (EINVAL) beyond CPU_SETSIZE CPUs: then every CPU of the machine
#endif
  const unsigned hc = std::thread::hardware_concurrency();  // 0 when unknown
  return hc >= 1 ? size_t(hc) : 1;
}

void parallel_chunks(size_t chunks, void (*fn)(void*, size_t), void* ctx) { pool().run(chunks, fn, ctx); }

}  // namespace wick::cpu
