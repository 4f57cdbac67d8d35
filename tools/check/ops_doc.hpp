#pragma once
// docs/ops.md, generated from the op tables (`wick ops --markdown`); CI fails when it is stale.
#include <string>
#include <vector>

namespace wick::check {

// One row of docs/ops.md. The element-wise and reduce rows come from src/ops/op_table.hpp;
// the others are written in ops_doc.cpp.
struct OpRow {
  std::string family;              // empty for a composite
  std::string ops;                 // as printed
  std::string dtypes;              // "all", "float", ...
  std::vector<std::string> cases;  // the parity cases (`wick check --op NAME`) that check the row
  std::string cpu = "run", cuda = "run", rocm = "compiled";
};

// The backend entries (first table of docs/ops.md) and the composites of src/core (second).
std::vector<OpRow> backend_op_rows();
std::vector<OpRow> composite_op_rows();

// The whole text of docs/ops.md.
std::string ops_markdown();

}  // namespace wick::check
