#include "wick/error.hpp"

namespace wick {

const char* error_kind_name(ErrorKind k) {
  switch (k) {
    case ErrorKind::Shape: return "shape";
    case ErrorKind::DType: return "dtype";
    case ErrorKind::Device: return "device";
    case ErrorKind::Unsupported: return "unsupported";
    case ErrorKind::OutOfMemory: return "out of memory";
    case ErrorKind::Io: return "io";
    case ErrorKind::Index: return "index";
    case ErrorKind::Argument: return "argument";
    case ErrorKind::Internal: return "internal";
  }
  return "unknown";
}

Error::Error(ErrorKind kind, const std::string& msg)
    : std::runtime_error(std::string("wick ") + error_kind_name(kind) + " error: " + msg), kind_(kind) {}

}  // namespace wick
