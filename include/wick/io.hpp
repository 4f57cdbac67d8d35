#pragma once
// File formats: safetensors (load memory-mapped and lazy, save) and .npy.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "wick/tensor.hpp"

namespace wick {

// A safetensors file opened by memory map: the header is parsed at open, each tensor is
// read only when asked for. Malformed or truncated files throw Error(Io) at open, by the Rust
// crate's rules (data_offsets contiguous from 0 and covering the data section exactly). The
// mapping lives while any copy of this object does. Tensors of a safetensors dtype wick lacks
// (I8, U16, U64, F8_E5M2, ...) are listed but dtype()/load() throw Error(DType); BOOL loads as u8.
// An unknown name is Error(Argument).
class SafeTensors {
 public:
  static SafeTensors open(const std::string& path);
  std::vector<std::string> names() const;  // in file (data offset) order
  bool contains(const std::string& name) const;
  DType dtype(const std::string& name) const;
  Shape shape(const std::string& name) const;
  Tensor load(const std::string& name, Device device = Device::cpu()) const;
  const std::map<std::string, std::string>& metadata() const;

  struct Impl;
 private:
  SafeTensors() = default;  // only open() makes one, so impl_ is never null
  std::shared_ptr<Impl> impl_;
};

std::map<std::string, Tensor> load_safetensors(const std::string& path, Device device = Device::cpu());
// Data is written contiguous row-major (from any layout and device), ordered as the Rust crate
// does: larger element types first, then by name. Empty metadata writes no __metadata__.
void save_safetensors(const std::map<std::string, Tensor>& tensors, const std::string& path,
                      const std::map<std::string, std::string>& metadata = {});

// NumPy .npy, format 1.0/2.0/3.0: |b1 (loads as u8) |u1 u4 i2 i4 i8 f2 f4 f8, C or Fortran
// order, either endianness on load; save writes little-endian C order (version 1.0, or 2.0
// for huge headers). bf16 and f8e4m3 have no NumPy dtype: they use the ml_dtypes names
// 'bfloat16' and 'float8_e4m3fn' as descr (np.load reads them after `import ml_dtypes`).
// Malformed files, unknown descr and size mismatches throw Error(Io) naming the file.
Tensor load_npy(const std::string& path, Device device = Device::cpu());
void save_npy(const Tensor& t, const std::string& path);

}  // namespace wick
