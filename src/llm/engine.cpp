// The batched engine (wick/llm/engine.hpp): the scheduler over KvBlockPool and Model::forward_batch.
//
// A sequence is its tokens (prompt, then each sampled token) and how many of them the cache holds
// (done). A step gives each running sequence its next tokens: one (the last sampled) when only that one
// is missing, else a chunk of the rest; the forward returns logits where a chunk reaches the last known
// token, and the sequence samples from them. A preempted sequence gives back its blocks and starts again
// at done = 0 with its tokens and sampler as they were: the recomputed chunks return no logits until
// they reach its last token, so its output continues exactly where it stopped.
#include "wick/llm/engine.hpp"

#include <unistd.h>

#include <algorithm>
#include <deque>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv_blocks.hpp"
#include "model_impl.hpp"
#include "stop_matcher.hpp"
#include "wick/device.hpp"
#include "wick/error.hpp"

namespace wick::llm {

namespace {

struct Sequence {
  uint64_t id = 0;
  uint64_t admitted = 0;  // admission order: the youngest is preempted first
  Request req;
  std::vector<int32_t> tokens;  // prompt, then sampled tokens
  size_t prompt_len = 0, done = 0, cached = 0;
  std::vector<int32_t> blocks;
  size_t published = 0;  // leading blocks offered to the prefix cache
  Sampler sampler;
  StreamDecoder decoder;
  detail::StopMatcher stop;
  size_t generated = 0;
  bool cancelled = false;

  Sequence(uint64_t i, Request r, const Tokenizer& t)
      : id(i),
        req(std::move(r)),
        tokens(req.prompt),
        prompt_len(req.prompt.size()),
        sampler(req.sampling),
        decoder(t),
        stop(req.stop) {}
};

}  // namespace

struct Engine::Impl {
  Model& model;
  const Tokenizer& tok;
  EngineOptions o;
  size_t max_ctx = 0;
  detail::KvBlockPool pool;
  PagedKvCache cache;

  mutable std::mutex mu;  // guards inbox, cancels, next_id, stats
  std::vector<std::unique_ptr<Sequence>> inbox;
  std::vector<uint64_t> cancels;
  uint64_t next_id = 1;
  EngineStats st;

  // The stepping thread's own.
  std::deque<std::unique_ptr<Sequence>> waiting;
  std::vector<std::unique_ptr<Sequence>> running;
  uint64_t admissions = 0;

  Impl(Model& m, const Tokenizer& t, const EngineOptions& opt, size_t n_blocks, DType dt)
      : model(m),
        tok(t),
        o(opt),
        pool(n_blocks, opt.block_tokens),
        cache(m.make_paged_cache(n_blocks, opt.block_tokens, dt)) {
    const size_t pool_tokens = n_blocks * opt.block_tokens;
    max_ctx = o.max_ctx ? o.max_ctx : m.config().max_position;
    if (max_ctx == 0) max_ctx = pool_tokens;
    max_ctx = std::min(max_ctx, pool_tokens);
  }

  void emit_end(Sequence& s, const std::string& reason, const std::string& error, std::string tail = "") {
    TokenEvent e;
    e.request = s.id;
    e.text = std::move(tail);
    e.finished = true;
    e.finish_reason = reason;
    e.error = error;
    e.prompt_tokens = s.prompt_len;
    e.output_tokens = s.generated;
    e.cached_prompt_tokens = s.cached;
    call(s, e);
  }

  // A callback that throws cancels its request; the engine goes on.
  static bool call(Sequence& s, const TokenEvent& e) {
    if (!s.req.on_event) return true;
    try {
      return s.req.on_event(e);
    } catch (...) {
      return false;
    }
  }

  void release_blocks(Sequence& s) {
    for (int32_t b : s.blocks) pool.release(b);
    s.blocks.clear();
    s.published = 0;
  }

