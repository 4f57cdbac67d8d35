// Encoding and decoding: SentencePiece-style merging by score (GGUF "llama") and BPE merging by rank
// (GGUF "gpt2" and tokenizer.json BPE), with special tokens split out first. The algorithms follow
// llama.cpp's llm_tokenizer_spm / llm_tokenizer_bpe so that ids match llama.cpp's.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <tuple>
#include <unordered_map>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "tokenizer_impl.hpp"
#include "unicode.hpp"
#include "wick/error.hpp"

namespace wick::llm {

namespace {

const std::string kSpace = "\xe2\x96\x81";  // U+2581, SentencePiece's space

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  for (;;) {
    size_t hit = s.find(from, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out.append(to);
    pos = hit + from.size();
  }
  out.append(s, pos, std::string::npos);
  s.swap(out);
}

// Length of the UTF-8 sequence a lead byte starts (1 for continuation/invalid bytes).
size_t utf8_len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 1;
}

// The bytes llama.cpp's tokenizers take as one character at a lead byte (unicode_len_utf8: by its high four
// bits, so 0xF8-0xFF start 4 bytes), which decides where SentencePiece's byte fallback falls on invalid UTF-8:
// "a\xffb c" with llama-spm is <0xFF> <0x62> <0x20> <0x63> as llama-tokenize gives, not <0xFF> "b" "\u2581c".
size_t char_len(unsigned char c) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[c >> 4];
}

// Each byte that does not start a complete UTF-8 sequence becomes U+FFFD, as llama.cpp's
// unicode_cpts_from_utf8 does before its BPE pre-tokenizer (a lead byte with its continuation bytes is
// taken whole, without checks for surrogates or code points past U+10FFFF, as there). An overlong form
// becomes the code point it spells, written the short way, as llama.cpp's decode and re-encode give
// ("\xc0\xaf" is "/"); a code point past U+10FFFF keeps its bytes (llama-tokenize aborts on it).
void replace_invalid_utf8(std::string& s) {
  auto cont = [&](size_t i) { return i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80; };
  // The sequence's length at i, 0 when invalid; cp: the code point it spells.
  auto sequence = [&](size_t i, uint32_t& cp) -> size_t {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    cp = n == 1 ? c : n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
    for (size_t k = 1; k < n; ++k) {
      if (!cont(i + k)) return 0;
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    }
    return n;
  };
  auto shortest = [](uint32_t cp) -> size_t { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; };
  size_t i = 0;
  uint32_t cp = 0;
  for (; i < s.size(); ++i) {  // most text is valid: copy only from the first invalid or overlong sequence on
    const size_t n = sequence(i, cp);
    if (n == 0 || shortest(cp) < n) break;
    i += n - 1;
  }
  if (i == s.size()) return;
  std::string out(s, 0, i);
  out.reserve(s.size() + 16);
  while (i < s.size()) {
    const size_t n = sequence(i, cp);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    const size_t m = shortest(cp);
    if (m < n) {  // overlong: the code point's own bytes (a surrogate stays a surrogate, as in llama.cpp)
      if (m == 1) {
        out += static_cast<char>(cp);
      } else if (m == 2) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      } else {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      }
    } else {
      out.append(s, i, n);
    }
    i += n;
  }
  s.swap(out);
}

int parse_byte_token(const std::string& t) {  // "<0xAB>" -> 0xAB, else -1
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// The allocator of the merge state of long pieces: blocks of 4 MiB or more are asked for in transparent huge
// pages, since touching fresh 4 KiB pages was most of the time of a 10 MB run of one character (bench_tokenize,
// llama-bpe, 10 MB of "a": 3.4 MB/s, with huge pages 6.8 MB/s and as fast per byte as at 1 MB).
template <class T>
struct BigAlloc {
  using value_type = T;
  static constexpr size_t kHuge = size_t{2} << 20;
  BigAlloc() = default;
  template <class U>
  BigAlloc(const BigAlloc<U>&) {}
  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < 2 * kHuge) return std::allocator<T>().allocate(n);
    const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
    void* p = std::aligned_alloc(kHuge, rounded);
    if (!p) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    madvise(p, rounded, MADV_HUGEPAGE);  // advice only: without huge pages it is merely slower
#endif
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) {
    if (n * sizeof(T) < 2 * kHuge)
      std::allocator<T>().deallocate(p, n);
    else
      std::free(p);
  }
  template <class U>
  bool operator==(const BigAlloc<U>&) const {
    return true;
  }
};
template <class T>
using BigVector = std::vector<T, BigAlloc<T>>;

// 20 bytes: a 10 MB piece of one repeated character is ten million of them, and their memory's page faults
// showed in bench_tokenize's profile.
struct Symbol {
  int prev, next;
  uint32_t off, n;  // split_chars refuses pieces of 2 GiB or more
  int32_t id = -1;  // the symbol's token id, -1 when its text is not a token
};

