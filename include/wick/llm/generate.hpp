#pragma once
// Text generation on a loaded Model: prefill + incremental decode with a host-side Sampler, stop
// conditions, chat templates of the supported families, and perplexity as llama-perplexity computes it.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "wick/llm/model.hpp"
#include "wick/llm/sampler.hpp"
#include "wick/llm/tokenizer.hpp"

namespace wick::llm {

struct GenerateOptions {
  size_t max_new_tokens = 128;
  SamplingParams sampling;
  // Generation stops when the text contains one of these; the text from the stop string on is
  // never passed to the callback (a stop string may span several tokens).
  std::vector<std::string> stop_strings;
  bool stop_at_eog = true;  // stop at an end-of-generation token (Tokenizer::is_eog)
  // KV cache capacity in tokens; 0: prompt + max_new_tokens. Generation stops ("context") when full.
  size_t n_ctx = 0;
  std::optional<DType> cache_dtype;  // default: the model's (f16, bf16 for bf16 models)
};

struct GenerateStats {
  size_t prompt_tokens = 0, generated_tokens = 0;
  size_t decode_steps = 0;    // forwards of one token (generated_tokens - 1 unless stopped early)
  double prompt_seconds = 0;  // the prefill forward, device synchronised
  double gen_seconds = 0;     // the decode forwards and sampling after the prefill
  double prompt_tps() const { return prompt_seconds > 0 ? double(prompt_tokens) / prompt_seconds : 0; }
  double gen_tps() const { return gen_seconds > 0 ? double(decode_steps) / gen_seconds : 0; }
  // "eog", "stop_string", "max_tokens", "callback" or "context"
  std::string stop_reason;
  size_t cache_bytes = 0;  // the KV cache that was allocated
};

// Calls on_token(id, text) for each generated token, text being the UTF-8-complete text it
// completes (may be empty: held back while a stop string or a UTF-8 sequence is incomplete). The
// end-of-generation token that stops generation gets no call; the token that completes a stop
// string gets one with the text before the stop string. Returning false stops. Text still held back
// when generation ends otherwise (an incomplete UTF-8 sequence, the start of a stop string that never
// completed) comes in a last call with id -1. out_ids receives every sampled id (the stopping eog
// too). Error: empty prompt, or a prompt longer than n_ctx.
GenerateStats generate(Model& m, const Tokenizer& t, const std::vector<int32_t>& prompt_ids, const GenerateOptions& o,
                       const std::function<bool(int32_t, const std::string&)>& on_token,
                       std::vector<int32_t>* out_ids = nullptr);

// The same, continuing in a cache the caller holds (prompt_ids go at cache.pos()); for a chat
// that keeps its history. n_ctx and cache_dtype of the options are ignored. The last sampled token
// has not been run through the model, so it is not in the cache: a continuation starts its
// prompt_ids with it.
GenerateStats generate(Model& m, const Tokenizer& t, KvCache& cache, const std::vector<int32_t>& prompt_ids,
                       const GenerateOptions& o, const std::function<bool(int32_t, const std::string&)>& on_token,
                       std::vector<int32_t>* out_ids = nullptr);

struct ChatMessage {
  std::string role, content;  // role: "system", "user" or "assistant"
};

// Which family's format tokenizer.chat_template is (recognised by its distinctive markers):
// "chatml", "llama3", "llama2", "mistral-v1", "mistral-v3", "mistral-v3-tekken", "mistral-v7",
// "zephyr", "phi3" (Phi-3 small/vision, 3.5), "phi3-mini" (Phi-3 mini/medium), "phi4", "gemma"; "" when unknown or
// absent.
std::string detect_chat_template(const std::string& tmpl);

// Renders msgs as the tokenizer's template does (Hugging Face's Jinja semantics), to be encoded with
// encode(text, /*add_special=*/true, /*parse_special=*/true): the leading BOS that the template writes
// is left out when the tokenizer adds one itself, so the prompt holds exactly one. Unknown or absent
// template: "role: content" lines and "assistant:" with a warning in *warning (if given).
std::string apply_chat_template(const Tokenizer& t, const std::vector<ChatMessage>& msgs, bool add_generation_prompt,
                                std::string* warning = nullptr);
// The same for a named format (detect_chat_template's names) with the given template text (for
// default system prompts and dates it holds) and BOS/EOS texts; bos_text is written when non-empty.
std::string render_chat(const std::string& format, const std::string& tmpl, const std::vector<ChatMessage>& msgs,
                        bool add_generation_prompt, const std::string& bos_text, const std::string& eos_text);

struct PerplexityResult {
  double ppl = 0;
  double nll_mean = 0;
  double ppl_error = 0;  // llama-perplexity's estimate: ppl * sqrt(var(nll) / (n_scored - 1))
  size_t n_scored = 0, n_chunks = 0;
};

// As llama-perplexity: tokens (the whole text, encoded with BOS as the tokenizer says) are split
// into floor(n / n_ctx) chunks of n_ctx; each runs from an empty cache with its first token
// replaced by bos_id when bos_id >= 0; the second half of each chunk is scored (the logits at
// n_ctx/2 .. n_ctx-2 against the next tokens), nll from the log-softmax of the f32 logits,
// ppl = exp(mean nll). progress(done_chunks, n_chunks) after each chunk. Error when there are
// fewer than 2 * n_ctx tokens (as llama-perplexity), or n_ctx < 4.
PerplexityResult perplexity(Model& m, const std::vector<int32_t>& tokens, size_t n_ctx,
                            std::function<void(size_t, size_t)> progress = {}, int32_t bos_id = -1);

}  // namespace wick::llm
