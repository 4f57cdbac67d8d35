#include "wick/dtype.hpp"

#include "wick/error.hpp"

namespace wick {

DType dtype_from_name(const std::string& name) {
  for (DType d : kAllDTypes)
    if (name == dtype_name(d)) return d;
  std::string names;
  for (DType d : kAllDTypes) names += std::string(names.empty() ? "" : " ") + dtype_name(d);
  throw Error(ErrorKind::DType, "unknown dtype '" + name + "'; use one of " + names);
}

}  // namespace wick