// Splits a text into UTF-8 characters (a truncated last sequence is kept whole).
BigVector<Symbol> split_chars(std::string_view text) {
  if (text.size() >= (size_t{1} << 31))
    throw Error(ErrorKind::Argument,
                "Tokenizer::encode: a piece of " + std::to_string(text.size()) +
                    " bytes that no pre-tokenizer rule splits (at most 2 GiB); encode the text in parts");
  BigVector<Symbol> syms;
  syms.reserve(text.size());
  size_t off = 0;
  int index = 0;
  while (off < text.size()) {
    size_t n = std::min(char_len(static_cast<unsigned char>(text[off])), text.size() - off);
    syms.push_back(
        {index - 1, off + n == text.size() ? -1 : index + 1, static_cast<uint32_t>(off), static_cast<uint32_t>(n)});
    off += n;
    ++index;
  }
  return syms;
}

// Each character's token id; a run of one character looks it up once.
void lookup_chars(const TokenizerData& d, std::string_view text, BigVector<Symbol>& syms) {
  std::string_view last;
  int32_t last_id = -1;
  for (Symbol& s : syms) {
    const std::string_view c = text.substr(s.off, s.n);
    if (c != last) {
      last = c;
      last_id = d.lookup(c);
    }
    s.id = last_id;
  }
}

void emit_bytes(const TokenizerData& d, std::string_view s, std::vector<int32_t>& out) {
  for (unsigned char c : s) {
    int32_t id = d.byte_token(c);
    if (id < 0) id = d.unk;
    if (id >= 0) out.push_back(id);
  }
}

// Calls f(chunk) for consecutive pieces of text cut between characters that no merge joins
// (TokenizerData::may_join), so that merging each piece on its own gives what merging the whole text does,
// with the work in cache-sized pieces instead of one priority queue over the whole text.
template <class F>
void for_each_chunk(const TokenizerData& d, std::string_view text, F&& f) {
  size_t start = 0, prev = 0;
  size_t off = text.empty() ? 0 : std::min(char_len(static_cast<unsigned char>(text[0])), text.size());
  while (off < text.size()) {
    const size_t n = std::min(char_len(static_cast<unsigned char>(text[off])), text.size() - off);
    if (!d.may_join(text.substr(prev, off - prev), text.substr(off, n))) {
      f(text.substr(start, off - start));
      start = off;
    }
    prev = off;
    off += n;
  }
  if (start < text.size()) f(text.substr(start));
}

// A candidate merge of symbol left with the symbol after it, of priority prio (lower first; ties: leftmost
// first); n is the two symbols' length together when it was made. Symbols only grow, and a symbol that is joined
// to its left becomes empty, so the candidate is current exactly while left is not empty and it and its next
// symbol are still n long together.
struct Candidate {
  int left;
  int32_t prio;
  uint32_t n;
};

// A FIFO in one power-of-two buffer, reused as it drains: ten million candidates of one priority cost no
// shifting (a vector erased from the front spent half bench_tokenize's time in memmove and page faults on 10 MB
// of one character). A drained ring hands its buffer to a pool that the next growing ring takes from, since
// zeroing fresh pages was a third of the time on 10 MB of spaces.
template <class T>
class Ring {
 public:
  using Pool = std::vector<BigVector<T>>;
  bool empty() const { return head_ == tail_; }
  size_t size() const { return tail_ - head_; }
  const T& front() const { return buf_[head_ & mask_]; }
  const T& back() const { return buf_[(tail_ - 1) & mask_]; }
  void pop_front(Pool& pool) {
    if (++head_ != tail_) return;
    head_ = tail_ = 0;
    if (buf_.size() >= kPooled) give(pool, std::move(buf_));
  }
  void push_back(const T& v, Pool& pool) {
    if (tail_ - head_ == buf_.size()) grow(pool);
    buf_[tail_++ & mask_] = v;
  }

 private:
  static constexpr size_t kPooled = 4096;  // smaller buffers go back to malloc
  static constexpr size_t kPoolMax = 8;
  static void give(Pool& pool, BigVector<T>&& b) {
    pool.push_back(std::move(b));
    if (pool.size() > kPoolMax) {  // drop the smallest
      auto smallest = std::min_element(
          pool.begin(), pool.end(), [](const BigVector<T>& x, const BigVector<T>& y) { return x.size() < y.size(); });
      smallest->swap(pool.back());
      pool.pop_back();
    }
  }
  void grow(Pool& pool) {
    const size_t want = buf_.empty() ? 64 : 2 * buf_.size();
    BigVector<T> b;
    auto fit = std::find_if(pool.begin(), pool.end(), [&](const BigVector<T>& x) { return x.size() >= want; });
    if (fit != pool.end()) {
      b.swap(*fit);
      fit->swap(pool.back());
      pool.pop_back();
    } else {
      b.resize(want);
    }
    for (size_t i = head_; i != tail_; ++i) b[i - head_] = buf_[i & mask_];
    tail_ -= head_;
    head_ = 0;
    buf_.swap(b);
    mask_ = buf_.size() - 1;
    if (b.size() >= kPooled) give(pool, std::move(b));
  }
  BigVector<T> buf_;
  size_t mask_ = 0, head_ = 0, tail_ = 0;
};

