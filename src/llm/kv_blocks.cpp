// The paged KV cache's block pool and prefix cache (kv_blocks.hpp).
#include "kv_blocks.hpp"

#include <algorithm>
#include <string>

#include "wick/error.hpp"

namespace wick::llm::detail {

namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

constexpr uint64_t kRootHash = 0x6b76626c6f636b73ull;

}  // namespace

KvBlockPool::KvBlockPool(size_t n_blocks, size_t block_tokens) : block_tokens_(block_tokens) {
  if (block_tokens == 0) throw Error(ErrorKind::Argument, "KvBlockPool: block_tokens must be positive");
  if (n_blocks == 0 || n_blocks > (size_t{1} << 30))
    throw Error(ErrorKind::Argument,
                "KvBlockPool: " + std::to_string(n_blocks) + " blocks; give between 1 and 2^30 blocks");
  blocks_.resize(n_blocks);
  tokens_.resize(n_blocks * block_tokens);
  for (size_t b = 0; b < n_blocks; ++b) push_back(free_, static_cast<int32_t>(b));
  n_free_ = n_blocks;
}

uint64_t KvBlockPool::chain_hash(uint64_t parent_hash, std::span<const int32_t> tokens) const {
  uint64_t h = mix(parent_hash ^ 0x9e3779b97f4a7c15ull);
  for (int32_t t : tokens) h = mix(h ^ static_cast<uint32_t>(t));
  return h;
}

void KvBlockPool::push_back(List& l, int32_t b) {
  Block& x = blocks_[static_cast<size_t>(b)];
  x.prev = l.tail;
  x.next = -1;
  if (l.tail >= 0)
    blocks_[static_cast<size_t>(l.tail)].next = b;
  else
    l.head = b;
  l.tail = b;
}

void KvBlockPool::unlink(List& l, int32_t b) {
  Block& x = blocks_[static_cast<size_t>(b)];
  if (x.prev >= 0)
    blocks_[static_cast<size_t>(x.prev)].next = x.next;
  else
    l.head = x.next;
  if (x.next >= 0)
    blocks_[static_cast<size_t>(x.next)].prev = x.prev;
  else
    l.tail = x.prev;
  x.prev = x.next = -1;
}

void KvBlockPool::unpublish(int32_t b) {
  Block& x = blocks_[static_cast<size_t>(b)];
  if (!x.published) return;
  auto it = by_hash_.find(x.hash);
  if (it != by_hash_.end() && it->second == b) by_hash_.erase(it);
  x.published = false;
}

std::vector<int32_t> KvBlockPool::match_prefix(std::span<const int32_t> tokens) {
  ++queries_;
  std::vector<int32_t> out;
  uint64_t h = kRootHash;
  int32_t parent = -1;
  for (size_t at = 0; at + block_tokens_ <= tokens.size(); at += block_tokens_) {
    const std::span<const int32_t> part = tokens.subspan(at, block_tokens_);
    h = chain_hash(h, part);
    auto it = by_hash_.find(h);
    if (it == by_hash_.end()) break;
    const int32_t b = it->second;
    const Block& x = blocks_[static_cast<size_t>(b)];
    const bool same_parent =
        x.parent == parent && (parent < 0 || blocks_[static_cast<size_t>(parent)].generation == x.parent_generation);
    if (!same_parent || !std::equal(part.begin(), part.end(), tokens_of(b))) break;
    retain(b);
    out.push_back(b);
    parent = b;
  }
  hits_ += out.size();
  return out;
}

int32_t KvBlockPool::allocate() {
  int32_t b = free_.head;
  if (b >= 0) {
    unlink(free_, b);
    --n_free_;
  } else {
    b = cached_.head;
    if (b < 0) return -1;
    unlink(cached_, b);
    --n_cached_;
    unpublish(b);
    ++evictions_;
  }
  Block& x = blocks_[static_cast<size_t>(b)];
  x.refs = 1;
  ++x.generation;
  x.parent = -1;
  return b;
}

void KvBlockPool::retain(int32_t block) {
  if (block < 0 || static_cast<size_t>(block) >= blocks_.size())
    throw Error(ErrorKind::Index,
                "KvBlockPool::retain: block " + std::to_string(block) + " of " + std::to_string(blocks_.size()));
  Block& x = blocks_[static_cast<size_t>(block)];
  if (x.refs == 0) {
    if (!x.published)
      throw Error(ErrorKind::Argument, "KvBlockPool::retain: block " + std::to_string(block) + " is free");
    unlink(cached_, block);
    --n_cached_;
  }
  ++x.refs;
}

