// Cases: matmul (plain, transposed operands, batched with broadcast, empty k), dot, mv.
#include "check/cases.hpp"

namespace wick::check {

void add_linalg_cases(std::vector<Case>& out) {
  add(out, "matmul", "", kAll, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({in.n(17), 24}, 31).matmul(in.x({24, 33}, 32))};
  });
  // Operands handed over as transposed views, whatever the layout kind.
  add(out, "matmul", "a.t,b.t", kAll, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({24, in.n(17)}, 33).t().matmul(in.x({33, 24}, 34).t())};
  });
  add(out, "matmul", "batched,bcast", kAll, [](Inputs& in) -> std::vector<Tensor> {
    Tensor a = in.x({2, 3, in.n(9), 16}, 35);
    Tensor b = in.x({3, 16, 11}, 36);  // broadcast over a's leading batch dim
    Tensor c = in.x({16, 5}, 37);      // a plain matrix against a batch
    return {a.matmul(b), a.matmul(c)};
  });
  add(out, "matmul", "k=0", kAll, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({7, 0}, 38).matmul(in.x({0, 5}, 39))};
  });
  add(out, "dot", "", kAll, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({in.n(37)}, 40).dot(in.x({in.n(37)}, 41))};
  });
  add(out, "mv", "", kAll, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({in.n(17), 33}, 42).mv(in.x({33}, 43))};
  });
}

}  // namespace wick::check
