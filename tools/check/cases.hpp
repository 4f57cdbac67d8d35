#pragma once
// Internal to the harness: helpers the per-family case files share.
#include <initializer_list>
#include <stdexcept>
#include <vector>

#include "check/check.hpp"

namespace wick::check {

inline const std::vector<DType> kAll(std::begin(kAllDTypes), std::end(kAllDTypes));
// The float and integer dtypes of the dtype list (wick/dtype.hpp), in its order.
inline std::vector<DType> dtypes_where(bool (*keep)(DType)) {
  std::vector<DType> out;
  for (DType d : kAllDTypes)
    if (keep(d)) out.push_back(d);
  return out;
}
inline const std::vector<DType> kFloats = dtypes_where(dtype_is_float);
inline const std::vector<DType> kInts = dtypes_where(dtype_is_int);
inline const std::vector<DType> kIdDTypes = {DType::U8, DType::U32, DType::I16, DType::I32, DType::I64};

// A failure that is not a value mismatch: bytes a case must not change did change.
struct GuardFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A case that checks its results itself against an independent host reference (the quantized
// ops, whose devices may legitimately differ within a derived bound) throws this on a mismatch.
struct ReferenceFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Registers fn for each dtype in every layout (or only `layouts`).
inline void add(std::vector<Case>& out, const std::string& op, const std::string& variant,
                const std::vector<DType>& dtypes, CaseFn fn,
                std::vector<LayoutKind> layouts = std::vector<LayoutKind>(std::begin(kAllLayouts),
                                                                          std::end(kAllLayouts))) {
  for (DType d : dtypes)
    for (LayoutKind k : layouts) out.push_back({op, variant, d, k, fn});
}

inline std::vector<LayoutKind> layouts_but_empty() {
  return {LayoutKind::Contiguous, LayoutKind::Transposed, LayoutKind::Offset, LayoutKind::Broadcast};
}

void add_copy_cases(std::vector<Case>& out);
void add_elementwise_cases(std::vector<Case>& out);
void add_reduce_cases(std::vector<Case>& out);
void add_index_cases(std::vector<Case>& out);
void add_linalg_cases(std::vector<Case>& out);
void add_conv_cases(std::vector<Case>& out);
void add_nn_cases(std::vector<Case>& out);
void add_quant_cases(std::vector<Case>& out);

}  // namespace wick::check
