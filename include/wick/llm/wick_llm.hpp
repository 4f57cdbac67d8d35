#pragma once
// The LLM runtime in one include: models, tokenizers, sampling, generation (see docs/llm.md).
#include "wick/llm/generate.hpp"
#include "wick/llm/model.hpp"
#include "wick/llm/sampler.hpp"
#include "wick/llm/tokenizer.hpp"
