// Inputs of a parity case: seeded values, the same in every layout, arranged as the layout asks.
#include <numeric>

#include "check/check.hpp"

namespace wick::check {

Inputs::Inputs(Device device, DType dtype, LayoutKind kind, bool reference)
    : device_(device), dtype_(dtype), kind_(kind), reference_(reference),
      guards_(std::make_shared<std::vector<Guard>>()) {}

static bool is_unsigned(DType d) { return d == DType::U8 || d == DType::U32; }

Tensor Inputs::values(DType dtype, const Shape& shape, uint64_t seed, Values v) const {
  const Device cpu = Device::cpu();
  if (dtype_is_float(dtype)) {
    switch (v) {
      case Values::Normal: return Tensor::randn(shape, dtype, cpu, seed);
      case Values::Positive: return Tensor::rand(shape, dtype, cpu, seed, 0.5, 3.0);
      case Values::Unit: return Tensor::rand(shape, dtype, cpu, seed, -1.0, 1.0);
    }
  }
  // Small integers: f32 uniform values truncated toward zero by the cast.
  double lo = v == Values::Positive ? 1.0 : is_unsigned(dtype) ? 0.0 : -9.99;
  return Tensor::rand(shape, DType::F32, cpu, seed, lo, 10.0).to_dtype(dtype);
}

// Broadcast operands come from a smaller tensor: the first dim larger than 1 shrunk to 1.
static bool broadcast_source(const Shape& shape, Shape* small) {
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] > 1) {
      *small = shape;
      (*small)[d] = 1;
      return true;
    }
  return false;
}

Tensor Inputs::arrange(const Tensor& host, bool /*allow_broadcast*/) const {
  Tensor t = host.to_device(device_);
  if (reference_ || t.rank() == 0) return t;
  switch (kind_) {
    case LayoutKind::Contiguous:
    case LayoutKind::Broadcast: return t;
    case LayoutKind::Transposed:
      if (t.rank() >= 2) return t.t().contiguous().t();
      // rank 1: every other element of a (n, 2) buffer, stride 2
      return Tensor::stack({t, t}, 1).narrow(1, 0, 1).squeeze(1);
    case LayoutKind::Offset:
    case LayoutKind::Empty: {
      Shape front = t.shape(), back = t.shape();
      front.back() = 2;
      back.back() = 3;
      Tensor big = Tensor::cat({Tensor::full(front, 77, t.dtype(), device_), t,
                                Tensor::full(back, 77, t.dtype(), device_)}, -1);
      return big.narrow(-1, 2, t.shape().back());
    }
  }
  return t;
}

Tensor Inputs::x_as(DType dtype, const Shape& shape, uint64_t seed, Values v) const {
  Shape small;
  if (kind_ == LayoutKind::Broadcast && broadcast_source(shape, &small)) {
    Tensor t = values(dtype, small, seed, v).to_device(device_).broadcast_as(shape);
    return reference_ ? t.contiguous() : t;
  }
  return arrange(values(dtype, shape, seed, v), false);
}

Tensor Inputs::x_nb(const Shape& shape, uint64_t seed, Values v) const {
  return arrange(values(dtype_, shape, seed, v), false);
}

static uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

Tensor Inputs::ids(const Shape& shape, uint64_t seed, size_t limit, DType idt, int unique_along) const {
  Shape gen = shape, small;
  const bool bcast = kind_ == LayoutKind::Broadcast && unique_along != 0 && broadcast_source(shape, &small) &&
                     (unique_along < 0 || shape[0] > 1);
  if (bcast) gen = small;
  const size_t n = shape_numel(gen);
  std::vector<int64_t> v(n);
  uint64_t s = seed * 0x1234567ull + 1;
  if (unique_along < 0 || gen.empty()) {
    for (auto& x : v) x = limit ? int64_t(splitmix(s) % limit) : 0;
  } else {
    // A partial Fisher-Yates shuffle of [0, limit) for each fiber along the dim.
    size_t d = size_t(unique_along), len = gen[d], inner = 1, outer = 1;
    for (size_t i = d + 1; i < gen.size(); ++i) inner *= gen[i];
    for (size_t i = 0; i < d; ++i) outer *= gen[i];
    std::vector<int64_t> pool(limit);
    for (size_t o = 0; o < outer; ++o)
      for (size_t in = 0; in < inner; ++in) {
        std::iota(pool.begin(), pool.end(), 0);
        for (size_t j = 0; j < len && j < limit; ++j) {
          size_t k = j + splitmix(s) % (limit - j);
          std::swap(pool[j], pool[k]);
          v[(o * len + j) * inner + in] = pool[j];
        }
      }
  }
  Tensor host = Tensor::from_vector(v, gen).to_dtype(idt);
  if (bcast) {
    Tensor t = host.to_device(device_).broadcast_as(shape);
    return reference_ ? t.contiguous() : t;
  }
  return arrange(host, false);
}

Tensor Inputs::mask(const Shape& shape, uint64_t seed) const {
  std::vector<uint8_t> v(shape_numel(shape));
  uint64_t s = seed * 0x9876543ull + 7;
  for (auto& x : v) x = uint8_t(splitmix(s) & 1);
  return arrange(Tensor::from_vector(v, shape), false);
}

Tensor Inputs::lay(const Tensor& t, bool allow_broadcast) const { return arrange(t, allow_broadcast); }

Tensor Inputs::guarded(const Shape& shape, uint64_t seed, Values v) const {
  if (shape.size() != 2) throw Error(ErrorKind::Internal, "check: guarded destinations are rank 2");
  Tensor vals = values(dtype_, shape, seed, v);
  if (reference_) return vals.to_device(device_);
  const size_t r = shape[0], c = shape[1];
  Tensor sentinel_l = Tensor::full({r, 2}, 99, dtype_), sentinel_r = Tensor::full({r, 3}, 99, dtype_);
  Tensor mid = Tensor::cat({sentinel_l, vals, sentinel_r}, 1);
  Tensor big = Tensor::cat({Tensor::full({1, c + 5}, 99, dtype_), mid, Tensor::full({2, c + 5}, 99, dtype_)}, 0)
                   .to_device(device_);
  Guard g{big, big.narrow(0, 1, r).narrow(1, 2, c), {}};
  g.before.resize(big.numel() * dtype_size(dtype_));
  big.copy_to_host(g.before.data());
  guards_->push_back(g);
  return g.view;
}

}  // namespace wick::check
