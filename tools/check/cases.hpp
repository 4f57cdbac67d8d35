#pragma once
// Internal to the harness: helpers the per-family case files share.
#include <initializer_list>
#include <stdexcept>
#include <vector>

#include "check/check.hpp"

namespace wick::check {

inline const std::vector<DType> kAll(std::begin(kAllDTypes), std::end(kAllDTypes));
inline const std::vector<DType> kFloats = {DType::BF16, DType::F16, DType::F32, DType::F64, DType::F8E4M3};
inline const std::vector<DType> kInts = {DType::U8, DType::U32, DType::I16, DType::I32, DType::I64};
inline const std::vector<DType> kIdDTypes = {DType::U8, DType::U32, DType::I16, DType::I32, DType::I64};

// A failure that is not a value mismatch: bytes a case must not change did change.
struct GuardFailure : std::runtime_error {
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

}  // namespace wick::check
