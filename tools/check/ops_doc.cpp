#include "check/ops_doc.hpp"

#include "ops/op_kinds.hpp"

namespace wick::check {

std::string ops_markdown() {
  std::string s = "# Ops x dtypes x backends\n\n| op |\n| --- |\n";
  for (int i = 0; i < kNumUnaryOps; ++i) s += std::string("| ") + unary_op_name(UnaryOp(i)) + " |\n";
  return s;
}

}  // namespace wick::check
