// The KV caches: contiguous per sequence (KvCache: per layer K and V at full capacity, appended in place) and
// paged (PagedKvCache: rows of fixed-size blocks that sequences hold through block tables).
#include "wick/error.hpp"
#include "wick/llm/model.hpp"

namespace wick::llm {

namespace {

// Layer `layer` of one side (K or V) of a cache; who names the cache in the error.
Tensor& layer_of(std::vector<Tensor>& side, size_t layer, const char* who) {
  if (layer >= side.size())
    throw Error(ErrorKind::Index,
                std::string(who) + ": layer " + std::to_string(layer) + " of " + std::to_string(side.size()));
  return side[layer];
}

size_t bytes_of(const std::vector<Tensor>& k, const std::vector<Tensor>& v) {
  size_t n = 0;
  for (const auto* side : {&k, &v})
    for (const Tensor& t : *side) n += t.numel() * dtype_size(t.dtype());
  return n;
}

}  // namespace

KvCache::KvCache(size_t n_layers, size_t n_kv_heads, size_t capacity, size_t head_dim, DType dtype, Device device)
    : capacity_(capacity), dtype_(dtype) {
  if (dtype != DType::F16 && dtype != DType::BF16 && dtype != DType::F32)
    throw Error(ErrorKind::DType, std::string("KvCache: dtype must be f16, bf16 or f32, got ") + dtype_name(dtype));
  if (capacity == 0) throw Error(ErrorKind::Argument, "KvCache: capacity (context length) must be positive");
  k_.reserve(n_layers);
  v_.reserve(n_layers);
  for (size_t l = 0; l < n_layers; ++l) {
    k_.push_back(Tensor::zeros({1, n_kv_heads, capacity, head_dim}, dtype, device));
    v_.push_back(Tensor::zeros({1, n_kv_heads, capacity, head_dim}, dtype, device));
  }
}

size_t KvCache::bytes() const { return bytes_of(k_, v_); }

void KvCache::truncate(size_t n) {
  if (n > pos_)
    throw Error(ErrorKind::Argument,
                "KvCache::truncate: " + std::to_string(n) + " is past the " + std::to_string(pos_) + " tokens held");
  pos_ = n;
}

Tensor& KvCache::k(size_t layer) { return layer_of(k_, layer, "KvCache"); }

Tensor& KvCache::v(size_t layer) { return layer_of(v_, layer, "KvCache"); }

void KvCache::advance(size_t n) {
  if (n > capacity_ - pos_)
    throw Error(ErrorKind::Argument, "KvCache: " + std::to_string(pos_) + " + " + std::to_string(n) +
                                         " tokens overflow the capacity of " + std::to_string(capacity_) +
                                         "; make the cache with a larger max_ctx");
  pos_ += n;
}

PagedKvCache::PagedKvCache(size_t n_layers, size_t n_kv_heads, size_t head_dim, size_t n_blocks, size_t block_tokens,
                           DType dtype, Device device)
    : n_blocks_(n_blocks), block_tokens_(block_tokens), dtype_(dtype) {
  if (dtype != DType::F16 && dtype != DType::BF16 && dtype != DType::F32 && dtype != DType::F8E4M3)
    throw Error(ErrorKind::DType,
                std::string("PagedKvCache: dtype must be f16, bf16, f32 or f8e4m3, got ") + dtype_name(dtype));
  if (n_blocks == 0 || block_tokens == 0)
    throw Error(ErrorKind::Argument, "PagedKvCache: " + std::to_string(n_blocks) + " blocks of " +
                                         std::to_string(block_tokens) + " tokens; both must be positive");
  if (n_blocks > (size_t{1} << 30) / block_tokens)
    throw Error(ErrorKind::Argument, "PagedKvCache: " + std::to_string(n_blocks) + " blocks of " +
                                         std::to_string(block_tokens) + " tokens exceed 2^30 token slots");
  const size_t rows = n_blocks * block_tokens, cols = n_kv_heads * head_dim;
  k_.reserve(n_layers);
  v_.reserve(n_layers);
  for (size_t l = 0; l < n_layers; ++l) {
    k_.push_back(Tensor::zeros({rows, cols}, dtype, device));
    v_.push_back(Tensor::zeros({rows, cols}, dtype, device));
  }
}

size_t PagedKvCache::bytes() const { return bytes_of(k_, v_); }

Tensor& PagedKvCache::k(size_t layer) { return layer_of(k_, layer, "PagedKvCache"); }

Tensor& PagedKvCache::v(size_t layer) { return layer_of(v_, layer, "PagedKvCache"); }

}  // namespace wick::llm
