#pragma once
// The bookkeeping of a paged KV cache: which of a pool's fixed-size blocks each sequence holds, and the
// prefix cache. A full block that a sequence has written is published under the hash of its token prefix
// (its own tokens chained to the previous block's, as vLLM), so a later prompt with the same prefix takes
// it instead of recomputing it; a published block whose sequences have all ended stays cached until the
// pool needs it back (least recently released first). A sequence only ever writes its own last, partial
// block; published blocks are full and read-only, so sharing them needs no copy.
//
// A hit is exact, not only a hash match: the block's tokens are compared and its predecessor must be the
// block matched just before it (the same block, not evicted and reused since), so a hash collision costs
// a miss, never another prompt's keys.
#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace wick::llm::detail {

struct KvBlockStats {
  size_t total = 0;
  size_t used = 0;    // held by at least one sequence
  size_t cached = 0;  // held by none, published: a later prefix may take it; evicted when the pool needs it
  size_t free = 0;    // held by none, holding nothing
  uint64_t prefix_queries = 0, prefix_hit_blocks = 0, evictions = 0;
};

class KvBlockPool {
 public:
  // A block of 16 tokens: one tensor-core tile of rows; the table of a 32K-token sequence stays 2,048
  // entries; a sequence wastes at most 15 token slots; and a prefix is shared at 16-token steps.
  static constexpr size_t kDefaultBlockTokens = 16;

  KvBlockPool(size_t n_blocks, size_t block_tokens = kDefaultBlockTokens);
  size_t n_blocks() const { return blocks_.size(); }
  size_t block_tokens() const { return block_tokens_; }
  // Blocks allocate() can give now: free ones and cached ones it may evict.
  size_t available() const { return n_free_ + n_cached_; }

  // The longest run of published blocks holding tokens' first full blocks (tokens.size() / block_tokens of
  // them at most), each now held once more by the caller. A caller that must still compute the last token
  // passes the prompt without it.
  std::vector<int32_t> match_prefix(std::span<const int32_t> tokens);
  // A block held once by the caller, holding nothing: a free one, else the least recently released cached
  // one (unpublished). -1 when every block is held.
  int32_t allocate();
  void retain(int32_t block);
  // One hold fewer; at none a published block becomes cached, another one free.
  void release(int32_t block);
  // Block `block`, held by the caller, now holds the KV of `tokens` (block_tokens of them) after the blocks
  // `prefix` of the same sequence (prefix.back() its predecessor; empty for a sequence's first block). It is
  // published unless an equal block already is (then it stays private: freed on release).
  void publish(int32_t block, std::span<const int32_t> prefix, std::span<const int32_t> tokens);

  int refs(int32_t block) const { return blocks_.at(static_cast<size_t>(block)).refs; }
  bool published(int32_t block) const { return blocks_.at(static_cast<size_t>(block)).published; }
  KvBlockStats stats() const;
  // Throws wick::Error when the pool's lists, counts and hash map disagree (for tests).
  void check() const;

 private:
  struct Block {
    int refs = 0;
    bool published = false;
    uint32_t generation = 0;  // bumped whenever the block is given out anew: a stale predecessor shows
    uint64_t hash = 0;
    int32_t parent = -1;  // the predecessor when published, and its generation then
    uint32_t parent_generation = 0;
    int32_t prev = -1, next = -1;  // in the free or the cached list
  };
  struct List {
    int32_t head = -1, tail = -1;
  };
  uint64_t chain_hash(uint64_t parent_hash, std::span<const int32_t> tokens) const;
  void push_back(List& l, int32_t b);
  void unlink(List& l, int32_t b);
  void unpublish(int32_t b);
  const int32_t* tokens_of(int32_t b) const { return &tokens_[static_cast<size_t>(b) * block_tokens_]; }

  size_t block_tokens_;
  std::vector<Block> blocks_;
  std::vector<int32_t> tokens_;  // a published block's tokens, block_tokens_ per block
  std::unordered_map<uint64_t, int32_t> by_hash_;
  List free_, cached_;  // cached_: least recently released first
  size_t n_free_ = 0, n_cached_ = 0;
  uint64_t queries_ = 0, hits_ = 0, evictions_ = 0;
};

}  // namespace wick::llm::detail
