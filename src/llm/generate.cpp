// Generation: one prefill forward over the prompt, then one forward per token. The sampler's chain
// runs on the host; from a GPU only the top-k candidates of each row of logits are copied.
#include "wick/llm/generate.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "stop_matcher.hpp"
#include "wick/device.hpp"
#include "wick/error.hpp"

namespace wick::llm {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

Tensor logits_row(const Tensor& logits, size_t n_vocab) {
  if (logits.rank() != 2 || logits.dim(0) != 1 || logits.dim(1) != n_vocab || logits.dtype() != DType::F32)
    throw Error(ErrorKind::Internal, "generate: the model returned logits of shape " + shape_str(logits.shape()) + " " +
                                         dtype_name(logits.dtype()) + ", expected (1, " + std::to_string(n_vocab) +
                                         ") f32");
  return logits;
}

}  // namespace

GenerateStats generate(Model& m, const Tokenizer& t, KvCache& cache, const std::vector<int32_t>& prompt_ids,
                       const GenerateOptions& o, const std::function<bool(int32_t, const std::string&)>& on_token,
                       std::vector<int32_t>* out_ids) {
  if (prompt_ids.empty())
    throw Error(ErrorKind::Argument, "generate: the prompt is empty; pass at least one token (e.g. the BOS id)");
  if (cache.pos() + prompt_ids.size() > cache.capacity())
    throw Error(ErrorKind::Argument, "generate: a prompt of " + std::to_string(prompt_ids.size()) +
                                         " tokens at position " + std::to_string(cache.pos()) +
                                         " does not fit a KV cache of " + std::to_string(cache.capacity()) +
                                         " tokens; raise the context (--ctx, GenerateOptions::n_ctx) or shorten the "
                                         "prompt");
  const size_t n_vocab = m.config().vocab_size;
  Sampler sampler(o.sampling);
  StreamDecoder decoder(t);
  detail::StopMatcher stop(o.stop_strings);
  std::vector<int32_t> history = prompt_ids;  // for the repetition penalty
  GenerateStats st;
  st.prompt_tokens = prompt_ids.size();
  st.cache_bytes = cache.bytes();

  auto t0 = Clock::now();
  Tensor row = logits_row(m.forward(prompt_ids, cache, false), n_vocab);
  synchronize(m.device());
  st.prompt_seconds = since(t0);

  auto t1 = Clock::now();
  bool flush = true;  // whether held-back text is passed on at the end
  if (o.max_new_tokens == 0) st.stop_reason = "max_tokens";
  while (st.stop_reason.empty()) {
    const int32_t id = sampler.sample(row, history);
    history.push_back(id);
    if (out_ids) out_ids->push_back(id);
    ++st.generated_tokens;
    if (o.stop_at_eog && t.is_eog(id)) {
      st.stop_reason = "eog";
      break;
    }
    // Models may pad their vocabulary past the tokenizer's (Qwen2: 151936 rows, 151665 tokens):
    // such an id has no text.
    const bool has_text = size_t(id) < t.vocab_size();
    std::string piece = stop.push(has_text ? decoder.push(id) : std::string());
    const bool keep = on_token ? on_token(id, piece) : true;
    if (stop.stopped()) {
      st.stop_reason = "stop_string";
      flush = false;
    } else if (!keep) {
      st.stop_reason = "callback";
      flush = false;
    } else if (st.generated_tokens >= o.max_new_tokens) {
      st.stop_reason = "max_tokens";
    } else if (cache.pos() >= cache.capacity()) {
      st.stop_reason = "context";
    } else {
      row = logits_row(m.forward({id}, cache, false), n_vocab);
      ++st.decode_steps;
    }
  }
  if (flush) {
    // An incomplete UTF-8 sequence, or text that began a stop string that never completed.
    std::string tail = stop.push(decoder.flush());
    if (!stop.stopped())
      tail += stop.finish();
    else
      st.stop_reason = "stop_string";
    if (!tail.empty() && on_token) on_token(-1, tail);
  }
  synchronize(m.device());
  st.gen_seconds = since(t1);
  return st;
}

GenerateStats generate(Model& m, const Tokenizer& t, const std::vector<int32_t>& prompt_ids, const GenerateOptions& o,
                       const std::function<bool(int32_t, const std::string&)>& on_token,
                       std::vector<int32_t>* out_ids) {
  if (prompt_ids.empty())
    throw Error(ErrorKind::Argument, "generate: the prompt is empty; pass at least one token (e.g. the BOS id)");
  size_t n_ctx = o.n_ctx ? o.n_ctx : prompt_ids.size() + std::max<size_t>(o.max_new_tokens, 1);
  if (prompt_ids.size() > n_ctx)
    throw Error(ErrorKind::Argument, "generate: the prompt is " + std::to_string(prompt_ids.size()) +
                                         " tokens, more than the context of " + std::to_string(n_ctx) +
                                         "; raise the context (--ctx, GenerateOptions::n_ctx) or shorten the prompt");
  KvCache cache = m.make_cache(n_ctx, o.cache_dtype);
  return generate(m, t, cache, prompt_ids, o, on_token, out_ids);
}

}  // namespace wick::llm
