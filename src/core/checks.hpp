#pragma once
// Validation helpers shared by every Tensor method: each throws wick::Error naming the op.
#include <string>
#include <vector>

#include "backend/storage.hpp"
#include "wick/tensor.hpp"

namespace wick {

// PyTorch-style dim: negative counts from the end. Error(Shape) when out of range.
size_t norm_dim(int64_t dim, size_t rank, const char* op);
std::vector<size_t> norm_dims(const std::vector<int64_t>& dims, size_t rank, const char* op);  // sorted, unique
// "f32 [2, 3] on cpu"
std::string describe(const Tensor& t);
void check_defined(const Tensor& t, const char* op);
void check_same_device(const Tensor& a, const Tensor& b, const char* op);
void check_same_dtype(const Tensor& a, const Tensor& b, const char* op);
void check_float(const Tensor& t, const char* op);  // Error(DType) for integer tensors
// A write destination must not be a broadcast view (stride 0 over a dim of size > 1).
void check_writable(const Tensor& dst, const char* op);
// A start row read by the device (slice_set, rope_kv_append): one integer element on dst's device.
void check_device_start(const Tensor& dst, const Tensor& start, const char* op);
// A contiguous tensor around a freshly returned storage.
Tensor wrap(StoragePtr s, const Shape& shape, DType dtype, Device device);
Tensor wrap_like(StoragePtr s, const Shape& shape, const Tensor& like);  // like's dtype and device

}  // namespace wick
