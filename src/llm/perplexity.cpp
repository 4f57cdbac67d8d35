// Perplexity over a token stream, chunked and scored as llama.cpp's llama-perplexity does (its
// default mode: no stride, one sequence per chunk).
#include <cmath>
#include <string>
#include <vector>

#include "wick/error.hpp"
#include "wick/llm/generate.hpp"

namespace wick::llm {

PerplexityResult perplexity(Model& m, const std::vector<int32_t>& tokens, size_t n_ctx,
                            std::function<void(size_t, size_t)> progress, int32_t bos_id) {
  if (n_ctx < 4)
    throw Error(ErrorKind::Argument,
                "perplexity: a context of " + std::to_string(n_ctx) + " tokens is too small; use --ctx 4 or more");
  if (tokens.size() < 2 * n_ctx)
    throw Error(ErrorKind::Argument, "perplexity: the text is " + std::to_string(tokens.size()) +
                                         " tokens; a context of " + std::to_string(n_ctx) + " needs at least " +
                                         std::to_string(2 * n_ctx) +
                                         " (as llama-perplexity); use a longer text or a smaller --ctx");
  const size_t n_vocab = m.config().vocab_size;
  const size_t n_chunks = tokens.size() / n_ctx;
  const size_t first = n_ctx / 2;            // the first half is context only
  const size_t n_score = n_ctx - first - 1;  // logits first .. n_ctx-2 predict tokens first+1 .. n_ctx-1
  KvCache cache = m.make_cache(n_ctx);
  double nll = 0, nll2 = 0;
  size_t count = 0;
  for (size_t c = 0; c < n_chunks; ++c) {
    std::vector<int32_t> chunk(tokens.begin() + std::ptrdiff_t(c * n_ctx),
                               tokens.begin() + std::ptrdiff_t((c + 1) * n_ctx));
    if (bos_id >= 0) chunk[0] = bos_id;
    for (int32_t id : chunk)
      if (id < 0 || size_t(id) >= n_vocab)
        throw Error(ErrorKind::Index, "perplexity: token id " + std::to_string(id) + " is outside the vocabulary of " +
                                          std::to_string(n_vocab) +
                                          "; the tokens and the model do not belong together");
    cache.clear();
    Tensor logits = m.forward(chunk, cache, true);
    if (logits.rank() != 2 || logits.dim(0) != n_ctx || logits.dim(1) != n_vocab)
      throw Error(ErrorKind::Internal, "perplexity: the model returned logits of shape " + shape_str(logits.shape()) +
                                           ", expected (" + std::to_string(n_ctx) + ", " + std::to_string(n_vocab) +
                                           ")");
    // log p(next token) on the device, then n_score floats to the host.
    std::vector<uint32_t> next(chunk.begin() + std::ptrdiff_t(first + 1), chunk.end());
    Tensor ids = Tensor::from_vector(next, {n_score, 1}, logits.device());
    Tensor lp = logits.narrow(0, first, n_score).to_dtype(DType::F32).log_softmax_last_dim().gather(ids, 1);
    for (float v : lp.to_vector<float>()) {
      nll -= double(v);
      nll2 += double(v) * double(v);
    }
    count += n_score;
    if (progress) progress(c + 1, n_chunks);
  }
  PerplexityResult r;
  r.n_chunks = n_chunks;
  r.n_scored = count;
  r.nll_mean = nll / double(count);
  r.ppl = std::exp(r.nll_mean);
  // llama-perplexity's error estimate: the standard error of the mean nll, scaled by ppl.
  double var = nll2 / double(count) - r.nll_mean * r.nll_mean;
  r.ppl_error = (var > 0 && count > 1) ? std::sqrt(var / double(count - 1)) * r.ppl : 0;
  return r;
}

}  // namespace wick::llm
