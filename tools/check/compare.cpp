// Comparison of results: normalised MSE, NaN/Inf agreement, guard bytes.
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <type_traits>

#include "check/check.hpp"

namespace wick::check {

const char* layout_name(LayoutKind k) {
  switch (k) {
    case LayoutKind::Contiguous: return "contiguous";
    case LayoutKind::Transposed: return "transposed";
    case LayoutKind::Offset: return "offset";
    case LayoutKind::Broadcast: return "broadcast";
    case LayoutKind::Empty: return "empty";
  }
  return "?";
}

double nmse_bound(DType d) {
  switch (d) {
    case DType::F64: return 1e-24;
    case DType::F32: return 1e-12;
    case DType::F16: return 1e-6;
    case DType::BF16: return 1e-4;
    case DType::F8E4M3: return 1e-2;
    default: return 0;
  }
}

double nmse(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if (!std::isfinite(got[i]) || !std::isfinite(want[i])) continue;
    double d = got[i] - want[i];
    num += d * d;
    den += want[i] * want[i];
  }
  return num / std::max(den, std::numeric_limits<double>::min());
}

// Storage bytes -> double: the float types through their own conversion (f16, bf16 and f8e4m3
// are structs with an explicit float conversion), everything else by value.
template <class T> static void decode_as(const unsigned char* p, size_t n, std::vector<double>& out) {
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(static_cast<void*>(&v), p + i * sizeof(T), sizeof(T));
    if constexpr (std::is_arithmetic_v<T>) out[i] = double(v);
    else out[i] = double(float(v));
  }
}

std::vector<double> host_values(const Tensor& t) {
  const size_t n = t.numel();
  std::vector<unsigned char> raw(n * dtype_size(t.dtype()));
  t.copy_to_host(raw.data());
  std::vector<double> out(n);
  const unsigned char* p = raw.data();
  switch (t.dtype()) {  // one case per row of the dtype list (WICK_DTYPES, wick/dtype.hpp)
#define WICK_DTYPE_CASE(E, name, T, ...) \
  case DType::E: decode_as<T>(p, n, out); break;
    WICK_DTYPES(WICK_DTYPE_CASE)
#undef WICK_DTYPE_CASE
  }
  return out;
}

static std::string num(double v) {
  std::ostringstream s;
  s.precision(9);
  s << v;
  return s.str();
}

Verdict compare_values(DType dtype, const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size())
    return {false, "size " + std::to_string(got.size()) + " != " + std::to_string(want.size())};
  const bool is_float = dtype_is_float(dtype);
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double g = got[i], w = want[i];
    bool mismatch;
    if (is_float && (std::isnan(g) || std::isnan(w))) {
      if (std::isnan(g) != std::isnan(w))
        return {false, "NaN mismatch at element " + std::to_string(i) + " (got " + num(g) + ", want " + num(w) + ")"};
      continue;
    }
    if (is_float && (std::isinf(g) || std::isinf(w))) {
      if (g != w)
        return {false, "Inf mismatch at element " + std::to_string(i) + " (got " + num(g) + ", want " + num(w) + ")"};
      continue;
    }
    mismatch = !is_float && g != w;
    if (mismatch && bad++ == 0) first = i;
  }
  if (bad)
    return {false, std::to_string(bad) + " of " + std::to_string(got.size()) + " values differ, first at element " +
                       std::to_string(first) + " (got " + num(got[first]) + ", want " + num(want[first]) + ")"};
  if (is_float) {
    double e = nmse(got, want), bound = nmse_bound(dtype);
    if (!(e <= bound)) {
      size_t worst = 0;
      double wd = -1;
      for (size_t i = 0; i < got.size(); ++i)
        if (std::isfinite(got[i]) && std::fabs(got[i] - want[i]) > wd) wd = std::fabs(got[i] - want[i]), worst = i;
      return {false, "nmse " + num(e) + " > bound " + num(bound) + " (largest difference at element " +
                         std::to_string(worst) + ": got " + num(got[worst]) + ", want " + num(want[worst]) + ")"};
    }
  }
  return {};
}

Verdict compare(const Tensor& got, const Tensor& want) {
  if (!got.defined() || !want.defined())
    return {got.defined() == want.defined(), "one result is undefined"};
  if (got.shape() != want.shape()) return {false, "shape " + shape_str(got.shape()) + " != " + shape_str(want.shape())};
  if (got.dtype() != want.dtype())
    return {false, std::string("dtype ") + dtype_name(got.dtype()) + " != " + dtype_name(want.dtype())};
  return compare_values(got.dtype(), host_values(got), host_values(want));
}

std::vector<size_t> view_elements(const Layout& l) {
  std::vector<size_t> out;
  const size_t n = l.numel();
  if (n == 0) return out;
  out.reserve(n);
  std::vector<size_t> idx(l.rank(), 0);
  for (size_t k = 0; k < n; ++k) {
    int64_t off = int64_t(l.offset);
    for (size_t d = 0; d < l.rank(); ++d) off += int64_t(idx[d]) * l.strides[d];
    out.push_back(size_t(off));
    for (size_t d = l.rank(); d-- > 0;) {
      if (++idx[d] < l.shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

Verdict check_guard(const Guard& g) {
  const size_t es = dtype_size(g.big.dtype());
  std::vector<unsigned char> now(g.big.numel() * es);
  g.big.copy_to_host(now.data());
  if (now.size() != g.before.size()) return {false, "guard: the buffer changed size"};
  std::vector<char> inside(g.big.numel(), 0);
  for (size_t e : view_elements(g.view.layout()))
    if (e < inside.size()) inside[e] = 1;
  size_t changed = 0, first = 0;
  for (size_t e = 0; e < inside.size(); ++e) {
    if (inside[e]) continue;
    if (std::memcmp(now.data() + e * es, g.before.data() + e * es, es) != 0 && changed++ == 0) first = e;
  }
  if (changed)
    return {false, "guard: " + std::to_string(changed) + " elements outside the destination view " +
                       g.view.layout().str() + " were overwritten (first at storage element " + std::to_string(first) +
                       ")"};
  return {};
}

}  // namespace wick::check
