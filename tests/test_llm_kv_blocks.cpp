// The paged KV cache's block pool and prefix cache (src/llm/kv_blocks.hpp): holding and releasing
// blocks, exact prefix hits, least-recently-released eviction, and a randomized run of sequences
// arriving, growing, sharing prefixes and ending, with the pool's invariants checked at every step.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "llm/kv_blocks.hpp"
#include "wick/error.hpp"

using wick::llm::detail::KvBlockPool;

namespace {

std::vector<int32_t> iota_tokens(size_t n, int32_t from) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = from + static_cast<int32_t>(i);
  return t;
}

// Allocates and publishes a sequence's full blocks as an engine would after writing their KV.
std::vector<int32_t> write_sequence(KvBlockPool& pool, const std::vector<int32_t>& tokens) {
  std::vector<int32_t> table;
  const size_t bt = pool.block_tokens();
  for (size_t at = 0; at < tokens.size(); at += bt) {
    const int32_t b = pool.allocate();
    EXPECT_GE(b, 0);
    if (at + bt <= tokens.size()) pool.publish(b, table, std::span<const int32_t>(tokens).subspan(at, bt));
    table.push_back(b);
  }
  return table;
}

TEST(KvBlocks, HoldsUntilExhaustedThenRefuses) {
  KvBlockPool pool(4, 16);
  std::vector<int32_t> got;
  for (int i = 0; i < 4; ++i) got.push_back(pool.allocate());
  EXPECT_EQ(pool.allocate(), -1);
  EXPECT_EQ(pool.stats().used, 4u);
  EXPECT_EQ(pool.available(), 0u);
  pool.release(got[2]);
  EXPECT_EQ(pool.stats().free, 1u);
  EXPECT_EQ(pool.allocate(), got[2]);
  for (int32_t b : got) pool.release(b);
  EXPECT_EQ(pool.stats().free, 4u);
  pool.check();
  EXPECT_THROW(pool.release(got[0]), wick::Error);  // not held
  EXPECT_THROW(pool.release(7), wick::Error);       // not a block
  EXPECT_THROW(KvBlockPool(0, 16), wick::Error);
  EXPECT_THROW(KvBlockPool(4, 0), wick::Error);
}

TEST(KvBlocks, PrefixHitsAreExactFullBlocks) {
  KvBlockPool pool(16, 4);
  const std::vector<int32_t> a = iota_tokens(10, 100);  // blocks [100..103] [104..107], then 2 tokens
  const std::vector<int32_t> table = write_sequence(pool, a);
  ASSERT_EQ(table.size(), 3u);
  EXPECT_TRUE(pool.published(table[0]));
  EXPECT_TRUE(pool.published(table[1]));
  EXPECT_FALSE(pool.published(table[2]));  // partial

  // While a still runs: the same prefix is shared (held twice).
  std::vector<int32_t> hit = pool.match_prefix(a);
  EXPECT_EQ(hit, (std::vector<int32_t>{table[0], table[1]}));
  EXPECT_EQ(pool.refs(table[0]), 2);
  for (int32_t b : hit) pool.release(b);

  // After a ends: cached, then taken again by a prompt that shares only the first block.
  for (int32_t b : table) pool.release(b);
  EXPECT_EQ(pool.stats().cached, 2u);
  EXPECT_EQ(pool.stats().free, 14u);
  std::vector<int32_t> b = iota_tokens(12, 100);
  b[5] = -7;  // differs inside the second block
  hit = pool.match_prefix(b);
  EXPECT_EQ(hit, (std::vector<int32_t>{table[0]}));
  EXPECT_EQ(pool.stats().cached, 1u);
  // A prompt shorter than a block, or differing in its first token, shares nothing.
  EXPECT_TRUE(pool.match_prefix(iota_tokens(3, 100)).empty());
  EXPECT_TRUE(pool.match_prefix(iota_tokens(8, 101)).empty());
  // The second block alone, without its predecessor, is not a prefix.
  EXPECT_TRUE(pool.match_prefix(iota_tokens(4, 104)).empty());
  pool.release(hit[0]);
  pool.check();
  EXPECT_EQ(pool.stats().prefix_queries, 5u);
  EXPECT_EQ(pool.stats().prefix_hit_blocks, 3u);
}