// Candidates ordered by (prio, left): a binary heap for short texts. A long run of text that no cut
// splits (10 MB of one character) would make that heap miss the cache on every pop, so long texts use
// one queue per priority instead: the first candidates (each pair of adjacent characters) are a list
// per priority linked through one int per character; later ones mostly arrive in position order and
// are taken from a FIFO in order; only those that arrive out of order go through a (small) heap; a heap
// of the priorities present picks the next queue. Both give the same order, so the same merges.
class CandidateQueue {
 public:
  explicit CandidateQueue(size_t n_symbols) : bucketed_(n_symbols > 256) {
    if (bucketed_) next_first_.resize(n_symbols);
  }
  // The candidate of characters left and left + 1, added in ascending left before any push (n: their length
  // together). Bucketed, pop gives it back with n = 0: the length is the two characters'.
  void add_first(int left, int32_t prio, uint32_t n) {
    if (!bucketed_) return push({left, prio, n});
    Bucket& b = bucket(prio);
    next_first_[left] = -1;
    if (b.first_tail < 0)
      b.first = left;
    else
      next_first_[b.first_tail] = left;
    b.first_tail = left;
    enqueue(b, prio);
  }
  bool empty() {
    if (!bucketed_) return heap_.empty();
    while (!prios_.empty() && buckets_[prios_.front().second].size() == 0) {
      std::pop_heap(prios_.begin(), prios_.end(), std::greater<>());
      Bucket& b = buckets_[prios_.back().second];
      b.queued = false;
      prios_.pop_back();
    }
    return prios_.empty();
  }
  void push(const Candidate& c) {
    if (!bucketed_) {
      heap_.push_back(c);
      std::push_heap(heap_.begin(), heap_.end(), later);
      return;
    }
    Bucket& b = bucket(c.prio);
    const Entry e{c.left, c.n};
    if (b.run.empty() || c.left > b.run.back().left) {
      b.run.push_back(e, pool_);
    } else {
      b.side.push_back(e);
      std::push_heap(b.side.begin(), b.side.end(), right_of);
    }
    enqueue(b, c.prio);
  }
  Candidate pop() {  // after !empty()
    if (!bucketed_) {
      std::pop_heap(heap_.begin(), heap_.end(), later);
      Candidate c = heap_.back();
      heap_.pop_back();
      return c;
    }
    const int32_t prio = prios_.front().first;
    Bucket& b = buckets_[prios_.front().second];
    Entry e;
    if (b.first >= 0 && (b.run.empty() || b.first < b.run.front().left) &&
        (b.side.empty() || b.first < b.side.front().left)) {
      e = {b.first, 0};
      b.first = next_first_[b.first];
      if (b.first < 0) b.first_tail = -1;
    } else if (!b.run.empty() && (b.side.empty() || b.run.front().left < b.side.front().left)) {
      e = b.run.front();
      b.run.pop_front(pool_);
    } else {
      std::pop_heap(b.side.begin(), b.side.end(), right_of);
      e = b.side.back();
      b.side.pop_back();
    }
    return {e.left, prio, e.n};
  }

 private:
  struct Entry {  // a candidate within its priority's bucket
    int left;
    uint32_t n;
  };
  static bool later(const Candidate& a, const Candidate& b) {
    return a.prio > b.prio || (a.prio == b.prio && a.left > b.left);
  }
  static bool right_of(const Entry& a, const Entry& b) { return a.left > b.left; }
  struct Bucket {
    int first = -1, first_tail = -1;  // the list of first candidates, through next_first_
    Ring<Entry> run;                  // ascending left
    std::vector<Entry> side;          // heap by left
    bool queued = false;              // whether its priority is in prios_
    size_t size() const { return (first >= 0 ? 1 : 0) + run.size() + side.size(); }
    size_t index = 0;
  };
  Bucket& bucket(int32_t prio) {
    auto [it, fresh] = index_.try_emplace(prio, buckets_.size());
    if (fresh) {
      buckets_.emplace_back();
      buckets_.back().index = it->second;
    }
    return buckets_[it->second];
  }
  void enqueue(Bucket& b, int32_t prio) {
    if (b.queued) return;
    b.queued = true;
    prios_.emplace_back(prio, b.index);
    std::push_heap(prios_.begin(), prios_.end(), std::greater<>());
  }
  bool bucketed_;
  std::vector<Candidate> heap_;
  std::vector<Bucket> buckets_;
  Ring<Entry>::Pool pool_;
  BigVector<int> next_first_;
  std::unordered_map<int32_t, size_t> index_;      // priority -> bucket
  std::vector<std::pair<int32_t, size_t>> prios_;  // min-heap of (priority, bucket)
};