  // Ends a running or waiting sequence: its blocks go back; the callback hears why.
  void finish(Sequence& s, const std::string& reason, const std::string& error = "", bool flush = false) {
    std::string tail;
    if (flush) {
      tail = s.stop.push(s.decoder.flush());
      if (!s.stop.stopped()) tail += s.stop.finish();
    }
    release_blocks(s);
    emit_end(s, reason, error, std::move(tail));
    std::lock_guard<std::mutex> lk(mu);
    ++st.finished;
    if (reason == "cancelled") ++st.cancelled;
  }

  void take_inbox() {
    std::vector<std::unique_ptr<Sequence>> in;
    std::vector<uint64_t> cs;
    {
      std::lock_guard<std::mutex> lk(mu);
      in.swap(inbox);
      cs.swap(cancels);
    }
    for (auto& s : in) {
      if (s->req.max_tokens == 0) {  // nothing to generate: it ends before running, as generate() does
        finish(*s, "length");
        continue;
      }
      waiting.push_back(std::move(s));
    }
    for (uint64_t id : cs) {
      for (auto& s : running)
        if (s->id == id) s->cancelled = true;
      for (auto& s : waiting)
        if (s->id == id) s->cancelled = true;
    }
  }

  void drop_cancelled() {
    auto drop = [&](auto& list) {
      for (size_t i = 0; i < list.size();) {
        if (list[i]->cancelled) {
          finish(*list[i], "cancelled");
          list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
          ++i;
        }
      }
    };
    drop(running);
    drop(waiting);
  }

  struct Planned {
    Sequence* s;
    size_t take;  // tokens this step
  };