TEST(KvBlocks, EvictsLeastRecentlyReleasedFirst) {
  KvBlockPool pool(3, 2);
  const std::vector<int32_t> t1{1, 2}, t2{3, 4}, t3{5, 6};
  const int32_t b1 = write_sequence(pool, t1)[0], b2 = write_sequence(pool, t2)[0], b3 = write_sequence(pool, t3)[0];
  pool.release(b2);
  pool.release(b1);
  pool.release(b3);
  EXPECT_EQ(pool.stats().cached, 3u);
  // Taking t1's block back makes it the most recently used once released again.
  std::vector<int32_t> hit = pool.match_prefix(t1);
  ASSERT_EQ(hit.size(), 1u);
  pool.release(hit[0]);
  EXPECT_EQ(pool.allocate(), b2);  // released first
  EXPECT_EQ(pool.allocate(), b3);
  EXPECT_EQ(pool.stats().evictions, 2u);
  EXPECT_TRUE(pool.match_prefix(t2).empty());
  EXPECT_EQ(pool.match_prefix(t1).size(), 1u);
  pool.check();
}

TEST(KvBlocks, EqualBlockWrittenTwiceIsPublishedOnce) {
  KvBlockPool pool(8, 4);
  const std::vector<int32_t> p = iota_tokens(8, 0);
  const std::vector<int32_t> s1 = write_sequence(pool, p);  // computed side by side before either was published
  const std::vector<int32_t> s2 = write_sequence(pool, p);
  EXPECT_TRUE(pool.published(s1[0]));
  EXPECT_FALSE(pool.published(s2[0]));
  EXPECT_FALSE(pool.published(s2[1]));  // its predecessor is private, so it can never be reached
  for (int32_t b : s2) pool.release(b);
  EXPECT_EQ(pool.stats().free, 6u);  // the private copies are freed, not cached
  for (int32_t b : s1) pool.release(b);
  EXPECT_EQ(pool.stats().cached, 2u);
  pool.check();
}

TEST(KvBlocks, ReusedPredecessorBreaksTheChain) {
  KvBlockPool pool(2, 2);
  const std::vector<int32_t> t{1, 2, 3, 4};
  std::vector<int32_t> s = write_sequence(pool, t);
  pool.release(s[0]);  // the first block is released (least recent) before the second
  pool.release(s[1]);
  const int32_t reused = pool.allocate();  // evicts the first block
  EXPECT_EQ(reused, s[0]);
  pool.publish(reused, {}, std::vector<int32_t>{1, 2});  // the same tokens again, written anew
  // The second block's predecessor was evicted and given out again: the hit stops at the first block.
  std::vector<int32_t> hit = pool.match_prefix(t);
  EXPECT_EQ(hit, (std::vector<int32_t>{reused}));
  for (int32_t b : hit) pool.release(b);
  pool.release(reused);
  pool.check();
}

