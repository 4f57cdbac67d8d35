// Greedy generation from a GGUF file with wick's LLM runtime, as a program using the installed
// package would write it. Exits non-zero when the result is wrong: greedy decoding must give the
// same ids twice, its first id must be the argmax of the prompt's logits from Model::forward, and
// the batched engine, running the prompt beside another one, must give the same ids again.
#include <cstdio>
#include <string>
#include <vector>

#include "wick/llm/engine.hpp"
#include "wick/llm/generate.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: llm_generate MODEL.gguf\n");
    return 2;
  }
  try {
    auto model = wick::llm::Model::load(argv[1]);
    const wick::llm::Tokenizer tok = wick::llm::Tokenizer::load(argv[1]);
    wick::llm::GenerateOptions o;
    o.max_new_tokens = 12;
    o.sampling.temperature = 0;  // greedy
    o.stop_at_eog = false;
    o.cache_dtype = wick::DType::F32;  // as the engine's below
    const std::vector<int32_t> prompt = tok.encode("Hello", /*add_special=*/true, /*parse_special=*/false);
    std::vector<int32_t> runs[2];
    std::string text;
    for (auto& ids : runs) {
      text.clear();
      wick::llm::generate(
          *model, tok, prompt, o,
          [&](int32_t, const std::string& t) {
            text += t;
            return true;
          },
          &ids);
    }
    std::printf("%s: %zu prompt ids, %zu generated: %s\n", model->config().arch_name.c_str(), prompt.size(),
                runs[0].size(), text.c_str());
    if (runs[0].size() != o.max_new_tokens || runs[0] != runs[1]) {
      std::fprintf(stderr, "llm_generate: greedy decoding gave different or missing ids\n");
      return 1;
    }
    wick::llm::KvCache cache = model->make_cache(prompt.size());
    const std::vector<float> logits = model->forward(prompt, cache).to_vector<float>();
    size_t best = 0;
    for (size_t i = 1; i < logits.size(); ++i)
      if (logits[i] > logits[best]) best = i;
    if (runs[0][0] != int32_t(best)) {
      std::fprintf(stderr, "llm_generate: the first greedy id %d is not the argmax %zu of the logits\n", runs[0][0],
                   best);
      return 1;
    }
    // The engine: the same prompt beside a second one, in one forward a step.
    wick::llm::EngineOptions eo;
    eo.kv_blocks = 16;
    eo.kv_dtype = wick::DType::F32;
    wick::llm::Engine engine(*model, tok, eo);
    std::vector<int32_t> batched;
    for (const char* text_in : {"Hello", "Once upon a time"}) {
      wick::llm::Request r;
      r.prompt = tok.encode(text_in, /*add_special=*/true, /*parse_special=*/false);
      r.sampling.temperature = 0;
      r.max_tokens = o.max_new_tokens;
      r.ignore_eos = true;
      const bool first = batched.empty() && std::string(text_in) == "Hello";
      r.on_event = [&batched, first](const wick::llm::TokenEvent& e) {
        if (first && !e.finished) batched.push_back(e.token);
        return true;
      };
      engine.submit(std::move(r));
    }
    engine.run_until_idle();
    if (batched != runs[0]) {
      std::fprintf(stderr, "llm_generate: the engine gave other ids than generate\n");
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llm_generate: %s\n", e.what());
    return 1;
  }
  return 0;
}