// Repeatedly merges the adjacent pair of symbols of lowest priority (ties: leftmost first), as llama.cpp's
// tokenizers do; prio(l, r) is the pair's priority, or -1 when it does not merge.
template <class Prio, class Joined>
void merge_symbols(BigVector<Symbol>& syms, Prio&& prio, Joined&& joined) {
  CandidateQueue queue(syms.size());
  auto try_add = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const int32_t p = prio(syms[l], syms[r]);
    if (p >= 0) queue.push({l, p, syms[l].n + syms[r].n});
  };
  const int n = static_cast<int>(syms.size());
  if (n < 2) return;
  const uint32_t end = syms[n - 1].off + syms[n - 1].n;
  for (int i = 1; i < n; ++i) {
    const int32_t p = prio(syms[i - 1], syms[i]);
    if (p >= 0) queue.add_first(i - 1, p, syms[i - 1].n + syms[i].n);
  }
  while (!queue.empty()) {
    Candidate c = queue.pop();
    if (c.n == 0) c.n = (c.left + 2 < n ? syms[c.left + 2].off : end) - syms[c.left].off;  // two characters
    Symbol& l = syms[c.left];
    if (l.n == 0 || l.next < 0) continue;
    Symbol& r = syms[l.next];
    if (l.n + r.n != c.n) continue;
    joined(l, r);
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = c.left;
    try_add(l.prev, c.left);
    try_add(c.left, l.next);
  }
}

// SentencePiece BPE: repeatedly merge the adjacent pair whose concatenation is the highest-scoring
// token (ties: leftmost first).
void spm_merge(const TokenizerData& d, std::string_view text, std::vector<int32_t>& out) {
  BigVector<Symbol> syms = split_chars(text);
  lookup_chars(d, text, syms);
  merge_symbols(
      syms,
      [&](const Symbol& l, const Symbol& r) -> int32_t {
        if (l.id >= 0 && r.id >= 0) return d.pair_merge(l.id, r.id).rank;
        const int32_t id = d.lookup(text.substr(l.off, l.n + r.n));
        return id < 0 ? -1 : d.score_rank[id];
      },
      [&](Symbol& l, const Symbol& r) {  // before l takes r's text
        l.id = l.id >= 0 && r.id >= 0 ? d.pair_merge(l.id, r.id).result : d.lookup(text.substr(l.off, l.n + r.n));
      });
  for (int i = syms.empty() ? -1 : 0; i != -1; i = syms[i].next) {
    std::string_view s = text.substr(syms[i].off, syms[i].n);
    const int32_t id = syms[i].id;
    if (id >= 0) {
      out.push_back(id);
    } else {
      emit_bytes(d, s, out);  // a character with no token: byte fallback
    }
  }
}

void spm_tokenize(const TokenizerData& d, std::string_view text, std::vector<int32_t>& out) {
  for_each_chunk(d, text, [&](std::string_view chunk) { spm_merge(d, chunk, out); });
}

// BPE over one pre-token: merge the adjacent pair of lowest merge rank (ties: leftmost first).
void bpe_merge(const TokenizerData& d, std::string_view word, std::vector<int32_t>& out) {
  BigVector<Symbol> syms = split_chars(word);
  lookup_chars(d, word, syms);
  merge_symbols(
      syms,
      [&](const Symbol& l, const Symbol& r) {
        if (l.id >= 0 && r.id >= 0) return d.pair_merge(l.id, r.id).rank;
        return d.rank(word.substr(l.off, l.n), word.substr(r.off, r.n));
      },
      [&](Symbol& l, const Symbol& r) {  // before l takes r's text
        l.id = l.id >= 0 && r.id >= 0 ? d.pair_merge(l.id, r.id).result : d.lookup(word.substr(l.off, l.n + r.n));
      });
  for (int i = 0; i != -1; i = syms[i].next) {
    std::string_view s = word.substr(syms[i].off, syms[i].n);
    const int32_t id = syms[i].id;
    if (id >= 0) {
      out.push_back(id);
    } else if (!d.byte_level) {
      emit_bytes(d, s, out);  // byte_fallback (<0xXX>), else unk
    } else {
      // Every GPT-2 character is normally a token; llama.cpp looks the raw bytes up and drops misses.
      for (char c : s) {
        int32_t bid = d.lookup(std::string_view(&c, 1));
        if (bid >= 0) out.push_back(bid);
      }
    }
  }
}

