#pragma once
// Quantized tensors: GGUF's block formats (llama.cpp's ggml types) held as the bytes a GGUF file
// stores, on any device, with the ops a quantized model needs (dequantize, quantize, y = x @ W^T,
// embedding rows). Candle calls this type QTensor.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "wick/tensor.hpp"

namespace wick {

// ggml type ids, numbered as gguf-py's constants.py (GGMLQuantizationType): the numbers are the
// file format. Every id ggml defines is listed so a file can be described; which ones wick
// computes with is ggml_type_supported().
enum class GGMLType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,
  Q1_0 = 41,
  Q2_0 = 42,
};

// Table lookups; an id outside the enum is Error(Argument) naming it.
const char* ggml_type_name(GGMLType t);
size_t ggml_block_size(GGMLType t);  // elements per block (1 for plain types)
size_t ggml_type_size(GGMLType t);   // bytes per block
bool ggml_is_quantized(GGMLType t);  // a block type (block size > 1)
// A block type a QTensor can hold and compute with: Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q8_1 Q2_K..Q8_K
// IQ4_NL IQ4_XS MXFP4.
bool ggml_type_supported(GGMLType t);
// "q4_k", "Q4_K", "mxfp4": the type of that name (any case), or nullopt.
std::optional<GGMLType> ggml_type_from_name(const std::string& name);
// The GGUF type that stores a tensor of dtype d as is (F32 F16 BF16 F64 I16 I32 I64), or nullopt.
std::optional<GGMLType> ggml_type_of(DType d);
// "Q4_0, Q4_1, ..., MXFP4": the supported block types, for error messages and help text.
std::string ggml_supported_types();

class Storage;

// A quantized matrix or stack of rows: `shape` (row-major, last dim = one row, a whole number of
// blocks) and the blocks of `type` exactly as GGUF stores them, rows one after another. Immutable;
// copies share the bytes. On the CPU the bytes may live in a GGUF file's mapping (zero copy).
class QTensor {
 public:
  QTensor() = default;

  // Quantizes x (f32/f16/bf16/f64, any layout, any device) to `type`; the last dim must be a
  // multiple of the block size. On the CPU every supported type (the reference quantizers of
  // llama.cpp's ggml-quants, byte-identical to gguf-py for the legacy types); on a GPU the
  // activation types Q8_0, Q8_1 and Q8_K (others: Error(Unsupported) naming the fix: quantize on
  // the CPU, then to(device)).
  static QTensor quantize(const Tensor& x, GGMLType type);
  // Copies `nbytes` of blocks from host memory; nbytes must equal the size the shape implies.
  static QTensor from_bytes(GGMLType type, const Shape& shape, const void* data, size_t nbytes,
                            Device device = Device::cpu());
  // Internal: wraps blocks already in a backend storage of dtype U8 (the GGUF loader's zero copy).
  QTensor(std::shared_ptr<Storage> blocks, GGMLType type, Shape shape, Device device);

  bool defined() const { return blocks_ != nullptr; }
  GGMLType type() const { return type_; }
  const Shape& shape() const { return shape_; }
  size_t rank() const { return shape_.size(); }
  size_t dim(int64_t d) const;
  size_t numel() const;
  size_t nbytes() const;  // bytes of the blocks
  Device device() const { return device_; }
  std::string str() const;  // "QTensor[4096, 4096] Q4_K cuda:0"
  const std::shared_ptr<Storage>& storage() const { return blocks_; }

  // The rows of several (n_i, k) matrices of one type on one device, stacked into one (sum n_i, k)
  // matrix (a copy of their blocks on that device): e.g. q/k/v weights run as one matrix product.
  static QTensor cat_rows(const std::vector<QTensor>& parts);
  QTensor to(Device device) const;              // one upload / download of the bytes
  // Rows [start, start + n) of this (rows, k) matrix: a copy of their blocks on the same device,
  // made by the device without a synchronisation (a decode step's embedding row at a host-known
  // id: rows(id, 1).dequantize()). Out of range is Error(Index).
  QTensor rows(size_t start, size_t n) const;
  std::vector<uint8_t> to_bytes() const;        // the blocks, copied to host memory
  Tensor dequantize(DType dtype = DType::F32) const;  // f32, f16 or bf16, same shape and device

  // y = x @ W^T with W this (n, k) matrix (rank 2): x (..., k) f32/f16/bf16 on the same device,
  // any strides; y (..., n) in x's dtype. Up to 8 rows take the matrix-vector path (x quantized
  // to the type's activation format, integer dot products); more rows the tiled / BLAS path.
  // wick/fast.hpp has the product on rows already in Q8_1 and the one fused with a norm.
  Tensor matmul_t(const Tensor& x) const;

  // Rows of this (vocab, dim) table at ids (any integer dtype, any shape, on this device):
  // result ids.shape + (dim) in `dtype`. An id out of range is Error(Index).
  Tensor embedding(const Tensor& ids, DType dtype = DType::F32) const;

 private:
  std::shared_ptr<Storage> blocks_;  // dtype U8, nbytes() elements
  GGMLType type_ = GGMLType::F32;
  Shape shape_;
  Device device_;
};

// x @ W^T: the free-function spelling of QTensor::matmul_t.
inline Tensor qmatmul(const Tensor& x, const QTensor& w) { return w.matmul_t(x); }

}  // namespace wick
