// The KV cache: per layer K and V preallocated at full capacity, appended in place.
#include "wick/error.hpp"
#include "wick/llm/model.hpp"

namespace wick::llm {

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

size_t KvCache::bytes() const {
  size_t n = 0;
  for (const auto* side : {&k_, &v_})
    for (const Tensor& t : *side) n += t.numel() * dtype_size(t.dtype());
  return n;
}

void KvCache::truncate(size_t n) {
  if (n > pos_)
    throw Error(ErrorKind::Argument,
                "KvCache::truncate: " + std::to_string(n) + " is past the " + std::to_string(pos_) + " tokens held");
  pos_ = n;
}

Tensor& KvCache::k(size_t layer) {
  if (layer >= k_.size())
    throw Error(ErrorKind::Index, "KvCache: layer " + std::to_string(layer) + " of " + std::to_string(k_.size()));
  return k_[layer];
}

Tensor& KvCache::v(size_t layer) {
  if (layer >= v_.size())
    throw Error(ErrorKind::Index, "KvCache: layer " + std::to_string(layer) + " of " + std::to_string(v_.size()));
  return v_[layer];
}

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

size_t PagedKvCache::bytes() const {
  size_t n = 0;
  for (const auto* side : {&k_, &v_})
    for (const Tensor& t : *side) n += t.numel() * dtype_size(t.dtype());
  return n;
}

Tensor& PagedKvCache::k(size_t layer) {
  if (layer >= k_.size())
    throw Error(ErrorKind::Index, "PagedKvCache: layer " + std::to_string(layer) + " of " + std::to_string(k_.size()));
  return k_[layer];
}

Tensor& PagedKvCache::v(size_t layer) {
  if (layer >= v_.size())
    throw Error(ErrorKind::Index, "PagedKvCache: layer " + std::to_string(layer) + " of " + std::to_string(v_.size()));
  return v_[layer];
}

}  // namespace wick::llm
