#pragma once
#include <stdexcept>
#include <string>

namespace wick {

enum class ErrorKind { Shape, DType, Device, Unsupported, OutOfMemory, Io, Index, Argument, Internal };

const char* error_kind_name(ErrorKind k);

// The one exception type of wick. what() starts with the kind, then the op and the fix.
class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& msg);
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

}  // namespace wick