void KvBlockPool::release(int32_t block) {
  if (block < 0 || static_cast<size_t>(block) >= blocks_.size())
    throw Error(ErrorKind::Index,
                "KvBlockPool::release: block " + std::to_string(block) + " of " + std::to_string(blocks_.size()));
  Block& x = blocks_[static_cast<size_t>(block)];
  if (x.refs <= 0)
    throw Error(ErrorKind::Argument, "KvBlockPool::release: block " + std::to_string(block) + " is not held");
  if (--x.refs > 0) return;
  if (x.published) {
    push_back(cached_, block);
    ++n_cached_;
  } else {
    push_back(free_, block);
    ++n_free_;
  }
}

void KvBlockPool::publish(int32_t block, std::span<const int32_t> prefix, std::span<const int32_t> tokens) {
  if (block < 0 || static_cast<size_t>(block) >= blocks_.size() || blocks_[static_cast<size_t>(block)].refs <= 0)
    throw Error(ErrorKind::Argument, "KvBlockPool::publish: block " + std::to_string(block) + " is not held");
  if (tokens.size() != block_tokens_)
    throw Error(ErrorKind::Argument, "KvBlockPool::publish: " + std::to_string(tokens.size()) +
                                         " tokens; a published block is full (" + std::to_string(block_tokens_) + ")");
  Block& x = blocks_[static_cast<size_t>(block)];
  if (x.published) return;
  // The chain hash of the prefix: the predecessor's, which must be published itself (else this block can
  // never be reached by match_prefix, which walks from the first block).
  uint64_t parent_hash = kRootHash;
  int32_t parent = -1;
  if (!prefix.empty()) {
    parent = prefix.back();
    const Block& p = blocks_.at(static_cast<size_t>(parent));
    if (!p.published) return;
    parent_hash = p.hash;
  }
  const uint64_t h = chain_hash(parent_hash, tokens);
  if (by_hash_.count(h)) return;  // an equal block (or a colliding one) is already published
  x.published = true;
  x.hash = h;
  x.parent = parent;
  x.parent_generation = parent >= 0 ? blocks_[static_cast<size_t>(parent)].generation : 0;
  std::copy(tokens.begin(), tokens.end(), tokens_.begin() + static_cast<std::ptrdiff_t>(block * block_tokens_));
  by_hash_.emplace(h, block);
}

KvBlockStats KvBlockPool::stats() const {
  KvBlockStats s;
  s.total = blocks_.size();
  s.free = n_free_;
  s.cached = n_cached_;
  s.used = s.total - s.free - s.cached;
  s.prefix_queries = queries_;
  s.prefix_hit_blocks = hits_;
  s.evictions = evictions_;
  return s;
}

void KvBlockPool::check() const {
  auto fail = [](const std::string& what) { throw Error(ErrorKind::Internal, "KvBlockPool::check: " + what); };
  std::vector<int> in_list(blocks_.size(), 0);
  auto walk = [&](const List& l, int tag, size_t expect) {
    size_t n = 0;
    int32_t prev = -1;
    for (int32_t b = l.head; b >= 0; b = blocks_[static_cast<size_t>(b)].next) {
      if (++n > blocks_.size()) fail("a list has a cycle");
      if (blocks_[static_cast<size_t>(b)].prev != prev) fail("block " + std::to_string(b) + "'s back link");
      if (in_list[static_cast<size_t>(b)]) fail("block " + std::to_string(b) + " in two lists");
      in_list[static_cast<size_t>(b)] = tag;
      prev = b;
    }
    if (prev != l.tail) fail("a list's tail");
    if (n != expect) fail("a list holds " + std::to_string(n) + " blocks, its count says " + std::to_string(expect));
  };
  walk(free_, 1, n_free_);
  walk(cached_, 2, n_cached_);
  size_t published = 0;
  for (size_t b = 0; b < blocks_.size(); ++b) {
    const Block& x = blocks_[b];
    if (x.refs < 0) fail("block " + std::to_string(b) + " held a negative number of times");
    if ((x.refs > 0) != (in_list[b] == 0)) fail("block " + std::to_string(b) + " is held and listed, or neither");
    if (in_list[b] == 1 && x.published) fail("free block " + std::to_string(b) + " is published");
    if (in_list[b] == 2 && !x.published) fail("cached block " + std::to_string(b) + " is not published");
    if (x.published) {
      ++published;
      auto it = by_hash_.find(x.hash);
      if (it == by_hash_.end() || it->second != static_cast<int32_t>(b))
        fail("published block " + std::to_string(b) + " missing from the hash map");
    }
  }
  if (published != by_hash_.size()) fail("the hash map holds blocks that are not published");
}

}  // namespace wick::llm::detail
