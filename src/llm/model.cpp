// Model::load: which file kind, which family, and the error messages for running out of memory.
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "archs.hpp"
#include "model_impl.hpp"
#include "wick/error.hpp"

namespace fs = std::filesystem;

namespace wick::llm {

std::string detail::gib(size_t bytes) {
  char b[64];
  std::snprintf(b, sizeof b, "%.2f GiB", double(bytes) / double(1ull << 30));
  return b;
}

void detail::check_token_ids(std::span<const int32_t> ids, size_t vocab, const std::string& who) {
  for (int32_t id : ids)
    if (id < 0 || size_t(id) >= vocab)
      throw Error(ErrorKind::Index, who + ": token id " + std::to_string(id) + " is outside the vocabulary (" +
                                        std::to_string(vocab) + " tokens)");
}

namespace {

std::unique_ptr<Model> load_impl(const std::string& path, const LoadOptions& o) {
  std::error_code ec;
  fs::path p(path);
  if (fs::is_regular_file(p, ec) && p.filename() == "config.json") p = p.parent_path();
  if (fs::is_directory(p, ec)) {
    const fs::path cfg = p / "config.json";
    if (!fs::exists(cfg, ec))
      throw Error(ErrorKind::Io, "Model::load: " + p.string() +
                                     " is a directory without config.json; give a .gguf file or a Hugging Face "
                                     "model directory");
    const ModelConfig c = detail::config_from_hf(cfg.string());
    const detail::ArchInfo& arch = detail::arch_info(c.arch);
    auto src = detail::open_hf_weights(p.string(), c.arch);
    detail::check_required_tensors(arch, c, *src);
    return arch.build(c, *src, o, {});
  }
  if (!fs::exists(p, ec)) throw Error(ErrorKind::Io, "Model::load: no such file or directory: " + path);
  const GGUFFile f = GGUFFile::open(path);
  const ModelConfig c = detail::config_from_gguf(f, path);
  std::vector<float> factors;
  if (f.contains("rope_freqs.weight")) {
    const Tensor t = f.load("rope_freqs.weight").to_dtype(DType::F32);
    if (t.numel() != c.rope_dim / 2)
      throw Error(ErrorKind::Shape, "model (" + path + "): rope_freqs.weight has " + std::to_string(t.numel()) +
                                        " values, expected rope_dim / 2 = " + std::to_string(c.rope_dim / 2));
    factors = t.to_vector<float>();
    for (float v : factors)
      if (!(v > 0) || !std::isfinite(v))
        throw Error(ErrorKind::Io, "model (" + path + "): rope_freqs.weight holds a non-positive or non-finite value");
  }
  const detail::ArchInfo& arch = detail::arch_info(c.arch);
  auto src = detail::open_gguf_weights(f, path);
  detail::check_required_tensors(arch, c, *src);
  return arch.build(c, *src, o, std::move(factors));
}

}  // namespace

std::unique_ptr<Model> Model::load(const std::string& path, const LoadOptions& o) {
  try {
    return load_impl(path, o);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::OutOfMemory) throw;
    throw Error(ErrorKind::OutOfMemory, "Model::load: out of memory on " + o.device.name() + " loading " + path + " (" +
                                            e.what() +
                                            "); use a smaller quantization (e.g. Q4_K_M), a smaller compute dtype "
                                            "(f16), or another device");
  }
}

KvCache Model::make_cache(size_t max_ctx, std::optional<DType> dtype) const {
  const DType dt = dtype.value_or(default_cache_dtype_);
  const size_t need = 2 * config_.n_layers * config_.n_kv_heads * max_ctx * config_.head_dim * dtype_size(dt);
  try {
    return KvCache(config_.n_layers, config_.n_kv_heads, max_ctx, config_.head_dim, dt, device_);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::OutOfMemory) throw;
    throw Error(ErrorKind::OutOfMemory, "Model::make_cache: a KV cache of " + std::to_string(max_ctx) +
                                            " tokens needs " + detail::gib(need) + " on " + device_.name() + " (" +
                                            e.what() + "); lower the context (--ctx)");
  }
}

size_t Model::kv_bytes_per_token(DType dtype) const {
  return 2 * config_.n_layers * config_.n_kv_heads * config_.head_dim * dtype_size(dtype);
}

PagedKvCache Model::make_paged_cache(size_t n_blocks, size_t block_tokens, std::optional<DType> dtype) const {
  const DType dt = dtype.value_or(default_cache_dtype_);
  try {
    return PagedKvCache(config_.n_layers, config_.n_kv_heads, config_.head_dim, n_blocks, block_tokens, dt, device_);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::OutOfMemory) throw;
    throw Error(ErrorKind::OutOfMemory, "Model::make_paged_cache: " + std::to_string(n_blocks) + " blocks of " +
                                            std::to_string(block_tokens) + " tokens need " +
                                            detail::gib(n_blocks * block_tokens * kv_bytes_per_token(dt)) + " on " +
                                            device_.name() + " (" + e.what() + "); give the KV cache less memory");
  }
}

Tensor Model::forward_batch(const std::vector<BatchSeq>&, PagedKvCache&) {
  throw Error(ErrorKind::Unsupported, "Model::forward_batch: this model has no batched forward");
}

}  // namespace wick::llm