// Sequences arrive with prompts from a few shared prefixes, take what the prefix cache has, grow a token
// at a time (publishing each block as it fills), and end or are cancelled at random; the pool's
// invariants hold at every step, every prefix hit holds exactly the prompt's tokens, no block is held by
// two sequences unless published, and when all have ended nothing is held.
TEST(KvBlocks, RandomizedSequencesKeepTheInvariants) {
  for (size_t n_blocks : {6u, 23u, 64u}) {
    std::mt19937 rng(1234 + static_cast<unsigned>(n_blocks));
    KvBlockPool pool(n_blocks, 4);
    struct Seq {
      std::vector<int32_t> tokens, table;
      size_t published = 0;  // blocks published so far
    };
    std::vector<Seq> live;
    std::map<int32_t, std::vector<int32_t>> content;  // what each published block was written with
    std::vector<std::vector<int32_t>> stems;
    for (int s = 0; s < 4; ++s) stems.push_back(iota_tokens(4 + 3 * static_cast<size_t>(s), 1000 * s));
    size_t hits = 0, refused = 0;
    auto end_seq = [&](size_t i) {
      for (int32_t b : live[i].table) pool.release(b);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    };
    for (int step = 0; step < 10000; ++step) {
      const int op = static_cast<int>(rng() % 10);
      if (op < 3) {  // a new sequence
        Seq s;
        s.tokens = stems[rng() % stems.size()];
        for (size_t extra = rng() % 9; extra > 0; --extra) s.tokens.push_back(static_cast<int32_t>(rng() % 5));
        s.table = pool.match_prefix(std::span<const int32_t>(s.tokens).first(s.tokens.size() - 1));
        for (size_t i = 0; i < s.table.size(); ++i) {
          ASSERT_TRUE(pool.published(s.table[i]));
          const std::vector<int32_t> want(s.tokens.begin() + static_cast<std::ptrdiff_t>(4 * i),
                                          s.tokens.begin() + static_cast<std::ptrdiff_t>(4 * i + 4));
          ASSERT_EQ(content.at(s.table[i]), want) << "step " << step;
        }
        hits += s.table.size();
        s.published = s.table.size();
        bool ok = true;  // blocks for the rest of the prompt, all or none
        while (s.table.size() * 4 < s.tokens.size()) {
          const int32_t b = pool.allocate();
          if (b < 0) {
            ok = false;
            break;
          }
          s.table.push_back(b);
        }
        if (!ok) {
          ++refused;
          for (int32_t b : s.table) pool.release(b);
        } else {
          live.push_back(std::move(s));
        }
      } else if (op < 8 && !live.empty()) {  // a decode token for one sequence
        Seq& s = live[rng() % live.size()];
        if (s.tokens.size() == s.table.size() * 4) {
          const int32_t b = pool.allocate();
          if (b < 0) continue;  // the engine would preempt; here the sequence just waits
          s.table.push_back(b);
        }
        s.tokens.push_back(static_cast<int32_t>(rng() % 5));
      } else if (!live.empty()) {
        end_seq(rng() % live.size());
      }
      // Publish every block that is now full, as an engine does once its KV is written.
      for (Seq& s : live)
        while (s.published < s.tokens.size() / 4) {
          const int32_t b = s.table[s.published];
          const std::span<const int32_t> part = std::span<const int32_t>(s.tokens).subspan(4 * s.published, 4);
          const bool was = pool.published(b);
          pool.publish(b, std::span<const int32_t>(s.table).first(s.published), part);
          if (pool.published(b) && !was) content[b] = std::vector<int32_t>(part.begin(), part.end());
          ++s.published;
        }
      for (auto it = content.begin(); it != content.end();)
        it = pool.published(it->first) ? std::next(it) : content.erase(it);
      pool.check();
      std::map<int32_t, int> holders;
      for (const Seq& s : live)
        for (int32_t b : s.table) ++holders[b];
      for (const auto& [b, n] : holders) {
        ASSERT_EQ(pool.refs(b), n) << "block " << b << " at step " << step;
        if (n > 1) ASSERT_TRUE(pool.published(b)) << "private block " << b << " shared at step " << step;
      }
      ASSERT_EQ(pool.stats().used, holders.size());
    }
    while (!live.empty()) end_seq(0);
    pool.check();
    EXPECT_EQ(pool.stats().used, 0u);
    EXPECT_EQ(pool.stats().free + pool.stats().cached, n_blocks);
    EXPECT_GT(hits, 100u) << n_blocks << " blocks";
    if (n_blocks == 6) EXPECT_GT(refused, 0u);
  }
}

}  // namespace
