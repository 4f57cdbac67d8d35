// libFuzzer target for the GGUF reader: every input must open or throw wick::Error, never crash,
// hang or read past the mapping (ASan + UBSan watch). Whatever parses is also used as a program
// would: plain tensors loaded, quantized ones loaded zero-copy with load_quantized, their bytes
// compared with raw(), dequantized, and a row gathered (small tensors only, so each input stays
// fast). Build and run: tests/fuzz/run_fuzz_gguf.sh
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

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
  }
  return 0;
}
