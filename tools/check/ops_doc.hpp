#pragma once
// docs/ops.md, generated from the op tables (`wick ops --markdown`); CI fails when it is stale.
#include <string>

namespace wick::check {

// The whole text of docs/ops.md.
std::string ops_markdown();

}  // namespace wick::check
