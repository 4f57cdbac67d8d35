// Cases: casts, copies, cat and stack.
#include <cmath>

#include "check/cases.hpp"

namespace wick::check {

void add_copy_cases(std::vector<Case>& out) {
  for (DType to : kAll) {
    add(out, "to_dtype", std::string("to=") + dtype_name(to), kAll, [to](Inputs& in) -> std::vector<Tensor> {
      return {in.x({in.n(17), 33}, 11).to_dtype(to)};
    });
    // Out-of-range and special values: saturation, NaN -> 0, inf, rounding ties.
    add(out, "to_dtype", std::string("special,to=") + dtype_name(to), kFloats,
        [to](Inputs& in) -> std::vector<Tensor> {
          std::vector<double> v = {NAN, INFINITY, -INFINITY, 1e10, -1e10, 0.5,  -0.5, 300.5,
                                   -300.5, 65504, 70000, 2.5,  -2.5, 1e-8, 448, -129.7};
          size_t rows = in.n(2);
          std::vector<double> all;
          for (size_t r = 0; r < rows; ++r) all.insert(all.end(), v.begin(), v.end());
          Tensor t = Tensor::from_vector(all, {rows, v.size()}).to_dtype(in.dtype());
          return {in.lay(t).to_dtype(to)};
        });
  }
  add(out, "copy", "", kAll, [](Inputs& in) -> std::vector<Tensor> { return {in.x({in.n(17), 33}, 12).copy()}; });
  add(out, "contiguous", "", kAll, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({3, in.n(17), 33}, 13).contiguous()};
  });
  add(out, "cat", "dim=0", kAll, [](Inputs& in) -> std::vector<Tensor> {
    return {Tensor::cat({in.x({in.n(5), 33}, 14), in.x({7, 33}, 15)}, 0)};
  });
  add(out, "cat", "dim=1", kAll, [](Inputs& in) -> std::vector<Tensor> {
    return {Tensor::cat({in.x({in.n(17), 4}, 16), in.x({in.n(17), 9}, 17), in.x({in.n(17), 1}, 18)}, 1)};
  });
  add(out, "stack", "dim=0", kAll, [](Inputs& in) -> std::vector<Tensor> {
    return {Tensor::stack({in.x({in.n(5), 33}, 19), in.x({in.n(5), 33}, 20)}, 0)};
  });
  add(out, "stack", "dim=2", kAll, [](Inputs& in) -> std::vector<Tensor> {
    return {Tensor::stack({in.x({in.n(5), 33}, 21), in.x({in.n(5), 33}, 22), in.x({in.n(5), 33}, 23)}, 2)};
  });
}

}  // namespace wick::check