// The tokens of the pre-tokens seen so far in one encode call: a text's words repeat, and a word's tokens do not
// depend on its neighbours (Hugging Face tokenizers' BPE keeps such a cache too). Bounded in words and in bytes a
// word, so its memory stays small whatever the text.
class WordCache {
 public:
  static constexpr size_t kMaxWords = 16384;
  static constexpr size_t kMaxWordBytes = 48;
  const std::vector<int32_t>* find(std::string_view w) const {
    auto it = map_.find(w);
    return it == map_.end() ? nullptr : &it->second;
  }
  void put(std::string_view w, const int32_t* ids, size_t n) {
    if (w.size() <= kMaxWordBytes && map_.size() < kMaxWords)
      map_.emplace(std::string(w), std::vector<int32_t>(ids, ids + n));
  }

 private:
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map_;
};

void bpe_word(const TokenizerData& d, std::string_view word, std::vector<int32_t>& out, WordCache& cache) {
  if (word.empty()) return;
  if (d.ignore_merges) {
    int32_t id = d.lookup(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  const bool cacheable = word.size() <= WordCache::kMaxWordBytes;
  if (cacheable) {
    if (const std::vector<int32_t>* ids = cache.find(word)) {
      out.insert(out.end(), ids->begin(), ids->end());
      return;
    }
  }
  const size_t first = out.size();
  for_each_chunk(d, word, [&](std::string_view chunk) { bpe_merge(d, chunk, out); });
  if (cacheable) cache.put(word, out.data() + first, out.size() - first);
}

struct Fragment {
  int32_t token;  // -1: raw text
  size_t off, len;
};

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// Splits special tokens out of the text (longest tokens first), as llama.cpp's tokenizer_st_partition.
std::vector<Fragment> partition(const TokenizerData& d, std::string_view text, bool parse_special) {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;
  for (int32_t sid : d.special_cache) {
    uint32_t attr = d.attrs[sid];
    if (!parse_special && (attr & (kAttrControl | kAttrUnknown))) continue;
    const std::string& st = d.tokens[sid];
    bool any = false;
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      size_t off = f.off, end = f.off + f.len;
      for (;;) {
        size_t hit = std::string_view(text.data(), end).find(st, off);
        if (hit == std::string_view::npos) {
          if (off < end) next.push_back({-1, off, end - off});
          break;
        }
        any = true;
        size_t left_end = hit;
        if (attr & kAttrLstrip)
          while (left_end > off && is_space(text[left_end - 1])) --left_end;
        if (left_end > off) next.push_back({-1, off, left_end - off});
        next.push_back({sid, hit, st.size()});
        off = hit + st.size();
        if (attr & kAttrRstrip)
          while (off < end && is_space(text[off])) ++off;
        if (off >= end) break;
      }
    }
    if (any) frags.swap(next);
  }
  return frags;
}

}  // namespace

int32_t TokenizerData::rank(std::string_view a, std::string_view b) const {
  // The key on the stack: this runs for every candidate pair, and a heap string per call showed in profiles.
  char buf[128];
  std::string heap;
  char* key = buf;
  const size_t n = a.size() + b.size() + 1;
  if (n > sizeof(buf)) {
    heap.resize(n);
    key = heap.data();
  }
  std::memcpy(key, a.data(), a.size());
  key[a.size()] = '\xff';
  std::memcpy(key + a.size() + 1, b.data(), b.size());
  auto it = bpe_ranks.find(std::string_view(key, n));
  return it == bpe_ranks.end() ? -1 : it->second;
}

namespace {

constexpr size_t kJoinableBits = size_t(1) << 21;  // 256 KB: a few bits per pair of the largest vocabularies

size_t pair_bit(std::string_view a, std::string_view b) {
  // A character is at most 4 bytes here (char_len); the pair packs into 64 bits.
  uint64_t x = 0;
  for (char c : a) x = (x << 8) | static_cast<unsigned char>(c);
  for (char c : b) x = (x << 8) | static_cast<unsigned char>(c);
  x ^= (a.size() << 3 | b.size()) << 58;
  x *= 0x9E3779B97F4A7C15ull;
  return static_cast<size_t>(x >> 43);  // the top 21 bits
}

// Marks every adjacent character pair inside s.
void mark_pairs(std::vector<uint64_t>& bits, std::string_view s) {
  size_t prev = 0, off = s.empty() ? 0 : std::min(char_len(static_cast<unsigned char>(s[0])), s.size());
  while (off < s.size()) {
    const size_t n = std::min(char_len(static_cast<unsigned char>(s[off])), s.size() - off);
    const size_t bit = pair_bit(s.substr(prev, off - prev), s.substr(off, n));
    bits[bit >> 6] |= uint64_t(1) << (bit & 63);
    prev = off;
    off += n;
  }
}

}  // namespace

