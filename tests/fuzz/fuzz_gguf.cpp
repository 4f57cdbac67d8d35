// libFuzzer target for the GGUF reader: every input must open or throw wick::Error, never crash,
// hang or read past the mapping (ASan + UBSan watch). Build and run: tests/fuzz/run_fuzz_gguf.sh
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "wick/gguf.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The reader takes a path: one in-memory file per process, rewritten for each input.
  static int fd = memfd_create("fuzz_gguf", 0);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != ssize_t(size))) return 0;
  try {
    auto f = wick::GGUFFile::open(path);
    size_t sink = f.metadata().size();
    for (const auto& t : f.tensors()) {
      auto [p, n] = f.raw(t.name);
      for (size_t i = 0; i < n; i += 64) sink += p[i];  // touch every cache line of the span
      if (!wick::ggml_is_quantized(t.type) && t.type != wick::GGMLType::I8 && n <= (1u << 20)) f.load(t.name);
    }
    if (sink == 0xdeadbeef) return 1;
  } catch (const wick::Error&) {
  }
  return 0;
}
