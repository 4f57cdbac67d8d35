// Cases: index_select, gather, scatter(+_add, in place with guard bytes), index_add, embedding
// (each also with sentinel ids), one_hot, slice_assign/slice_scatter, slice_set (a size_t or a
// tensor start)/copy_from (in place),
// flip, pad, tril/triu, repeat.
#include <cmath>
#include <cstdint>
#include <vector>

#include "check/cases.hpp"

namespace wick::check {

namespace {

// The id dtypes a case runs with: u32 for every value dtype, every id dtype for f32 values.
std::vector<std::pair<DType, std::vector<DType>>> id_plans() {
  std::vector<std::pair<DType, std::vector<DType>>> p;
  for (DType idt : kIdDTypes) {
    std::vector<DType> values = {DType::F32};
    if (idt == DType::U32) values = kAll;
    p.push_back({idt, values});
  }
  return p;
}

std::string ids_name(DType idt) { return std::string("ids=") + dtype_name(idt); }

// The sentinel id of idt (its maximum: a zero read, a skipped write), as an int64.
int64_t sentinel_of(DType idt) {
  switch (idt) {
    case DType::U8: return 255;
    case DType::U32: return 4294967295LL;
    case DType::I16: return 32767;
    case DType::I32: return 2147483647LL;
    default: return INT64_MAX;
  }
}

// in.ids(...) with about a third of the positions (seeded) replaced by the sentinel, laid out
// as the case asks. Replacing ids keeps the others distinct where unique_along asked for it.
Tensor ids_with_sentinels(const Inputs& in, const Shape& shape, uint64_t seed, size_t limit, DType idt,
                          int unique_along = -1) {
  Tensor base = in.ids(shape, seed, limit, idt, unique_along).to_dtype(DType::I64).to_device(Device::cpu());
  std::vector<int64_t> v = base.contiguous().to_vector<int64_t>();
  for (size_t i = 0; i < v.size(); ++i)
    if ((i * 2654435761u + seed) % 3 == 0) v[i] = sentinel_of(idt);
  return in.lay(Tensor::from_vector(v, shape).to_dtype(idt));
}

// Elements of `got` outside the assigned block [r0, r0+rn) x [c0, c0+cn) must equal `orig`.
void check_untouched(const Tensor& got, const Tensor& orig, size_t r0, size_t rn, size_t c0, size_t cn) {
  const size_t rows = orig.dim(0), cols = orig.dim(1);
  auto same = [&](size_t r, size_t nr, size_t c, size_t nc) {
    if (nr == 0 || nc == 0) return;
    Verdict v = compare(got.narrow(0, r, nr).narrow(1, c, nc), orig.narrow(0, r, nr).narrow(1, c, nc));
    if (!v.ok) throw GuardFailure("elements outside the assigned region changed: " + v.reason);
  };
  same(0, r0, 0, cols);
  same(r0 + rn, rows - r0 - rn, 0, cols);
  same(r0, rn, 0, c0);
  same(r0, rn, c0 + cn, cols - c0 - cn);
}

}  // namespace

void add_index_cases(std::vector<Case>& out) {
  for (auto& [idt, dtypes] : id_plans()) {
    add(out, "index_select", "dim=0," + ids_name(idt), dtypes, [idt](Inputs& in) -> std::vector<Tensor> {
      return {in.x({17, 33}, 301).index_select(in.ids({in.n(7)}, 302, 17, idt), 0)};
    });
    add(out, "index_select", "dim=1," + ids_name(idt), dtypes, [idt](Inputs& in) -> std::vector<Tensor> {
      return {in.x({in.n(17), 33}, 303).index_select(in.ids({9}, 304, 33, idt), 1)};
    });
    add(out, "gather", "dim=1," + ids_name(idt), dtypes, [idt](Inputs& in) -> std::vector<Tensor> {
      return {in.x({17, 33}, 305).gather(in.ids({in.n(17), 5}, 306, 33, idt), 1)};
    });
    add(out, "gather", "dim=0," + ids_name(idt), dtypes, [idt](Inputs& in) -> std::vector<Tensor> {
      return {in.x({17, 33}, 307).gather(in.ids({4, in.n(33)}, 308, 17, idt), 0)};
    });
    // scatter_set needs distinct ids per fiber to be deterministic; scatter_add takes repeats.
    add(out, "scatter", "dim=1," + ids_name(idt), dtypes, [idt](Inputs& in) -> std::vector<Tensor> {
      Tensor ids = in.ids({in.n(17), 5}, 309, 33, idt, 1);
      return {in.x({in.n(17), 33}, 310).scatter(ids, in.x({in.n(17), 5}, 311), 1)};
    });
    add(out, "scatter_add", "dim=0," + ids_name(idt), dtypes, [idt](Inputs& in) -> std::vector<Tensor> {
      Tensor ids = in.ids({6, in.n(33)}, 312, 17, idt);
      return {in.x({17, in.n(33)}, 313).scatter_add(ids, in.x({6, in.n(33)}, 314), 0)};
    });
    add(out, "scatter_set", "dim=1," + ids_name(idt), dtypes, [idt](Inputs& in) -> std::vector<Tensor> {
      Tensor dst = in.guarded({in.n(17), 33}, 315);
      dst.scatter_set(in.ids({in.n(17), 5}, 316, 33, idt, 1), in.x({in.n(17), 5}, 317), 1);
      return {dst};
    });
    add(out, "scatter_add_set", "dim=0," + ids_name(idt), dtypes, [idt](Inputs& in) -> std::vector<Tensor> {
      Tensor dst = in.guarded({17, in.n(33)}, 318);
      dst.scatter_add_set(in.ids({6, in.n(33)}, 319, 17, idt), in.x({6, in.n(33)}, 320), 0);
      return {dst};
    });
    add(out, "index_add", "dim=0," + ids_name(idt), dtypes, [idt](Inputs& in) -> std::vector<Tensor> {
      return {in.x({17, 33}, 321).index_add(in.ids({in.n(9)}, 322, 17, idt), in.x({in.n(9), 33}, 323), 0)};
    });
    add(out, "index_add", "dim=1," + ids_name(idt), dtypes, [idt](Inputs& in) -> std::vector<Tensor> {
      return {in.x({in.n(17), 33}, 324).index_add(in.ids({5}, 325, 33, idt), in.x({in.n(17), 5}, 326), 1)};
    });
    add(out, "embedding", ids_name(idt), dtypes, [idt](Inputs& in) -> std::vector<Tensor> {
      return {in.x({20, 33}, 327).embedding(in.ids({in.n(6), 4}, 328, 20, idt))};
    });
    add(out, "one_hot", ids_name(idt), dtypes, [idt](Inputs& in) -> std::vector<Tensor> {
      return {Tensor::one_hot(in.ids({in.n(6), 4}, 329, 10, idt), 10, in.dtype())};
    });
  }
  // The sentinel id: zero rows / elements from index_select, gather and embedding; skipped
  // writes in scatter, scatter_add (also in place) and index_add (80 ids take the GPU's sorted
  // index_add path).
  for (auto& [idt, dtypes] : id_plans()) {
    const std::string v = "sentinel," + ids_name(idt);
    add(out, "index_select", "dim=0," + v, dtypes, [idt](Inputs& in) -> std::vector<Tensor> {
      return {in.x({17, 33}, 351).index_select(ids_with_sentinels(in, {in.n(7)}, 352, 17, idt), 0)};
    });
    add(out, "index_select", "dim=1," + v, dtypes, [idt](Inputs& in) -> std::vector<Tensor> {
      return {in.x({in.n(17), 33}, 353).index_select(ids_with_sentinels(in, {9}, 354, 33, idt), 1)};
    });
    add(out, "gather", "dim=1," + v, dtypes, [idt](Inputs& in) -> std::vector<Tensor> {
      return {in.x({17, 33}, 355).gather(ids_with_sentinels(in, {in.n(17), 5}, 356, 33, idt), 1)};
    });
    add(out, "scatter", "dim=1," + v, dtypes, [idt](Inputs& in) -> std::vector<Tensor> {
      Tensor ids = ids_with_sentinels(in, {in.n(17), 5}, 357, 33, idt, 1);
      return {in.x({in.n(17), 33}, 358).scatter(ids, in.x({in.n(17), 5}, 359), 1)};
    });
    add(out, "scatter_add", "dim=0," + v, dtypes, [idt](Inputs& in) -> std::vector<Tensor> {
      Tensor ids = ids_with_sentinels(in, {6, in.n(33)}, 360, 17, idt);
      return {in.x({17, in.n(33)}, 361).scatter_add(ids, in.x({6, in.n(33)}, 362), 0)};
    });
    add(out, "scatter_set", "dim=1," + v, dtypes, [idt](Inputs& in) -> std::vector<Tensor> {
      Tensor dst = in.guarded({in.n(17), 33}, 363);
      dst.scatter_set(ids_with_sentinels(in, {in.n(17), 5}, 364, 33, idt, 1), in.x({in.n(17), 5}, 365), 1);
      return {dst};
    });
    add(out, "scatter_add_set", "dim=0," + v, dtypes, [idt](Inputs& in) -> std::vector<Tensor> {
      Tensor dst = in.guarded({17, in.n(33)}, 366);
      dst.scatter_add_set(ids_with_sentinels(in, {6, in.n(33)}, 367, 17, idt), in.x({6, in.n(33)}, 368), 0);
      return {dst};
    });
    add(out, "index_add", "dim=0," + v, dtypes, [idt](Inputs& in) -> std::vector<Tensor> {
      return {in.x({17, 33}, 369).index_add(ids_with_sentinels(in, {in.n(80)}, 370, 17, idt), in.x({in.n(80), 33}, 371),
                                            0)};
    });
    add(out, "index_add", "dim=1," + v, dtypes, [idt](Inputs& in) -> std::vector<Tensor> {
      return {in.x({in.n(17), 33}, 372).index_add(ids_with_sentinels(in, {5}, 373, 33, idt), in.x({in.n(17), 5}, 374),
                                                  1)};
    });
    add(out, "embedding", v, dtypes, [idt](Inputs& in) -> std::vector<Tensor> {
      return {in.x({20, 33}, 375).embedding(ids_with_sentinels(in, {in.n(6), 4}, 376, 20, idt))};
    });
  }
  add(out, "slice_assign", "", kAll, [](Inputs& in) -> std::vector<Tensor> {
    Tensor x = in.x({17, 33}, 330);
    size_t rn = in.n(5);
    Tensor r = x.slice_assign({{3, int64_t(3 + rn)}, {4, 14}}, in.x({rn, 10}, 331));
    check_untouched(r, x, 3, rn, 4, 10);
    return {r};
  });
  add(out, "slice_scatter", "dim=1", kAll, [](Inputs& in) -> std::vector<Tensor> {
    Tensor x = in.x({in.n(17), 33}, 332);
    Tensor r = x.slice_scatter(in.x({in.n(17), 5}, 333), 1, 7);
    check_untouched(r, x, 0, x.dim(0), 7, 5);
    return {r};
  });
  // In place into a guarded view: rows through copy2d (dim=1, dim=0), one-element rows of a
  // transposed view (transposed), and many short runs through one scatter (scatter).
  add(out, "slice_set", "dim=1", kAll, [](Inputs& in) -> std::vector<Tensor> {
    Tensor dst = in.guarded({in.n(17), 33}, 601);
    dst.slice_set(in.x({in.n(17), 5}, 602), 1, 7);
    return {dst};
  });
  add(out, "slice_set", "dim=0", kAll, [](Inputs& in) -> std::vector<Tensor> {
    Tensor dst = in.guarded({17, in.n(33)}, 603);
    dst.slice_set(in.x({4, in.n(33)}, 604), 0, 9);
    return {dst};
  });
  add(out, "slice_set", "transposed", kAll, [](Inputs& in) -> std::vector<Tensor> {
    Tensor dst = in.guarded({in.n(70), 6}, 605);
    dst.t().slice_set(in.x({3, in.n(70)}, 606), 0, 2);
    return {dst};
  });
  add(out, "slice_set", "scatter", kAll, [](Inputs& in) -> std::vector<Tensor> {
    Tensor dst = in.guarded({6, in.n(70)}, 607);
    dst.t().slice_set(in.x({in.n(70), 3}, 608), 1, 2);
    return {dst};
  });
  // The start held in a tensor (read by the device), in range and clamped (40 -> 33 - 5).
  for (int64_t start : {7, 40})
    add(out, "slice_set", start == 7 ? "tensor_start" : "tensor_start,clamped", kAll,
        [start](Inputs& in) -> std::vector<Tensor> {
          Tensor dst = in.guarded({in.n(17), 33}, 611);
          dst.slice_set(in.x({in.n(17), 5}, 612), 1, in.lay(Tensor::full({1}, start, DType::I32)));
          return {dst};
        });
  add(out, "copy_from", "", kAll, [](Inputs& in) -> std::vector<Tensor> {
    Tensor dst = in.guarded({in.n(17), 33}, 609);
    dst.copy_from(in.x({in.n(17), 33}, 610));
    return {dst};
  });
  for (auto dims : std::vector<std::vector<int64_t>>{{0}, {-1}, {0, 1}})
    add(out, "flip", dims.size() == 2 ? "dims=0,1" : dims[0] == 0 ? "dim=0" : "dim=-1", kAll,
        [dims](Inputs& in) -> std::vector<Tensor> { return {in.x({in.n(17), 33}, 334).flip(dims)}; });
  add(out, "pad", "zeros", kAll, [](Inputs& in) -> std::vector<Tensor> {
    Tensor x = in.x({in.n(17), 33}, 335);
    return {x.pad_with_zeros(1, 2, 3), x.pad_with_zeros(0, 1, 0)};
  });
  add(out, "pad", "same", kAll, [](Inputs& in) -> std::vector<Tensor> {
    Tensor x = in.x({17, in.n(33)}, 336);
    return {x.pad_with_same(0, 2, 3), x.pad_with_same(0, 0, 1)};
  });
  for (int64_t diag : {0, 2, -3}) {
    add(out, "tril", "k=" + std::to_string(diag), kAll, [diag](Inputs& in) -> std::vector<Tensor> {
      return {in.x({in.n(17), 33}, 337).tril(diag), in.x({3, in.n(9), 7}, 338).tril(diag)};
    });
    add(out, "triu", "k=" + std::to_string(diag), kAll, [diag](Inputs& in) -> std::vector<Tensor> {
      return {in.x({in.n(17), 33}, 339).triu(diag), in.x({3, in.n(9), 7}, 340).triu(diag)};
    });
  }
  add(out, "repeat", "", kAll, [](Inputs& in) -> std::vector<Tensor> {
    Tensor x = in.x({in.n(5), 7}, 341);
    return {x.repeat({2, 3}), x.repeat({3, 1, 2})};
  });
}

}  // namespace wick::check