bool TokenizerData::may_join(std::string_view a, std::string_view b) const {
  if (joinable.empty()) return true;
  // A byte 0xFF is the merge key's separator, so pairs around it are not recorded: never cut there.
  if (a.find('\xff') != std::string_view::npos || b.find('\xff') != std::string_view::npos) return true;
  const size_t bit = pair_bit(a, b);
  return (joinable[bit >> 6] >> (bit & 63)) & 1;
}

int32_t TokenizerData::byte_token(uint8_t b) const {
  if (byte_level) return lookup(byte_level_encode(std::string_view(reinterpret_cast<const char*>(&b), 1)));
  static const char* hex = "0123456789ABCDEF";
  const char buf[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
  int32_t id = lookup(std::string_view(buf, 6));
  if (id >= 0) return id;
  const char one = static_cast<char>(b);
  return lookup(std::string_view(&one, 1));  // llama.cpp's fallback: the byte itself as a token
}

void TokenizerData::finalize() {
  const size_t n = tokens.size();
  if (scores.empty()) scores.assign(n, 0.0f);
  // SPM merges by score, highest first: rank the scores densely (equal scores, equal rank; NaN last).
  {
    std::vector<float> sorted;
    sorted.reserve(n);
    for (float x : scores) sorted.push_back(std::isnan(x) ? -INFINITY : x);
    std::vector<float> keys = sorted;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    score_rank.resize(n);
    for (size_t i = 0; i < n; ++i)
      score_rank[i] = static_cast<int32_t>(std::lower_bound(sorted.begin(), sorted.end(), keys[i], std::greater<>()) -
                                           sorted.begin());
  }
  if (attrs.empty()) attrs.assign(n, kAttrNormal);
  token_to_id.clear();
  token_to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (tokens[i].empty()) tokens[i] = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp
    token_to_id[tokens[i]] = static_cast<int32_t>(i);
  }
  // End-of-generation tokens: eos/eot/eom plus the chat-turn terminators llama.cpp recognises by text.
  static const char* eog_texts[] = {"<|eot_id|>",    "<|im_end|>", "<|end|>",           "<end_of_turn>",
                                    "<|endoftext|>", "<|eom_id|>", "<|end_of_text|>",   "<EOT>",
                                    "<|return|>",    "<|call|>",   "<end_of_utterance>"};
  for (const char* t : eog_texts) {
    int32_t id = lookup(t);
    if (id >= 0) {
      eog.insert(id);
      if (!(attrs[id] & kAttrControl)) attrs[id] |= kAttrControl;  // llama.cpp overrides the type too
    }
  }
  if (eot < 0)
    for (const char* t : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>"}) {
      if (int32_t id = lookup(t); id >= 0) {
        eot = id;
        break;
      }
    }
  if (eom < 0) eom = lookup("<|eom_id|>");
  for (int32_t id : {eos, eot, eom})
    if (id >= 0) eog.insert(id);

  special_cache.clear();
  for (size_t i = 0; i < n; ++i)
    if (attrs[i] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) special_cache.push_back(static_cast<int32_t>(i));
  std::stable_sort(special_cache.begin(), special_cache.end(),
                   [&](int32_t a, int32_t b) { return tokens[a].size() > tokens[b].size(); });

  // The id-keyed merge table. BPE: every merge whose two parts are tokens (the others stay in bpe_ranks only).
  // SPM: every split of a token into two tokens, ranked by the token's score.
  pair_keys.clear();
  pair_vals.clear();
  {
    std::vector<std::tuple<int32_t, int32_t, PairMerge>> pairs;
    if (kind == TokKind::Bpe) {
      for (const auto& [key, rank] : bpe_ranks) {
        const size_t sep = key.find('\xff');
        if (key.find('\xff', sep + 1) != std::string::npos) continue;  // a part holding 0xFF: the split is unclear
        const int32_t a = lookup(std::string_view(key).substr(0, sep)),
                      b = lookup(std::string_view(key).substr(sep + 1));
        if (a >= 0 && b >= 0)
          pairs.emplace_back(a, b, PairMerge{rank, lookup(key.substr(0, sep) + key.substr(sep + 1))});
      }
    } else {
      for (const std::string& t : tokens) {
        const int32_t id = lookup(t);
        for (size_t p = char_len(static_cast<unsigned char>(t[0])); p < t.size();
             p += char_len(static_cast<unsigned char>(t[p]))) {
          const int32_t a = lookup(std::string_view(t).substr(0, p)), b = lookup(std::string_view(t).substr(p));
          if (a >= 0 && b >= 0) pairs.emplace_back(a, b, PairMerge{score_rank[id], id});
        }
      }
    }
    if (!pairs.empty()) {
      size_t cap = 16;
      while (cap < 2 * pairs.size()) cap *= 2;
      pair_shift = 64 - static_cast<unsigned>(__builtin_ctzll(cap));
      pair_keys.assign(cap, kNoPair);
      pair_vals.assign(cap, PairMerge{});
      for (const auto& [a, b, v] : pairs) {
        const uint64_t k = (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
        size_t i = (k * 0x9E3779B97F4A7C15ull) >> pair_shift;
        while (pair_keys[i] != kNoPair && pair_keys[i] != k) i = (i + 1) & (cap - 1);
        if (pair_keys[i] == kNoPair) {  // SPM: the same two tokens join into one text, so the first entry holds
          pair_keys[i] = k;
          pair_vals[i] = v;
        }
      }
    }
  }

  // SPM merges only into tokens; BPE into a merge's left + right, which need not be a token.
  joinable.assign(kJoinableBits / 64, 0);
  if (kind == TokKind::Spm) {
    for (const std::string& t : tokens) mark_pairs(joinable, t);
  } else {
    std::string joined;
    for (const auto& [key, rank] : bpe_ranks) {
      joined.clear();
      for (char c : key)
        if (c != '\xff') joined.push_back(c);
      mark_pairs(joinable, joined);
    }
  }

  pieces.assign(n, std::string());
  for (size_t i = 0; i < n; ++i) {
    const std::string& t = tokens[i];
    uint32_t a = attrs[i];
    if (a & (kAttrUnknown | kAttrControl | kAttrUserDefined)) {
      pieces[i] = t;
    } else if (a & kAttrNormal) {
      if (kind == TokKind::Spm || escape_whitespace || unescape_pieces) {
        pieces[i] = t;
        replace_all(pieces[i], kSpace, " ");
      } else if (!byte_level_decode(t, pieces[i])) {
        pieces[i].clear();
        pieces[i] = t;  // not GPT-2 mapped text (as HF's ByteLevel decoder): the token's own bytes
      }
    } else if (a & kAttrByte) {
      int b = parse_byte_token(t);
      if (b >= 0) {
        pieces[i] = std::string(1, static_cast<char>(b));
      } else if (byte_level) {
        if (!byte_level_decode(t, pieces[i])) pieces[i].clear();
      }
    }
  }
}

// ---- Tokenizer -------------------------------------------------------------------------------------

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const TokenizerData& d = *d_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  std::vector<Fragment> frags = partition(d, text, parse_special);
  if (add_special && d.add_bos) {
    if (d.bos < 0)
      throw Error(
          ErrorKind::Argument,
          "Tokenizer::encode: the vocabulary asks for a BOS token but has none; encode with add_special = false");
    out.push_back(d.bos);
  }
  bool prev_special = true;  // SPM: a space before the first text fragment and after special tokens
  WordCache cache;
  for (const Fragment& f : frags) {
    if (f.token >= 0) {
      out.push_back(f.token);
      prev_special = true;
      continue;
    }
    std::string s;
    if (d.kind == TokKind::Spm && d.add_space_prefix && prev_special) s = " ";
    s.append(text.substr(f.off, f.len));
    prev_special = false;
    if (d.kind == TokKind::Bpe) replace_invalid_utf8(s);  // SentencePiece keeps the bytes (byte fallback)
    if (!d.norm.empty()) s = normalize(d.norm, s);
    if (d.kind == TokKind::Spm) {
      replace_all(s, " ", kSpace);
      spm_tokenize(d, s, out);
      continue;
    }
    if (d.escape_whitespace) replace_all(s, " ", kSpace);
    // Metaspace's prepend_scheme "first" prepends only to the text that starts the input.
    // A byte-level vocabulary whose pre-tokenizer does not map bytes (none, or a plain Split): map them here.
    const bool map_bytes = d.byte_level && !d.pre_tok.byte_level();
    auto word = [&](std::string_view w) {
      bpe_word(d, map_bytes ? std::string_view(byte_level_encode(w)) : w, out, cache);
    };
    if (!d.pre_tok.empty()) {
      pre_tokenize_each(d.pre_tok, s, f.off == 0, word);
    } else if (!s.empty()) {
      word(s);
    }
  }
  if (add_special && d.add_eos) {
    if (d.eos < 0)
      throw Error(
          ErrorKind::Argument,
          "Tokenizer::encode: the vocabulary asks for an EOS token but has none; encode with add_special = false");
    out.push_back(d.eos);
  }
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  const TokenizerData& d = *d_;
  // The space the encoder put in front (SPM add_space_prefix, Metaspace) comes off the first text that is
  // output, as Hugging Face's decoders strip it from the joined text: with skip_special, a leading BOS
  // leaves nothing, so "<s> ab" decodes to "ab" (llama.cpp keeps " ab" there).
  bool remove_space = d.add_space_prefix;
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    int32_t id = ids[i];
    if (id < 0 || static_cast<size_t>(id) >= d.tokens.size())
      throw Error(ErrorKind::Index, "Tokenizer::decode: token id " + std::to_string(id) + " at position " +
                                        std::to_string(i) + " is outside the vocabulary (size " +
                                        std::to_string(d.tokens.size()) + ")");
    if (skip_special && (d.attrs[id] & (kAttrControl | kAttrUnknown))) continue;
    std::string_view p = d.pieces[id];
    if (p.empty()) continue;
    if (remove_space && p[0] == ' ') p.remove_prefix(1);
    remove_space = false;
    text.append(p);
  }
  if (d.clean_spaces && !text.empty()) {
    // HF's clean_up_tokenization: " ." -> ".", " ' " -> "'", " 's" -> "'s", ... (three passes as llama.cpp).
    std::string a;
    a.reserve(text.size());
    a.push_back(text[0]);
    for (size_t i = 1; i < text.size(); ++i) {
      char x = text[i];
      if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) a.pop_back();
      a.push_back(x);
    }
    std::string b;
    b.push_back(a[0]);
    bool prev_dropped = false;  // llama.cpp blanks the dropped space, so it no longer reads as ' '
    for (size_t i = 1; i < a.size(); ++i) {
      char x = a[i];
      if (x == '\'' && i + 1 < a.size() && !prev_dropped && a[i - 1] == ' ' && a[i + 1] == ' ') {
        b.pop_back();
        b.push_back(x);
        ++i;  // drop the space after too
        prev_dropped = true;
        continue;
      }
      prev_dropped = false;
      b.push_back(x);
    }
    std::string c;
    c.push_back(b[0]);
    for (size_t i = 1; i < b.size(); ++i) {
      char x = b[i];
      if (b[i - 1] == ' ' && x == '\'' && i + 1 < b.size()) {
        char x1 = b[i + 1];
        if (x1 == 's' || x1 == 'm' ||
            (i + 2 < b.size() && ((x1 == 'r' && b[i + 2] == 'e') || (x1 == 'v' && b[i + 2] == 'e'))))
          c.pop_back();
      }
      c.push_back(x);
    }
    text.swap(c);
  }
  return text;
}

