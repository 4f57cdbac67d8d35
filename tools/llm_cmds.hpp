#pragma once
// `wick run`, `wick perplexity`, `wick bench-llm` and `wick bench-batch`: the LLM runtime's subcommands. Each add_*
// declares its subcommand on root and returns it with the body main() runs after a clean parse.
#include <CLI/CLI.hpp>
#include <functional>
#include <utility>

namespace wick::cli {

using LlmCommand = std::pair<CLI::App*, std::function<int()>>;

LlmCommand add_run(CLI::App& root);
LlmCommand add_perplexity(CLI::App& root);
LlmCommand add_bench_llm(CLI::App& root);
LlmCommand add_bench_batch(CLI::App& root);

}  // namespace wick::cli
