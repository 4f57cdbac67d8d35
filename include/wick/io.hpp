#pragma once
// File formats: safetensors (load memory-mapped and lazy, save) and .npy.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "wick/tensor.hpp"

namespace wick {

// A safetensors file opened by memory map: the header is parsed at open, each tensor is
// read only when asked for. Malformed or truncated files throw Error(Io) at open.
class SafeTensors {
 public:
  static SafeTensors open(const std::string& path);
  std::vector<std::string> names() const;  // in file order
  bool contains(const std::string& name) const;
  DType dtype(const std::string& name) const;
  Shape shape(const std::string& name) const;
  Tensor load(const std::string& name, Device device = Device::cpu()) const;
  const std::map<std::string, std::string>& metadata() const;

  struct Impl;
 private:
  std::shared_ptr<Impl> impl_;
};

std::map<std::string, Tensor> load_safetensors(const std::string& path, Device device = Device::cpu());
void save_safetensors(const std::map<std::string, Tensor>& tensors, const std::string& path,
                      const std::map<std::string, std::string>& metadata = {});

// NumPy .npy: bool/u1/u4/i2/i4/i8/f2/f4/f8 (and bf16/f8 as wick's own type strings), C or
// Fortran order, either endianness on load.
Tensor load_npy(const std::string& path, Device device = Device::cpu());
void save_npy(const Tensor& t, const std::string& path);

}  // namespace wick
