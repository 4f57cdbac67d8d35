#pragma once
// A read-only memory map of a whole file, unmapped when destroyed.
#include <cstddef>
#include <string>

namespace wick::io {

class MappedFile {
 public:
  // Throws Error(Io) naming the path when the file cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const unsigned char* data_ = nullptr;  // null for an empty file: mmap refuses length 0
  size_t size_ = 0;
};

}  // namespace wick::io
