#pragma once
// Many sequences at once on one model: continuous batching over a paged KV cache. Requests are
// submitted and cancelled from any thread; one thread calls step(), which runs ONE forward over every
// running sequence (a decode token each, plus chunks of new prompts under a token budget), samples,
// and reports tokens through each request's callback. KV lives in fixed-size blocks of one pool; full
// blocks are shared between prompts with the same prefix and kept after their sequences end until the
// pool needs them; when the pool is full, new requests wait and the youngest running sequence is
// preempted (its KV recomputed later), with the same output it would have had.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "wick/dtype.hpp"
#include "wick/llm/model.hpp"
#include "wick/llm/sampler.hpp"
#include "wick/llm/tokenizer.hpp"

namespace wick::llm {

struct EngineOptions {
  size_t max_seqs = 64;           // sequences running at once
  size_t max_batch_tokens = 512;  // tokens of one step: decode tokens first, then prompt chunks
  size_t block_tokens = 16;       // tokens a KV block holds
  // The pool: kv_blocks blocks if set, else kv_bytes, else kv_fraction of the device's free memory
  // (a GPU) or 4 GiB (the CPU).
  size_t kv_blocks = 0;
  size_t kv_bytes = 0;
  double kv_fraction = 0.9;
  // f16, bf16, f32, or f8e4m3 (8-bit, unscaled: half the memory of f16; its logit error is in docs/llm.md).
  // Default: the model's cache dtype (f16; bf16 for bf16 models).
  std::optional<DType> kv_dtype;
  // Tokens one sequence may reach (prompt and output); 0: the model's context length, at most the pool.
  size_t max_ctx = 0;
  bool prefix_cache = true;
  size_t max_waiting = 0;  // requests waiting at most; 0: no limit. submit() past it is Error(Argument)
  // For tests: after every step, check that the block pool's lists and counts agree and that every block is
  // held exactly as often as the running sequences' block tables name it (Error(Internal) otherwise).
  bool check_every_step = false;
};

// What one call of a request's callback reports: a token and the text it completes (held back while a
// stop string or a UTF-8 sequence is incomplete: may be empty), or, with finished set, the end (the
// held-back text that is plain text after all, the reason, the counts).
struct TokenEvent {
  uint64_t request = 0;
  int32_t token = -1;  // -1 in the finishing event
  std::string text;
  bool finished = false;
  // "stop" (end of generation token or stop string), "length" (max_tokens or the context),
  // "cancelled", or "error" (with error set: the request cannot run, e.g. its prompt exceeds the context).
  std::string finish_reason;
  std::string error;
  size_t prompt_tokens = 0, output_tokens = 0, cached_prompt_tokens = 0;
};

struct Request {
  std::vector<int32_t> prompt;  // token ids, BOS included where the model wants it
  SamplingParams sampling;      // its seed makes the request's samples the same batched or alone
  size_t max_tokens = 128;
  std::vector<std::string> stop;  // output ends before the first of these (never emitted)
  bool ignore_eos = false;        // keep going past end-of-generation tokens
  // Called on the stepping thread for every token and once at the end (finished). Returning false (or
  // throwing) cancels the request.
  std::function<bool(const TokenEvent&)> on_event;
};

// A request's events as a queue that another thread reads (Engine::submit_stream): the stepping thread
// pushes, the reader takes them in order. Dropping the last reference to the stream cancels its request
// at the next token.
class TokenStream {
 public:
  // The next event, waiting at most `timeout`; false when none came in time, or once the finished event
  // has been taken.
  bool next(TokenEvent& e, std::chrono::milliseconds timeout);
  uint64_t id() const { return id_; }

 private:
  friend class Engine;
  void push(const TokenEvent& e);
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<TokenEvent> events_;
  bool done_ = false;  // the finished event was taken
  uint64_t id_ = 0;
};

struct EngineStats {
  size_t running = 0, waiting = 0;
  size_t blocks_total = 0, blocks_used = 0, blocks_free = 0, blocks_cached = 0;
  size_t block_tokens = 0;
  uint64_t steps = 0, prompt_tokens = 0, cached_prompt_tokens = 0, output_tokens = 0, preemptions = 0;
  uint64_t finished = 0, cancelled = 0;
  size_t kv_bytes = 0;
};

class Engine {
 public:
  // The model and the tokenizer must outlive the engine; the KV pool is allocated here (Error(OutOfMemory)
  // when it does not fit, saying how many blocks would).
  Engine(Model& model, const Tokenizer& tokenizer, const EngineOptions& o = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Thread-safe. Error(Argument) for an empty prompt, ids outside the vocabulary, invalid sampling
  // settings, or a full waiting queue. The request's id.
  uint64_t submit(Request r);
  // The same, with the request's events going to the returned stream (r.on_event is not used).
  std::shared_ptr<TokenStream> submit_stream(Request r);
  // Thread-safe; the request ends at the next step with finish_reason "cancelled". Unknown or
  // finished ids are ignored.
  void cancel(uint64_t id);
  // One forward over every running sequence (none when nothing runs). False when there was nothing to
  // do. Call from one thread.
  bool step();
  // Steps until no request is running or waiting.
  void run_until_idle();
  EngineStats stats() const;  // thread-safe
  const EngineOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace wick::llm
