// Cases: sum/min/max/argmin/argmax over one dim, several dims and all; mean, var, log_sum_exp,
// norm, cumsum, arg_sort, sort and top_k. Min/max-like reductions keep the Empty layout's zero-size dim
// out of the reduced dims (reducing an empty dim has no min); sums reduce over it too.
#include <algorithm>
#include <cmath>

#include "check/cases.hpp"

namespace wick::check {

namespace {

using DimsFn = Tensor (Tensor::*)(const std::vector<int64_t>&, bool) const;
using ArgFn = Tensor (Tensor::*)(int64_t, bool) const;

}  // namespace

void add_reduce_cases(std::vector<Case>& out) {
  struct Dims {
    const char* name;
    std::vector<int64_t> dims;
    bool keepdim;
  };
  // Rank-3 input (5, 17, 33) whose dim 0 is the one that may become empty.
  const std::vector<Dims> dim_sets = {
      {"dim=-1", {-1}, false}, {"dim=1,keep", {1}, true}, {"dims=1,2", {1, 2}, false}, {"dims=0,2,keep", {0, 2}, true},
  };
  const std::pair<const char*, DimsFn> minmax[] = {{"min", &Tensor::min}, {"max", &Tensor::max}};
  for (const Dims& ds : dim_sets) {
    add(out, "sum", ds.name, kAll, [ds](Inputs& in) -> std::vector<Tensor> {
      return {in.x({in.n(5), 17, 33}, 201).sum(ds.dims, ds.keepdim)};
    });
    bool touches_0 = std::find(ds.dims.begin(), ds.dims.end(), 0) != ds.dims.end();
    for (auto [name, fn] : minmax)
      add(out, name, ds.name, kAll, [ds, fn](Inputs& in) -> std::vector<Tensor> {
        return {(in.x({in.n(5), 17, 33}, 202).*fn)(ds.dims, ds.keepdim)};
      }, touches_0 ? layouts_but_empty() : std::vector<LayoutKind>(std::begin(kAllLayouts), std::end(kAllLayouts)));
    add(out, "mean", ds.name, kFloats, [ds](Inputs& in) -> std::vector<Tensor> {
      return {in.x({in.n(5), 17, 33}, 203).mean(ds.dims, ds.keepdim)};
    });
    add(out, "var", ds.name, kFloats, [ds](Inputs& in) -> std::vector<Tensor> {
      Tensor x = in.x({in.n(5), 17, 33}, 204);
      return {x.var(ds.dims, ds.keepdim), x.var(ds.dims, ds.keepdim, false)};
    });
    add(out, "log_sum_exp", ds.name, kFloats, [ds](Inputs& in) -> std::vector<Tensor> {
      return {in.x({in.n(5), 17, 33}, 205).log_sum_exp(ds.dims, ds.keepdim)};
    });
  }
  add(out, "sum", "all", kAll, [](Inputs& in) -> std::vector<Tensor> {
    Tensor x = in.x({in.n(17), 33}, 206);
    return {x.sum_all(), x.sum({0, 1})};
  });
  for (auto [name, fn] : minmax)
    add(out, name, "all", kAll, [fn](Inputs& in) -> std::vector<Tensor> {
      return {(in.x({17, 33}, 207).*fn)({0, 1}, false)};
    }, layouts_but_empty());
  const std::pair<const char*, ArgFn> args[] = {{"argmin", &Tensor::argmin}, {"argmax", &Tensor::argmax}};
  for (auto [name, fn] : args) {
    add(out, name, "dim=-1", kAll, [fn](Inputs& in) -> std::vector<Tensor> {
      return {(in.x({in.n(5), 17, 33}, 208).*fn)(-1, false)};
    });
    add(out, name, "dim=1,keep", kAll, [fn](Inputs& in) -> std::vector<Tensor> {
      return {(in.x({in.n(5), 17, 33}, 209).*fn)(1, true)};
    });
    add(out, name, "dim=0", kAll, [fn](Inputs& in) -> std::vector<Tensor> {
      return {(in.x({5, in.n(17), 33}, 210).*fn)(0, false)};
    });
    // NaN handling: the first NaN's index wins.
    add(out, name, "nan", kFloats, [fn](Inputs& in) -> std::vector<Tensor> {
      std::vector<double> v = {1, NAN, 3, -2, NAN, 0, 2, 2, -2, 5, 5, 1};
      Tensor t = Tensor::from_vector(v, {3, 4}).to_dtype(in.dtype());
      return {(in.lay(t).*fn)(-1, false), (in.lay(t).*fn)(0, false)};
    }, layouts_but_empty());
  }
  add(out, "norm", "", kFloats, [](Inputs& in) -> std::vector<Tensor> { return {in.x({in.n(17), 33}, 211).norm()}; });
  for (int64_t d : {0, 1})
    add(out, "cumsum", "dim=" + std::to_string(d), kAll, [d](Inputs& in) -> std::vector<Tensor> {
      return {in.x({in.n(17), 33}, 212).cumsum(d)};
    });
  for (bool asc : {true, false}) {
    add(out, "arg_sort", asc ? "asc" : "desc", kAll, [asc](Inputs& in) -> std::vector<Tensor> {
      return {in.x({in.n(17), 33}, 213).arg_sort_last_dim(asc)};
    });
    add(out, "sort", asc ? "asc" : "desc", kAll, [asc](Inputs& in) -> std::vector<Tensor> {
      auto [v, i] = in.x({in.n(17), 33}, 214).sort_last_dim(asc);
      return {v, i};
    });
  }
  // Integer and half inputs have ties, so the order of equal keys is checked too. k = 4 takes the
  // CPU's heap path, k = 20 its nth_element path, k = 33 the whole row.
  for (size_t k : {size_t(1), size_t(4), size_t(20), size_t(33)})
    add(out, "top_k", "k=" + std::to_string(k), kAll, [k](Inputs& in) -> std::vector<Tensor> {
      auto [v, i] = in.x({in.n(17), 33}, 215).top_k_last_dim(k);
      return {v, i};
    });
}

}  // namespace wick::check