std::string Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= d_->tokens.size())
    throw Error(ErrorKind::Index, "Tokenizer::token_bytes: token id " + std::to_string(id) +
                                      " is outside the vocabulary (size " + std::to_string(d_->tokens.size()) + ")");
  return d_->pieces[id];
}

size_t Tokenizer::vocab_size() const { return d_->tokens.size(); }
int32_t Tokenizer::bos_id() const { return d_->bos; }
int32_t Tokenizer::eos_id() const { return d_->eos; }
bool Tokenizer::add_bos() const { return d_->add_bos; }
bool Tokenizer::add_eos() const { return d_->add_eos; }
bool Tokenizer::is_eog(int32_t id) const { return d_->eog.count(id) != 0; }
bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < d_->attrs.size() && (d_->attrs[id] & (kAttrControl | kAttrUnknown)) != 0;
}
std::optional<int32_t> Tokenizer::find(std::string_view token) const {
  int32_t id = d_->lookup(token);
  return id < 0 ? std::nullopt : std::optional<int32_t>(id);
}
const std::string& Tokenizer::token_text(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= d_->tokens.size())
    throw Error(ErrorKind::Index, "Tokenizer::token_text: token id " + std::to_string(id) +
                                      " is outside the vocabulary (size " + std::to_string(d_->tokens.size()) + ")");
  return d_->tokens[id];
}
const std::string& Tokenizer::chat_template() const { return d_->chat_template; }
const std::string& Tokenizer::model_kind() const { return d_->model_kind; }
const std::string& Tokenizer::pre() const { return d_->pre; }

// ---- StreamDecoder ---------------------------------------------------------------------------------

StreamDecoder::StreamDecoder(const Tokenizer& t, bool skip_special) : t_(&t), skip_special_(skip_special) {}

std::string StreamDecoder::push(int32_t id) {
  if (!(skip_special_ && t_->is_special(id))) pending_ += t_->token_bytes(id);
  // Hold back a trailing UTF-8 sequence whose lead byte promises more bytes than have arrived.
  size_t n = pending_.size();
  size_t cut = n;
  for (size_t k = 1; k <= 3 && k <= n; ++k) {
    unsigned char c = static_cast<unsigned char>(pending_[n - k]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: keep looking for the lead
    size_t need = utf8_len(c);
    if (need > k) cut = n - k;
    break;
  }
  std::string out = pending_.substr(0, cut);
  pending_.erase(0, cut);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace wick::llm
