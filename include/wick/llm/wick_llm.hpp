#pragma once
// The LLM runtime in one include: models, tokenizers, sampling, generation, the batched engine (see docs/llm.md).
#include "wick/llm/engine.hpp"
#include "wick/llm/generate.hpp"
#include "wick/llm/model.hpp"
#include "wick/llm/sampler.hpp"
#include "wick/llm/tokenizer.hpp"
