// libFuzzer target for the GGUF reader: every input must open or throw wick::Error, never crash,
// hang or read past the mapping (ASan + UBSan watch). Whatever parses is also used as a program
// would: plain tensors loaded, quantized ones loaded zero-copy with load_quantized, their bytes
// compared with raw(), dequantized, and a row gathered (small tensors only, so each input stays
// fast); then the whole file is written back with save_gguf and must read back the same.
// Build and run: tests/fuzz/run_fuzz_gguf.sh
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "wick/gguf.hpp"

namespace {

constexpr size_t kMaxLoadBytes = size_t(1) << 16;  // 64 KiB: a fuzz input is at most a few KiB

void use_quantized(const wick::GGUFFile& f, const wick::GGUFTensorInfo& t, size_t& sink) {
  wick::QTensor q = f.load_quantized(t.name);
  auto [p, n] = f.raw(t.name);
  const std::vector<uint8_t> bytes = q.to_bytes();
  // Zero copy means the QTensor holds exactly the file's bytes; anything else is a bug.
  if (bytes.size() != n || (n && std::memcmp(bytes.data(), p, n) != 0)) __builtin_trap();
  wick::Tensor x = q.dequantize(wick::DType::F32);
  if (x.numel() != q.numel()) __builtin_trap();
  if (q.rank() == 2 && q.dim(0) > 0) {
    wick::Tensor ids = wick::Tensor::from_vector(std::vector<int64_t>{int64_t(q.dim(0)) - 1}, {1});
    sink += q.embedding(ids).numel();
  }
  sink += x.numel();
}

// Same value, where NaN matches NaN (an f32 signalling NaN comes back quiet through the double
// that GGUFValue holds).
bool same(const wick::GGUFValue& a, const wick::GGUFValue& b) {
  if (a.type != b.type || a.u != b.u || a.i != b.i || a.b != b.b || a.s != b.s) return false;
  if (!(a.f == b.f || (a.f != a.f && b.f != b.f))) return false;
  if (a.type != wick::GGUFType::Array) return true;
  if (a.elem_type != b.elem_type || a.array.size() != b.array.size()) return false;
  for (size_t k = 0; k < a.array.size(); ++k)
    if (!same(a.array[k], b.array[k])) return false;
  return true;
}

// What the reader accepted, written back by save_gguf (metadata and every tensor's stored bytes),
// must read back the same: the writer accepts what the reader does and the two agree.
void rewrite_and_compare(const wick::GGUFFile& f) {
  static int fd = memfd_create("fuzz_gguf_out", 0);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  std::vector<wick::GGUFRawTensor> raw;
  for (const auto& t : f.tensors()) {
    auto [p, n] = f.raw(t.name);
    raw.push_back({t.name, t.type, t.dims, std::vector<unsigned char>(p, p + n)});
  }
  wick::save_gguf(path, f.metadata(), {}, raw);  // an Error here is a finding (not caught below)
  const auto g = wick::GGUFFile::open(path);
  if (g.metadata().size() != f.metadata().size() || g.tensors().size() != f.tensors().size() ||
      g.alignment() != f.alignment())
    __builtin_trap();
  for (size_t k = 0; k < f.metadata().size(); ++k)
    if (g.metadata()[k].first != f.metadata()[k].first || !same(g.metadata()[k].second, f.metadata()[k].second))
      __builtin_trap();
  for (size_t k = 0; k < f.tensors().size(); ++k) {
    const auto &a = f.tensors()[k], &b = g.tensors()[k];
    if (a.name != b.name || a.type != b.type || a.dims != b.dims || a.nbytes != b.nbytes) __builtin_trap();
    auto [pa, na] = f.raw(a.name);
    auto [pb, nb] = g.raw(b.name);
    if (na != nb || (na && std::memcmp(pa, pb, na) != 0)) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The reader takes a path: one in-memory file per process, rewritten for each input.
  static int fd = memfd_create("fuzz_gguf", 0);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != ssize_t(size))) return 0;
  try {
    auto f = wick::GGUFFile::open(path);
    size_t sink = f.metadata().size();
    for (const auto& [key, v] : f.metadata())
      if (f.find(key) == nullptr) __builtin_trap();  // every key read must be found again
    for (const auto& t : f.tensors()) {
      auto [p, n] = f.raw(t.name);
      for (size_t i = 0; i < n; i += 64) sink += p[i];  // touch every cache line of the span
      if (n > kMaxLoadBytes) continue;
      try {
        if (wick::ggml_is_quantized(t.type))
          use_quantized(f, t, sink);
        else if (t.type != wick::GGMLType::I8)
          sink += f.load(t.name).numel();
      } catch (const wick::Error& e) {
        // A tensor the header accepted must load: only its type may be refused.
        if (e.kind() != wick::ErrorKind::Unsupported) __builtin_trap();
      }
    }
    if (sink == 0xdeadbeef) return 1;
  } catch (const wick::Error&) {
    return 0;  // refused input: nothing to write back
  }
  try {
    rewrite_and_compare(wick::GGUFFile::open(path));
  } catch (const wick::Error&) {
    __builtin_trap();  // the writer refused, or the reader refused what the writer wrote
  }
  return 0;
}