  // Gives back s's blocks (s running); it waits at the front to be recomputed.
  void preempt(Sequence* s, std::vector<Planned>& plan, size_t& budget) {
    for (size_t i = 0; i < plan.size(); ++i)
      if (plan[i].s == s) {
        budget += plan[i].take;
        plan.erase(plan.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
    auto it = std::find_if(running.begin(), running.end(), [&](const auto& p) { return p.get() == s; });
    std::unique_ptr<Sequence> own = std::move(*it);
    running.erase(it);
    release_blocks(*own);
    own->done = 0;
    waiting.push_front(std::move(own));
    std::lock_guard<std::mutex> lk(mu);
    ++st.preemptions;
  }

  Sequence* youngest() const {
    Sequence* y = nullptr;
    for (const auto& r : running)
      if (!y || r->admitted > y->admitted) y = r.get();
    return y;
  }

  // Blocks for s's first `need` tokens. A running s takes them, when the pool has none, from the youngest
  // running sequence; false when that is s itself (or s is not running and the pool is short).
  bool grow(Sequence& s, size_t need, bool running_s, std::vector<Planned>& plan, size_t& budget) {
    while (s.blocks.size() * o.block_tokens < need) {
      const int32_t b = pool.allocate();
      if (b >= 0) {
        s.blocks.push_back(b);
        continue;
      }
      Sequence* y = running_s ? youngest() : nullptr;
      if (!y || y == &s) return false;
      preempt(y, plan, budget);
    }
    return true;
  }

  // Moves waiting sequences into the running set while there is room for their next chunk.
  void admit(std::vector<Planned>& plan, size_t& budget) {
    while (!waiting.empty() && running.size() < o.max_seqs && budget > 0) {
      Sequence& s = *waiting.front();
      const size_t total = s.tokens.size();
      if (total > max_ctx) {  // only a prompt can be this long: an output stops at the context
        std::unique_ptr<Sequence> gone = std::move(waiting.front());
        waiting.pop_front();
        finish(*gone, "error",
               "the prompt is " + std::to_string(total) + " tokens, more than the context of " +
                   std::to_string(max_ctx) + " tokens this engine gives a sequence");
        continue;
      }
      if (s.blocks.empty() && o.prefix_cache) {
        // The cache may hold the prefix; the last token is always computed (its logits are needed).
        s.blocks = pool.match_prefix(std::span<const int32_t>(s.tokens).first(total - 1));
        s.done = s.blocks.size() * o.block_tokens;
        s.published = s.blocks.size();
        if (s.generated == 0) {
          s.cached = s.done;
          std::lock_guard<std::mutex> lk(mu);
          st.cached_prompt_tokens += s.done;
        }
      }
      const size_t take = std::min(budget, total - s.done);
      if (!grow(s, s.done + take, false, plan, budget)) {
        release_blocks(s);  // hold nothing while waiting: the pool may need the prefix blocks
        s.done = 0;
        break;
      }
      s.admitted = ++admissions;
      plan.push_back({&s, take});
      running.push_back(std::move(waiting.front()));
      waiting.pop_front();
      budget -= take;
    }
  }

  // After a forward: every block that is now full goes to the prefix cache.
  void publish(Sequence& s) {
    if (!o.prefix_cache) return;
    const size_t bt = o.block_tokens;
    while (s.published < s.done / bt) {
      pool.publish(s.blocks[s.published], std::span<const int32_t>(s.blocks).first(s.published),
                   std::span<const int32_t>(s.tokens).subspan(s.published * bt, bt));
      ++s.published;
    }
  }

  // Samples s's next token from its logits row; false when s has ended.
  bool sample(Sequence& s, const float* logits, size_t vocab) {
    const int32_t id = s.sampler.sample(logits, vocab, s.tokens);
    s.tokens.push_back(id);
    ++s.generated;
    {
      std::lock_guard<std::mutex> lk(mu);
      ++st.output_tokens;
    }
    if (!s.req.ignore_eos && tok.is_eog(id)) {
      finish(s, "stop", "", true);
      return false;
    }
    const bool has_text = size_t(id) < tok.vocab_size();
    TokenEvent e;
    e.request = s.id;
    e.token = id;
    e.text = s.stop.push(has_text ? s.decoder.push(id) : std::string());
    e.prompt_tokens = s.prompt_len;
    e.output_tokens = s.generated;
    e.cached_prompt_tokens = s.cached;
    const bool keep = call(s, e);
    if (s.stop.stopped()) {
      finish(s, "stop");
      return false;
    }
    if (!keep) {
      finish(s, "cancelled");
      return false;
    }
    if (s.generated >= s.req.max_tokens || s.tokens.size() >= max_ctx) {
      finish(s, "length", "", true);
      return false;
    }
    return true;
  }

  bool step() {
    take_inbox();
    drop_cancelled();
    size_t budget = o.max_batch_tokens;
    std::vector<Planned> plan;
    // Decode tokens first (sequences missing only their last token), then the chunks of prompts and
    // recomputations, oldest first; then new admissions.
    std::sort(running.begin(), running.end(), [](const auto& a, const auto& b) { return a->admitted < b->admitted; });
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<Sequence*> order;
      for (const auto& r : running)
        if ((pass == 0) == (r->tokens.size() - r->done == 1)) order.push_back(r.get());
      for (Sequence* s : order) {
        if (budget == 0) break;
        if (std::none_of(running.begin(), running.end(), [&](const auto& r) { return r.get() == s; }))
          continue;  // preempted for an older sequence's blocks
        const size_t take = std::min(s->tokens.size() - s->done, budget);
        if (!grow(*s, s->done + take, true, plan, budget)) {
          preempt(s, plan, budget);  // the youngest: it waits, holding nothing
          continue;
        }
        plan.push_back({s, take});
        budget -= take;
      }
    }
    admit(plan, budget);
    if (plan.empty()) {
      refresh_stats();
      return !waiting.empty();
    }
    std::vector<BatchSeq> batch;
    batch.reserve(plan.size());
    for (const Planned& p : plan) {
      Sequence& s = *p.s;
      BatchSeq b;
      b.tokens = std::span<const int32_t>(s.tokens).subspan(s.done, p.take);
      b.pos0 = s.done;
      b.blocks = s.blocks;
      b.logits = s.done + p.take == s.tokens.size();
      batch.push_back(b);
    }
    std::vector<float> rows;
    try {
      rows = model.forward_batch(batch, cache).to_vector<float>();
    } catch (const std::exception& e) {
      // The step's requests end with the error (out of device or host memory, say); the others go on.
      for (const Planned& p : plan) {
        finish(*p.s, "error", e.what());
        running.erase(std::find_if(running.begin(), running.end(), [&](const auto& r) { return r.get() == p.s; }));
      }
      refresh_stats();
      return true;
    }
    const size_t vocab = model.config().vocab_size;
    size_t row = 0;
    std::vector<Sequence*> ended;
    for (size_t k = 0; k < plan.size(); ++k) {
      Sequence& s = *plan[k].s;
      if (s.generated == 0) {
        std::lock_guard<std::mutex> lk(mu);
        st.prompt_tokens += plan[k].take;
      }
      s.done += plan[k].take;
      publish(s);
      if (!batch[k].logits) continue;
      if (!sample(s, rows.data() + row * vocab, vocab)) ended.push_back(&s);
      ++row;
    }
    for (Sequence* s : ended)
      running.erase(std::find_if(running.begin(), running.end(), [&](const auto& p) { return p.get() == s; }));
    {
      std::lock_guard<std::mutex> lk(mu);
      ++st.steps;
    }
    refresh_stats();
    return true;
  }

  void check() const {
    pool.check();
    std::unordered_map<int32_t, int> holders;
    for (const auto& r : running) {
      if (r->blocks.size() * o.block_tokens < r->done)
        throw Error(ErrorKind::Internal, "Engine: request " + std::to_string(r->id) + " has " +
                                             std::to_string(r->done) + " tokens cached in " +
                                             std::to_string(r->blocks.size()) + " blocks");
      for (int32_t b : r->blocks) ++holders[b];
    }
    for (const auto& w : waiting)
      if (!w->blocks.empty())
        throw Error(ErrorKind::Internal, "Engine: waiting request " + std::to_string(w->id) + " holds blocks");
    size_t used = 0;
    for (const auto& [b, n] : holders) {
      if (pool.refs(b) != n)
        throw Error(ErrorKind::Internal, "Engine: block " + std::to_string(b) + " is held " +
                                             std::to_string(pool.refs(b)) + " times, named by " + std::to_string(n) +
                                             " block tables");
      if (n > 1 && !pool.published(b))
        throw Error(ErrorKind::Internal, "Engine: private block " + std::to_string(b) + " is in two block tables");
      ++used;
    }
    if (used != pool.stats().used)
      throw Error(ErrorKind::Internal, "Engine: " + std::to_string(pool.stats().used) + " blocks held, " +
                                           std::to_string(used) + " named by block tables");
  }

  void refresh_stats() {
    if (o.check_every_step) check();
    const detail::KvBlockStats b = pool.stats();
    std::lock_guard<std::mutex> lk(mu);
    st.running = running.size();
    st.waiting = waiting.size() + inbox.size();
    st.blocks_total = b.total;
    st.blocks_used = b.used;
    st.blocks_free = b.free;
    st.blocks_cached = b.cached;
  }
};

namespace {

// Memory a pool may take: on a GPU what wick's allocator does not hold of the device's; on the CPU the
// physical memory.
size_t memory_free(const Device& d) {
  if (d.is_gpu()) {
    const size_t total = device_info(d).total_memory, held = memory_stats(d).in_use;
    return total > held ? total - held : 0;
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? size_t(pages) * size_t(page) : 0;
}

size_t pool_blocks(const Model& m, const EngineOptions& o, DType dt) {
  if (o.block_tokens == 0 || o.block_tokens > 1024)
    throw Error(ErrorKind::Argument,
                "Engine: block_tokens " + std::to_string(o.block_tokens) + " must be between 1 and 1024");
  if (o.max_seqs == 0 || o.max_batch_tokens == 0)
    throw Error(ErrorKind::Argument, "Engine: max_seqs and max_batch_tokens must be positive");
  const size_t block_bytes = o.block_tokens * m.kv_bytes_per_token(dt);
  const size_t free = memory_free(m.device());
  size_t bytes = o.kv_blocks ? o.kv_blocks * block_bytes : o.kv_bytes;
  if (!o.kv_blocks && !o.kv_bytes) {
    if (!(o.kv_fraction > 0 && o.kv_fraction <= 1))
      throw Error(ErrorKind::Argument, "Engine: kv_fraction " + std::to_string(o.kv_fraction) +
                                           " must be in (0, 1]; or give kv_bytes or kv_blocks");
    bytes = m.device().is_gpu() ? static_cast<size_t>(o.kv_fraction * double(free)) : std::min(size_t{4} << 30, free);
  }
  if (free != 0 && bytes > free)
    throw Error(ErrorKind::OutOfMemory, "Engine: a KV pool of " + detail::gib(bytes) + " does not fit the " +
                                            detail::gib(free) + " free on " + m.device().name() + "; at most " +
                                            std::to_string(free / block_bytes) + " blocks of " +
                                            std::to_string(o.block_tokens) +
                                            " tokens fit (less, leaving room for "
                                            "activations): lower kv_blocks, kv_bytes or kv_fraction");
  const size_t n = bytes / block_bytes;
  if (n == 0)
    throw Error(ErrorKind::OutOfMemory, "Engine: " + std::to_string(bytes) + " bytes of KV memory hold no block of " +
                                            std::to_string(block_bytes) + " bytes; give the KV cache more memory");
  return n;
}

}  // namespace

Engine::Engine(Model& model, const Tokenizer& tokenizer, const EngineOptions& o) {
  const DType dt = o.kv_dtype.value_or(model.dtype() == DType::BF16 ? DType::BF16 : DType::F16);
  const size_t n = pool_blocks(model, o, dt);
  impl_ = std::make_unique<Impl>(model, tokenizer, o, n, dt);
  impl_->st.block_tokens = o.block_tokens;
  impl_->st.kv_bytes = impl_->cache.bytes();
  impl_->refresh_stats();
}

Engine::~Engine() = default;

uint64_t Engine::submit(Request r) {
  const Impl& m = *impl_;
  if (r.prompt.empty())
    throw Error(ErrorKind::Argument, "Engine::submit: the prompt is empty; pass at least one token (e.g. BOS)");
  detail::check_token_ids(r.prompt, m.model.config().vocab_size, "Engine::submit");
  (void)Sampler(r.sampling);  // throws for invalid settings, naming the field
  std::lock_guard<std::mutex> lk(impl_->mu);
  if (m.o.max_waiting && impl_->st.waiting + impl_->inbox.size() >= m.o.max_waiting)
    throw Error(ErrorKind::Argument, "Engine::submit: " + std::to_string(m.o.max_waiting) +
                                         " requests are already waiting; try again later");
  const uint64_t id = impl_->next_id++;
  impl_->inbox.push_back(std::make_unique<Sequence>(id, std::move(r), m.tok));
  ++impl_->st.waiting;
  return id;
}

void TokenStream::push(const TokenEvent& e) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    events_.push_back(e);
  }
  cv_.notify_one();
}

bool TokenStream::next(TokenEvent& e, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  if (done_) return false;
  if (!cv_.wait_for(lk, timeout, [&] { return !events_.empty(); })) return false;
  e = std::move(events_.front());
  events_.pop_front();
  done_ = e.finished;
  return true;
}

std::shared_ptr<TokenStream> Engine::submit_stream(Request r) {
  auto stream = std::make_shared<TokenStream>();
  std::weak_ptr<TokenStream> weak = stream;
  r.on_event = [weak](const TokenEvent& e) {
    const std::shared_ptr<TokenStream> s = weak.lock();
    if (!s) return false;  // nobody reads it any more: cancel
    s->push(e);
    return true;
  };
  stream->id_ = submit(std::move(r));
  return stream;
}

void Engine::cancel(uint64_t id) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  for (auto& s : impl_->inbox)
    if (s->id == id) s->cancelled = true;
  impl_->cancels.push_back(id);
}

bool Engine::step() { return impl_->step(); }

void Engine::run_until_idle() {
  while (true) {
    const bool did = impl_->step();
    const EngineStats s = stats();
    if (!did && s.running == 0 && s.waiting == 0) return;
  }
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->st;
}

const EngineOptions& Engine::options() const { return impl_->o; }

}  // namespace wick::llm
