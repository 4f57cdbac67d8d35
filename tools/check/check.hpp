#pragma once
// The op-parity harness behind `wick check`: every op x dtype x layout case, run on a layout
// variant and on contiguous copies of the same inputs (and, on a GPU, against the CPU), then
// compared by normalised MSE with NaN/Inf agreement. Built as the wick_check library of the
// `wick` tool and the test suites; not part of libwick.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "wick/tensor.hpp"

namespace wick::check {

enum class LayoutKind { Contiguous, Transposed, Offset, Broadcast, Empty };
constexpr LayoutKind kAllLayouts[] = {LayoutKind::Contiguous, LayoutKind::Transposed, LayoutKind::Offset,
                                      LayoutKind::Broadcast, LayoutKind::Empty};
const char* layout_name(LayoutKind k);

// Value ranges of generated inputs. Integer dtypes always get small integers.
enum class Values {
  Normal,    // floats: N(0, 1); signed ints: [-9, 9]; unsigned: [0, 9]
  Positive,  // floats: [0.5, 3); ints: [1, 9] (divisors, log/sqrt/pow bases)
  Unit,      // floats: [-1, 1); ints as Normal
};

// A region of a larger buffer that an in-place op may write; everything else must stay as it was.
struct Guard {
  Tensor big;                       // contiguous, offset 0
  Tensor view;                      // the destination inside big
  std::vector<unsigned char> before;  // big's bytes when the guard was made
};

// Builds the inputs of one case: the same values whatever the layout, laid out as the kind asks
// (or contiguous when `reference` is set), on one device.
class Inputs {
 public:
  Inputs(Device device, DType dtype, LayoutKind kind, bool reference);
  Device device() const { return device_; }
  DType dtype() const { return dtype_; }
  LayoutKind kind() const { return kind_; }
  bool reference() const { return reference_; }

  // `size`, or 0 in the Empty layout: cases use it for the dim they let become empty.
  size_t n(size_t size) const { return kind_ == LayoutKind::Empty ? 0 : size; }

  // A tensor of the case dtype (or `dtype`) with seeded values, in the case layout.
  Tensor x(const Shape& shape, uint64_t seed, Values v = Values::Normal) const { return x_as(dtype_, shape, seed, v); }
  Tensor x_as(DType dtype, const Shape& shape, uint64_t seed, Values v = Values::Normal) const;
  // The same, but never broadcast (for operands whose shape the op ties to another).
  Tensor x_nb(const Shape& shape, uint64_t seed, Values v = Values::Normal) const;
  // Indices in [0, limit) of dtype idt. With unique_along >= 0 each 1-D fiber along that dim holds
  // distinct indices (scatter_set stays deterministic); needs shape[dim] <= limit.
  Tensor ids(const Shape& shape, uint64_t seed, size_t limit, DType idt = DType::U32, int unique_along = -1) const;
  // A u8 0/1 mask.
  Tensor mask(const Shape& shape, uint64_t seed) const;
  // An already built host tensor (values fixed) moved to the device and laid out as the kind asks.
  Tensor lay(const Tensor& t, bool allow_broadcast = false) const;
  // A rank-2 destination for an in-place op: a narrow() view inside a larger buffer whose other
  // bytes are recorded and checked after the case ran.
  Tensor guarded(const Shape& shape, uint64_t seed, Values v = Values::Normal) const;
  const std::vector<Guard>& guards() const { return *guards_; }

 private:
  Tensor values(DType dtype, const Shape& shape, uint64_t seed, Values v) const;  // contiguous, cpu
  Tensor arrange(const Tensor& host, bool allow_broadcast) const;

  Device device_;
  DType dtype_;
  LayoutKind kind_;
  bool reference_;
  std::shared_ptr<std::vector<Guard>> guards_;
};

using CaseFn = std::function<std::vector<Tensor>(Inputs&)>;

struct Case {
  std::string op;       // base name, what --op matches (e.g. "sum")
  std::string variant;  // extra detail shown after the name (e.g. "dims=0,1"); may be empty
  DType dtype;
  LayoutKind layout;
  CaseFn fn;
  std::string full_name() const { return variant.empty() ? op : op + "[" + variant + "]"; }
};

// Every case of the Tensor API, for every layout.
std::vector<Case> all_cases();

// ---- comparison (exposed for tests)
struct Verdict {
  bool ok = true;
  std::string reason;  // "nmse 1.2e-3 > 1e-12 bound", "NaN mismatch at 3 (got 1.5, want nan)", ...
};
// Per-dtype bound on the normalised MSE; 0 for integer dtypes (exact).
double nmse_bound(DType d);
// sum((a-b)^2) / max(sum(b^2), tiny) over positions where both are finite.
double nmse(const std::vector<double>& got, const std::vector<double>& want);
// Host decode of any tensor's values (from raw bytes, independent of the library's casts).
std::vector<double> host_values(const Tensor& t);
// Shapes, dtypes, NaN positions, Inf values, then nmse (floats) or exact equality (ints).
Verdict compare(const Tensor& got, const Tensor& want);
Verdict compare_values(DType dtype, const std::vector<double>& got, const std::vector<double>& want);
// Every byte of g.big outside g.view must equal g.before.
Verdict check_guard(const Guard& g);
// Storage element indices (of the view's storage) that a layout touches.
std::vector<size_t> view_elements(const Layout& l);

// ---- running
struct Options {
  std::vector<Device> devices;  // empty: every available device
  std::string op;               // empty: all
  std::string dtype;            // empty: all
  bool verbose = false;
};
struct Summary {
  size_t passed = 0, failed = 0;
};
// Runs the selected cases, printing a FAIL line per failure (and every case with verbose).
Summary run_checks(const Options& opt);
// One case on one device; ok or the failure reason.
Verdict run_case(const Case& c, Device device);

}  // namespace wick::check
