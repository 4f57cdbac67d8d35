#pragma once
// Shared by the LLM fuzz targets (run_fuzz.sh): the input as a file the loaders can open by path.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace fuzz {

// Writes data to NAME in this process's own folder under /dev/shm (a file the loaders open by path, as a
// user's would be) and returns its path.
inline std::string write_file(const char* name, const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    std::string d = "/dev/shm/wick-fuzz-" + std::to_string(getpid());
    mkdir(d.c_str(), 0700);
    return d;
  }();
  const std::string path = dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) __builtin_trap();
  if (size != 0 && std::fwrite(data, 1, size, f) != size) __builtin_trap();
  std::fclose(f);
  return path;
}

}  // namespace fuzz
