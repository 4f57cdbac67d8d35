// Indexing family: index_select, gather, scatter(_add)(_set), index_add and the composites.
// Expected values come from tests/fixtures/indexing.json (NumPy, gen_indexing.py) or hand math.
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>

#include "test_util.hpp"

using namespace wick;
using wick::test::all_close;
using wick::test::values;

namespace {

constexpr DType kIdDTypes[] = {DType::U8, DType::U32, DType::I16, DType::I32, DType::I64};

// The same values in another layout: 0 contiguous, 1 transposed storage (rank >= 2, else
// offset), 2 a view at a nonzero offset.
Tensor lay(const Tensor& t, int v) {
  if (v == 1 && t.rank() >= 2) return test::as_transposed(t);
  if (v == 0) return t;
  return test::as_offset(t);
}

std::string where(const std::string& op, size_t c, DType d, DType id, int v) {
  return op + " case " + std::to_string(c) + " dtype " + dtype_name(d) + " ids " + dtype_name(id) + " layout " +
         std::to_string(v);
}

::testing::AssertionResult same(const Tensor& got, const nlohmann::json& want) {
  Shape ws = want.at("shape").get<Shape>();
  if (got.shape() != ws)
    return ::testing::AssertionFailure() << "shape " << shape_str(got.shape()) << " != " << shape_str(ws);
  return all_close(values(got), test::doubles_from_json(want.at("data")), 0, 0);
}

Tensor f32(const std::vector<float>& v, const Shape& s) { return Tensor::from_vector(v, s); }
Tensor i64(const std::vector<int64_t>& v, const Shape& s) { return Tensor::from_vector(v, s); }

// Every fixture case of `only` x every data dtype x every id dtype x three layouts of each
// operand; returns the number of runs.
size_t run_fixture(const std::string& only) {
  static const nlohmann::json fx = test::load_json_fixture("indexing.json");
  size_t runs = 0;
  const auto& cases = fx.at("cases");
  for (size_t c = 0; c < cases.size(); ++c) {
    const auto& k = cases[c];
    const std::string op = k.at("op");
    if (op != only) continue;
    const bool uses_ids = k.contains("ids");
    for (DType d : kAllDTypes) {
      for (DType id : kIdDTypes) {
        if (!uses_ids && id != DType::I64) continue;
        for (int v = 0; v < 3; ++v) {
          SCOPED_TRACE(where(op, c, d, id, v));
          Tensor ids = uses_ids ? lay(test::tensor_from_json(k.at("ids")).to_dtype(id), (v + 1) % 3) : Tensor();
          if (op == "one_hot") {
            EXPECT_TRUE(same(Tensor::one_hot(ids, k.at("depth").get<size_t>(), d), k.at("want")));
            ++runs;
            continue;
          }
          if (op == "meshgrid") {
            std::vector<Tensor> ts;
            for (const auto& t : k.at("ts")) ts.push_back(lay(test::tensor_from_json(t).to_dtype(d), v));
            auto grids = Tensor::meshgrid(ts, k.at("xy").get<bool>());
            EXPECT_EQ(grids.size(), ts.size());
            if (grids.size() != ts.size()) return runs;
            for (size_t g = 0; g < grids.size(); ++g) EXPECT_TRUE(same(grids[g], k.at("wants")[g]));
            ++runs;
            continue;
          }
          Tensor x = lay(test::tensor_from_json(k.at("x")).to_dtype(d), v);
          Tensor src = k.contains("src") ? lay(test::tensor_from_json(k.at("src")).to_dtype(d), (v + 2) % 3) : Tensor();
          const auto& want = k.at("want");
          int64_t dim = k.value("dim", 0);
          if (op == "index_select") {
            EXPECT_TRUE(same(x.index_select(ids, dim), want));
          } else if (op == "gather") {
            EXPECT_TRUE(same(x.gather(ids, dim), want));
          } else if (op == "scatter" || op == "scatter_add") {
            bool add = op == "scatter_add";
            Tensor before = x.copy();
            EXPECT_TRUE(same(add ? x.scatter_add(ids, src, dim) : x.scatter(ids, src, dim), want));
            EXPECT_TRUE(all_close(values(x), values(before), 0, 0)) << "the copying form changed self";
            // The in-place form writes through x's (possibly strided) layout into its storage.
            if (add)
              x.scatter_add_set(ids, src, dim);
            else
              x.scatter_set(ids, src, dim);
            EXPECT_TRUE(same(x, want));
          } else if (op == "index_add") {
            EXPECT_TRUE(same(x.index_add(ids, src, dim), want));
          } else if (op == "embedding") {
            EXPECT_TRUE(same(x.embedding(ids), want));
          } else if (op == "flip") {
            EXPECT_TRUE(same(x.flip(k.at("dims").get<std::vector<int64_t>>()), want));
          } else if (op == "repeat") {
            EXPECT_TRUE(same(x.repeat(k.at("times").get<Shape>()), want));
          } else if (op == "pad_with_zeros") {
            EXPECT_TRUE(same(x.pad_with_zeros(dim, k.at("left"), k.at("right")), want));
          } else if (op == "pad_with_same") {
            EXPECT_TRUE(same(x.pad_with_same(dim, k.at("left"), k.at("right")), want));
          } else if (op == "tril") {
            EXPECT_TRUE(same(x.tril(k.at("diagonal")), want));
          } else if (op == "triu") {
            EXPECT_TRUE(same(x.triu(k.at("diagonal")), want));
          } else if (op == "slice_scatter") {
            EXPECT_TRUE(same(x.slice_scatter(src, dim, k.at("start")), want));
          } else if (op == "slice_assign") {
            std::vector<Range> rs;
            for (const auto& r : k.at("ranges")) rs.push_back({r[0].get<int64_t>(), r[1].get<int64_t>()});
            EXPECT_TRUE(same(x.slice_assign(rs, src), want));
          } else {
            ADD_FAILURE() << "unknown op " << op;
          }
          ++runs;
        }
      }
    }
  }
  return runs;
}

}  // namespace

// Each op: at least 3 NumPy cases, x 10 dtypes x 3 layouts (x 5 id dtypes where it takes ids).
#define WICK_FIXTURE_TEST(Name, op) \
  TEST(IndexingFixture, Name) { EXPECT_GE(run_fixture(op), 3u * 10u * 3u); }
WICK_FIXTURE_TEST(IndexSelect, "index_select")
WICK_FIXTURE_TEST(Gather, "gather")
WICK_FIXTURE_TEST(Scatter, "scatter")
WICK_FIXTURE_TEST(ScatterAdd, "scatter_add")
WICK_FIXTURE_TEST(IndexAdd, "index_add")
WICK_FIXTURE_TEST(Embedding, "embedding")
WICK_FIXTURE_TEST(Flip, "flip")
WICK_FIXTURE_TEST(Repeat, "repeat")
WICK_FIXTURE_TEST(PadWithZeros, "pad_with_zeros")
WICK_FIXTURE_TEST(PadWithSame, "pad_with_same")
WICK_FIXTURE_TEST(Tril, "tril")
WICK_FIXTURE_TEST(Triu, "triu")
WICK_FIXTURE_TEST(SliceScatter, "slice_scatter")
WICK_FIXTURE_TEST(SliceAssign, "slice_assign")
WICK_FIXTURE_TEST(OneHot, "one_hot")
WICK_FIXTURE_TEST(Meshgrid, "meshgrid")

// ---- hand-computed cases

TEST(Indexing, ScatterAddDuplicatesAccumulate) {
  Tensor x = Tensor::zeros({5}, DType::F32);
  Tensor out = x.scatter_add(i64({1, 1, 1, 3}, {4}), f32({1, 2, 3, 4}, {4}), 0);
  EXPECT_TRUE(all_close(out, {0, 6, 0, 4, 0}, 0, 0));
  // 2-D along dim 1: row 0 gets 10 + 20 at column 0, row 1 gets 30 at 2 and 40 at 0.
  Tensor y = Tensor::ones({2, 3}, DType::I32);
  Tensor ids = Tensor::from_vector(std::vector<uint8_t>{0, 0, 2, 0}, {2, 2});
  Tensor src = Tensor::from_vector(std::vector<int32_t>{10, 20, 30, 40}, {2, 2});
  EXPECT_TRUE(all_close(y.scatter_add(ids, src, 1), {31, 1, 1, 41, 1, 31}, 0, 0));
}

TEST(Indexing, ScatterSetDuplicatesLastWriteWins) {
  Tensor x = Tensor::zeros({4}, DType::F32);
  Tensor out = x.scatter(i64({2, 0, 2}, {3}), f32({7, 8, 9}, {3}), 0);
  EXPECT_TRUE(all_close(out, {8, 0, 9, 0}, 0, 0));
}

TEST(Indexing, IndexAddDuplicatesAndDims) {
  // x (2, 3) ones; add columns of src at column ids [2, 0, 2].
  Tensor x = Tensor::ones({2, 3}, DType::F64);
  Tensor src = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(all_close(x.index_add(i64({2, 0, 2}, {3}), src, 1), {3, 1, 5, 6, 1, 11}, 0, 0));
  // along dim 0 with the same row twice
  Tensor r = x.index_add(Tensor::from_vector(std::vector<int16_t>{1, 1}, {2}), src, 0);
  EXPECT_TRUE(all_close(r, {1, 1, 1, 6, 8, 10}, 0, 0));
}

TEST(Indexing, HalfAccumulationRoundsEachAdd) {
  // 2048 + 1 = 2049 is a tie in f16 (spacing 2) and rounds to even 2048, twice: each add
  // rounds once (documented), so the result is 2048, not the single-rounded 2050.
  Tensor x = Tensor::full({1}, 2048, DType::F16);
  Tensor r = x.scatter_add(i64({0, 0}, {2}), Tensor::ones({2}, DType::F16), 0);
  EXPECT_EQ(values(r)[0], 2048.0);
  Tensor b = Tensor::full({1}, 1, DType::BF16).index_add(i64({0, 0}, {2}), Tensor::full({2}, 0.5, DType::BF16), 0);
  EXPECT_EQ(values(b)[0], 2.0);
}

TEST(Indexing, IntegerAddsWrap) {
  Tensor x = Tensor::full({2}, 250, DType::U8);
  Tensor r = x.scatter_add(i64({0, 0}, {2}), Tensor::full({2}, 5, DType::U8), 0);
  EXPECT_TRUE(all_close(r, {4, 250}, 0, 0));  // 260 wraps to 4
  Tensor y = Tensor::full({1}, int64_t(INT64_MAX), DType::I64).index_add(i64({0}, {1}), i64({1}, {1}), 0);
  EXPECT_EQ(y.to_vector<int64_t>()[0], INT64_MIN);
}

TEST(Indexing, IndexSelectHandValues) {
  Tensor x = f32({0, 1, 2, 3, 4, 5}, {2, 3});
  EXPECT_TRUE(all_close(x.index_select(i64({2, 0, 2, 1}, {4}), 1), {2, 0, 2, 1, 5, 3, 5, 4}, 0, 0));
  EXPECT_TRUE(all_close(x.index_select(i64({1, 1}, {2}), -2), {3, 4, 5, 3, 4, 5}, 0, 0));
  // transposed data: x.t() is (3, 2) = [[0,3],[1,4],[2,5]]
  EXPECT_TRUE(all_close(x.t().index_select(i64({2, 0}, {2}), 0), {2, 5, 0, 3}, 0, 0));
  // ids as a strided view (every other element of [1, 9, 0, 9])
  Tensor ids = Tensor::from_vector(std::vector<uint32_t>{1, 9, 0, 9}, {2, 2}).narrow(1, 0, 1).squeeze(1);
  EXPECT_TRUE(all_close(x.index_select(ids, 0), {3, 4, 5, 0, 1, 2}, 0, 0));
}

TEST(Indexing, BroadcastOperands) {
  // data broadcast: rows are all [1, 2, 3]
  Tensor x = f32({1, 2, 3}, {1, 3}).broadcast_as({4, 3});
  EXPECT_TRUE(all_close(x.index_select(i64({2, 0}, {2}), 1), {3, 1, 3, 1, 3, 1, 3, 1}, 0, 0));
  EXPECT_TRUE(all_close(x.gather(i64({0, 2, 1, 1}, {4, 1}), 1), {1, 3, 2, 2}, 0, 0));
  // broadcast ids and src in scatter_add: every row gets +5 at column 1
  Tensor ids = i64({1}, {1, 1}).broadcast_as({3, 2});
  Tensor src = Tensor::full({1, 1}, 5, DType::F32).broadcast_as({3, 2});
  Tensor z = Tensor::zeros({3, 4}, DType::F32);
  EXPECT_TRUE(all_close(z.scatter_add(ids, src, 1), {0, 10, 0, 0, 0, 10, 0, 0, 0, 10, 0, 0}, 0, 0));
}

TEST(Indexing, InPlaceScatterIntoNarrowedView) {
  Tensor base = Tensor::zeros({3, 4}, DType::I32);
  Tensor view = base.narrow(1, 1, 2);  // columns 1..2
  view.scatter_set(i64({1, 0, 1}, {3, 1}), Tensor::from_vector(std::vector<int32_t>{7, 8, 9}, {3, 1}), 1);
  EXPECT_TRUE(all_close(base, {0, 0, 7, 0, 0, 8, 0, 0, 0, 0, 9, 0}, 0, 0));
  view.scatter_add_set(i64({0, 0, 0}, {3, 1}), Tensor::from_vector(std::vector<int32_t>{1, 1, 1}, {3, 1}), 1);
  EXPECT_TRUE(all_close(base, {0, 1, 7, 0, 0, 9, 0, 0, 0, 1, 9, 0}, 0, 0));
}

TEST(Indexing, EmptyIds) {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor e = Tensor::zeros({0}, DType::U32);
  Tensor s = x.index_select(e, 1);
  EXPECT_EQ(s.shape(), (Shape{2, 0}));
  Tensor g = x.gather(Tensor::zeros({2, 0}, DType::I64), 1);
  EXPECT_EQ(g.shape(), (Shape{2, 0}));
  Tensor sc = x.scatter_add(Tensor::zeros({0, 3}, DType::I32), Tensor::zeros({0, 3}, DType::F32), 0);
  EXPECT_TRUE(all_close(sc, {1, 2, 3, 4, 5, 6}, 0, 0));
  Tensor ia = x.index_add(e, Tensor::zeros({2, 0}, DType::F32), 1);
  EXPECT_TRUE(all_close(ia, {1, 2, 3, 4, 5, 6}, 0, 0));
  // empty data dim with empty ids is fine; with any id it is an Index error
  Tensor z = Tensor::zeros({0, 3}, DType::F32);
  EXPECT_EQ(z.index_select(e, 0).shape(), (Shape{0, 3}));
  EXPECT_THROW(z.index_select(i64({0}, {1}), 0), Error);
}

TEST(Indexing, LargeParallelPaths) {
  // index_select of 3000 rows out of a (1000, 64) table whose values are i*64 + j.
  const size_t rows = 1000, cols = 64, n = 3000;
  Tensor table = Tensor::arange(0, double(rows * cols), 1, DType::F32).reshape({rows, cols});
  std::vector<int64_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = int64_t((i * 7919) % rows);
  Tensor out = table.index_select(i64(ids, {n}), 0);
  std::vector<double> want(n * cols);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < cols; ++j) want[i * cols + j] = double(ids[i] * int64_t(cols) + int64_t(j));
  EXPECT_TRUE(all_close(out, want, 0, 0));
  // and through the transposed table (strided rows)
  Tensor tt = test::as_transposed(table);
  EXPECT_TRUE(all_close(tt.index_select(i64(ids, {n}), 0), want, 0, 0));
  // scatter_add of 100000 x 4 ones into 10 rows: each row receives exactly 10000 per column.
  const size_t m = 100000;
  std::vector<int32_t> sid(m * 4);
  for (size_t i = 0; i < m * 4; ++i) sid[i] = int32_t((i / 4) % 10);
  Tensor acc = Tensor::zeros({10, 4}, DType::F32)
                   .scatter_add(Tensor::from_vector(sid, {m, 4}), Tensor::ones({m, 4}, DType::F32), 0);
  EXPECT_TRUE(all_close(acc, std::vector<double>(40, 10000.0), 0, 0));
  // the same along dim 1 (many independent lines)
  Tensor acc1 = Tensor::zeros({4, 10}, DType::F32)
                    .scatter_add(Tensor::from_vector(sid, {m, 4}).t(), Tensor::ones({4, m}, DType::F32), 1);
  EXPECT_TRUE(all_close(acc1, std::vector<double>(40, 10000.0), 0, 0));
}

// ---- bad ids: Error(Index) before anything is written

TEST(IndexingErrors, NegativeIdsEverySignedDType) {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  for (DType id : {DType::I16, DType::I32, DType::I64}) {
    SCOPED_TRACE(dtype_name(id));
    Tensor bad1 = i64({0, -1}, {2}).to_dtype(id);
    Tensor bad2 = i64({0, 1, 2, -1, 0, 1}, {2, 3}).to_dtype(id);
    EXPECT_THROW(x.index_select(bad1, 1), Error);
    EXPECT_THROW(x.gather(bad2, 1), Error);
    EXPECT_THROW(x.scatter(bad2, x, 1), Error);
    EXPECT_THROW(x.scatter_add(bad2, x, 1), Error);
    EXPECT_THROW(x.index_add(bad1, f32({1, 1, 1, 1}, {2, 2}), 1), Error);
    EXPECT_THROW(x.embedding(bad1), Error);
  }
}

TEST(IndexingErrors, TooLargeIdsEveryDType) {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  for (DType id : kIdDTypes) {
    SCOPED_TRACE(dtype_name(id));
    Tensor bad1 = i64({0, 3}, {2}).to_dtype(id);
    Tensor bad2 = i64({0, 1, 2, 0, 3, 1}, {2, 3}).to_dtype(id);
    EXPECT_THROW(x.index_select(bad1, 1), Error);
    EXPECT_THROW(x.index_select(i64({2}, {1}).to_dtype(id), 0), Error);
    EXPECT_THROW(x.gather(bad2, 1), Error);
    EXPECT_THROW(x.scatter(bad2, x, 1), Error);
    EXPECT_THROW(x.index_add(bad1, f32({1, 1, 1, 1}, {2, 2}), 1), Error);
  }
  // u8 254 is the largest real id (255 is the sentinel): out of range for a dim of 254
  EXPECT_THROW(Tensor::zeros({254}, DType::F32).index_select(Tensor::full({1}, 254, DType::U8), 0), Error);
  EXPECT_NO_THROW(Tensor::zeros({255}, DType::F32).index_select(Tensor::full({1}, 254, DType::U8), 0));
  EXPECT_THROW(x.index_select(i64({int64_t(1) << 40}, {1}), 0), Error);
}

TEST(IndexingErrors, MessageNamesOpValuePositionAndRange) {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  try {
    x.gather(i64({0, 1, 2, 0, 7, 1}, {2, 3}), 1);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Index);
    std::string m = e.what();
    EXPECT_NE(m.find("gather"), std::string::npos) << m;
    EXPECT_NE(m.find("7"), std::string::npos) << m;
    EXPECT_NE(m.find("[1, 1]"), std::string::npos) << m;
    EXPECT_NE(m.find("0..2"), std::string::npos) << m;
  }
  try {
    x.index_select(Tensor::from_vector(std::vector<int16_t>{1, -3}, {2}), 0);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Index);
    std::string m = e.what();
    EXPECT_NE(m.find("index_select"), std::string::npos) << m;
    EXPECT_NE(m.find("-3"), std::string::npos) << m;
    EXPECT_NE(m.find("[1]"), std::string::npos) << m;
  }
}

TEST(IndexingErrors, FailedInPlaceScatterLeavesDestinationUnchanged) {
  for (DType d : kAllDTypes) {
    SCOPED_TRACE(dtype_name(d));
    Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3}).to_dtype(d);
    // The bad id is last: a write-as-you-go implementation would have changed x already.
    Tensor ids = i64({2, 1, 0, 0, 1, 5}, {2, 3});
    Tensor src = Tensor::full({2, 3}, 7, d);
    EXPECT_THROW(x.scatter_set(ids, src, 1), Error);
    EXPECT_THROW(x.scatter_add_set(ids, src, 1), Error);
    EXPECT_TRUE(all_close(x, {1, 2, 3, 4, 5, 6}, 0, 0));
    Tensor t = test::as_transposed(f32({1, 2, 3, 4, 5, 6}, {2, 3}).to_dtype(d));
    EXPECT_THROW(t.scatter_add_set(i64({0, 1, 0, -1, 0, 1}, {2, 3}), src, 0), Error);
    EXPECT_TRUE(all_close(t, {1, 2, 3, 4, 5, 6}, 0, 0));
  }
}

TEST(IndexingErrors, ShapesDTypesAndDims) {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_THROW(x.index_select(i64({0, 1}, {1, 2}), 0), Error);   // 2-D ids
  EXPECT_THROW(x.index_select(f32({0}, {1}), 0), Error);         // float ids
  EXPECT_THROW(x.index_select(i64({0}, {1}), 2), Error);         // dim out of range
  EXPECT_THROW(x.gather(i64({0, 1}, {2}), 0), Error);            // rank mismatch
  EXPECT_THROW(x.gather(i64({0, 0, 0, 0}, {1, 4}), 0), Error);   // ids wider than x outside dim
  EXPECT_THROW(x.scatter(i64({0, 0, 0}, {1, 3}), f32({1, 2}, {1, 2}), 0), Error);  // src smaller than ids
  EXPECT_THROW(x.scatter(i64({0, 0, 0}, {1, 3}), Tensor::ones({1, 3}, DType::F64), 0), Error);  // dtype
  EXPECT_THROW(x.scatter(i64({0, 0, 0, 0}, {1, 4}), Tensor::ones({1, 4}, DType::F32), 0), Error);
  EXPECT_THROW(x.index_add(i64({0}, {1}), f32({1, 2}, {1, 2}), 0), Error);  // src shape
  EXPECT_THROW(x.index_add(i64({0, 1}, {2}), f32({1, 2, 3}, {1, 3}), 0), Error);
  EXPECT_THROW(Tensor::zeros({2, 2, 2}, DType::F32).embedding(i64({0}, {1})), Error);
  EXPECT_THROW(Tensor().index_select(i64({0}, {1}), 0), Error);
  try {
    x.index_select(f32({0}, {1}), 0);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::DType);
  }
  try {
    x.gather(i64({0, 1}, {2}), 0);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Shape);
  }
}

// ---- composites: hand values and errors

TEST(IndexingComposites, TrilTriuHandValues) {
  Tensor x = f32({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  EXPECT_TRUE(all_close(x.tril(), {1, 0, 0, 4, 5, 0, 7, 8, 9}, 0, 0));
  EXPECT_TRUE(all_close(x.triu(), {1, 2, 3, 0, 5, 6, 0, 0, 9}, 0, 0));
  EXPECT_TRUE(all_close(x.triu(1), {0, 2, 3, 0, 0, 6, 0, 0, 0}, 0, 0));
  EXPECT_TRUE(all_close(x.tril(-1), {0, 0, 0, 4, 0, 0, 7, 8, 0}, 0, 0));
  EXPECT_TRUE(all_close(x.t().tril(), {1, 0, 0, 2, 5, 0, 3, 6, 9}, 0, 0));  // strided input
  EXPECT_THROW(f32({1, 2}, {2}).tril(), Error);
  EXPECT_EQ(Tensor::zeros({0, 3}, DType::F32).triu().shape(), (Shape{0, 3}));
}

TEST(IndexingComposites, RepeatFlipPadHandValues) {
  Tensor x = f32({1, 2, 3}, {3});
  EXPECT_TRUE(all_close(x.repeat({2}), {1, 2, 3, 1, 2, 3}, 0, 0));
  EXPECT_EQ(x.repeat({2, 1}).shape(), (Shape{2, 3}));
  EXPECT_THROW(f32({1, 2, 3, 4}, {2, 2}).repeat({2}), Error);
  EXPECT_TRUE(all_close(x.flip({0}), {3, 2, 1}, 0, 0));
  EXPECT_THROW(x.flip({0, -1}), Error);  // the same dim twice
  EXPECT_TRUE(all_close(x.pad_with_same(0, 2, 1), {1, 1, 1, 2, 3, 3}, 0, 0));
  EXPECT_TRUE(all_close(x.pad_with_zeros(0, 1, 2), {0, 1, 2, 3, 0, 0}, 0, 0));
  EXPECT_THROW(Tensor::zeros({0}, DType::F32).pad_with_same(0, 1, 1), Error);
  EXPECT_EQ(Tensor::zeros({0}, DType::F32).pad_with_zeros(0, 1, 1).shape(), (Shape{2}));
  EXPECT_EQ(Tensor::zeros({0, 2}, DType::F32).flip({0, 1}).shape(), (Shape{0, 2}));
}

TEST(IndexingComposites, SliceAssignAndScatterErrorsAndSelfUnchanged) {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor r = x.slice_assign({{0, 2}, {1, 2}}, f32({8, 9}, {2, 1}));
  EXPECT_TRUE(all_close(r, {1, 8, 3, 4, 9, 6}, 0, 0));
  EXPECT_TRUE(all_close(x, {1, 2, 3, 4, 5, 6}, 0, 0));
  EXPECT_THROW(x.slice_assign({{0, 2}}, f32({8, 9}, {2, 1})), Error);  // region is (2, 3)
  EXPECT_THROW(x.slice_assign({{0, 5}}, x), Error);
  EXPECT_THROW(x.slice_assign({{0, 2}}, x.to_dtype(DType::F64)), Error);
  Tensor s = x.slice_scatter(f32({7, 7}, {2, 1}), 1, 2);
  EXPECT_TRUE(all_close(s, {1, 2, 7, 4, 5, 7}, 0, 0));
  EXPECT_THROW(x.slice_scatter(f32({7, 7, 7, 7}, {2, 2}), 1, 2), Error);  // does not fit
  EXPECT_THROW(x.slice_scatter(f32({7, 7, 7}, {3, 1}), 1, 0), Error);      // other dim differs
  // a broadcast src
  Tensor b = x.slice_scatter(Tensor::full({1, 1}, 0, DType::F32).broadcast_as({2, 2}), 1, 0);
  EXPECT_TRUE(all_close(b, {0, 0, 3, 0, 0, 6}, 0, 0));
}

TEST(IndexingComposites, OneHotAndMeshgrid) {
  Tensor oh = Tensor::one_hot(Tensor::from_vector(std::vector<uint32_t>{2, 0}, {2}), 3, DType::I64);
  EXPECT_EQ(oh.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 1, 1, 0, 0}));
  try {
    Tensor::one_hot(i64({1, 3}, {2}), 3, DType::F32);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Index);
    EXPECT_NE(std::string(e.what()).find("one_hot"), std::string::npos);
  }
  EXPECT_THROW(Tensor::one_hot(i64({-1}, {1}), 3, DType::F32), Error);
  EXPECT_THROW(Tensor::one_hot(f32({1}, {1}), 3, DType::F32), Error);
  EXPECT_THROW(Tensor::one_hot(i64({0}, {1}), 0, DType::F32), Error);

  Tensor a = f32({1, 2}, {2}), b = f32({3, 4, 5}, {3});
  auto ij = Tensor::meshgrid({a, b});
  EXPECT_EQ(ij[0].shape(), (Shape{2, 3}));
  EXPECT_TRUE(all_close(ij[0], {1, 1, 1, 2, 2, 2}, 0, 0));
  EXPECT_TRUE(all_close(ij[1], {3, 4, 5, 3, 4, 5}, 0, 0));
  EXPECT_EQ(ij[0].storage(), a.storage());  // broadcast views, no copy
  auto xy = Tensor::meshgrid({a, b}, true);
  EXPECT_EQ(xy[0].shape(), (Shape{3, 2}));
  EXPECT_TRUE(all_close(xy[0], {1, 2, 1, 2, 1, 2}, 0, 0));
  EXPECT_TRUE(all_close(xy[1], {3, 3, 4, 4, 5, 5}, 0, 0));
  EXPECT_THROW(Tensor::meshgrid({}), Error);
  EXPECT_THROW(Tensor::meshgrid({a, b.to_dtype(DType::F64)}), Error);
  EXPECT_THROW(Tensor::meshgrid({f32({1, 2, 3, 4}, {2, 2})}), Error);
}

TEST(IndexingComposites, EmbeddingShapes) {
  Tensor table = Tensor::arange(0, 12, 1, DType::F32).reshape({4, 3});
  Tensor e = table.embedding(Tensor::from_vector(std::vector<uint8_t>{3, 0, 3, 1}, {2, 2}));
  EXPECT_EQ(e.shape(), (Shape{2, 2, 3}));
  EXPECT_TRUE(all_close(e, {9, 10, 11, 0, 1, 2, 9, 10, 11, 3, 4, 5}, 0, 0));
  EXPECT_EQ(table.embedding(Tensor::zeros({0}, DType::U32)).shape(), (Shape{0, 3}));
  EXPECT_THROW(table.embedding(i64({4}, {1})), Error);
}

// Wide lines (>= 16 positions outside dim) take the row-sweeping path of the scatter kernel.
TEST(Indexing, WideRowsScatterAndIndexAdd) {
  const size_t n = 12, w = 32;
  std::vector<int64_t> ids(n);
  std::vector<float> src(n * w);
  for (size_t i = 0; i < n; ++i) ids[i] = int64_t(i % 5);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < w; ++j) src[i * w + j] = float(j + 1);
  // rows 0 and 1 are hit 3 times, rows 2..4 twice
  std::vector<double> want(5 * w);
  for (size_t r = 0; r < 5; ++r)
    for (size_t j = 0; j < w; ++j) want[r * w + j] = double((r < 2 ? 3 : 2) * (j + 1));
  Tensor s = f32(src, {n, w});
  EXPECT_TRUE(all_close(Tensor::zeros({5, w}, DType::F32).index_add(i64(ids, {n}), s, 0), want, 0, 0));
  EXPECT_TRUE(all_close(Tensor::zeros({5, w}, DType::F32).index_add(i64(ids, {n}), test::as_transposed(s), 0), want,
                        0, 0));
  Tensor wide_ids = i64(ids, {n, 1}).broadcast_as({n, w});
  EXPECT_TRUE(all_close(Tensor::zeros({5, w}, DType::F32).scatter_add(wide_ids, s, 0), want, 0, 0));
  // scatter (set) with duplicates along dim 0: the last i with ids[i] == r wins, i.e. rows
  // 0..4 take src rows 10, 11, 7, 8, 9 (ids[i] = i % 5 over i < 12); src row i holds i * 100 + j.
  std::vector<float> src2(n * w);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < w; ++j) src2[i * w + j] = float(i * 100 + j);
  const size_t last[5] = {10, 11, 7, 8, 9};
  std::vector<double> want2(5 * w);
  for (size_t r = 0; r < 5; ++r)
    for (size_t j = 0; j < w; ++j) want2[r * w + j] = double(last[r] * 100 + j);
  EXPECT_TRUE(all_close(Tensor::zeros({5, w}, DType::F32).scatter(wide_ids, f32(src2, {n, w}), 0), want2, 0, 0));
}

// ---- the sentinel id (the id dtype's maximum): a zero read, a skipped write (Candle).
namespace {

// The sentinel of id dtype `id` as an int64 (exact in every id dtype after to_dtype).
int64_t sentinel_of(DType id) {
  switch (id) {
    case DType::U8: return 255;
    case DType::U32: return 4294967295LL;
    case DType::I16: return 32767;
    case DType::I32: return 2147483647LL;
    default: return INT64_MAX;
  }
}

Tensor ids_of(const std::vector<int64_t>& v, const Shape& s, DType id) { return i64(v, s).to_dtype(id); }

}  // namespace

TEST(IndexingSentinel, ReadsZeroEveryIdAndDataDTypeAndLayout) {
  for (DType id : kIdDTypes) {
    const int64_t S = sentinel_of(id);
    ASSERT_EQ(ids_of({S}, {1}, id).to_dtype(DType::I64).to_vector<int64_t>()[0], S) << dtype_name(id);
    for (DType d : kAllDTypes) {
      const Tensor x0 = f32({1, 2, 3, 4, 5, 6}, {2, 3}).to_dtype(d);
      for (int v = 0; v < 3; ++v) {
        SCOPED_TRACE(where("sentinel", 0, d, id, v));
        const Tensor x = lay(x0, v);
        // along dim 1 (one id per element) and dim 0 (a whole row per id)
        EXPECT_TRUE(all_close(x.index_select(lay(ids_of({2, S, 0}, {3}, id), (v + 1) % 3), 1),
                              {3, 0, 1, 6, 0, 4}, 0, 0));
        EXPECT_TRUE(all_close(x.index_select(lay(ids_of({S, 1, S}, {3}, id), (v + 2) % 3), 0),
                              {0, 0, 0, 4, 5, 6, 0, 0, 0}, 0, 0));
        EXPECT_TRUE(all_close(x.gather(lay(ids_of({S, 1, 2, S}, {2, 2}, id), (v + 1) % 3), 1), {0, 2, 6, 0}, 0, 0));
        EXPECT_TRUE(all_close(x.gather(lay(ids_of({1, S, S, 0}, {2, 2}, id), (v + 2) % 3), 0), {4, 0, 0, 2}, 0, 0));
        Tensor table = Tensor::arange(0, 12, 1, DType::F32).reshape({4, 3}).to_dtype(d);
        Tensor e = lay(table, v).embedding(lay(ids_of({3, S, S, 0}, {2, 2}, id), (v + 1) % 3));
        EXPECT_EQ(e.shape(), (Shape{2, 2, 3}));
        EXPECT_TRUE(all_close(e, {9, 10, 11, 0, 0, 0, 0, 0, 0, 0, 1, 2}, 0, 0));
      }
    }
  }
}

TEST(IndexingSentinel, WritesNothingEveryIdDTypeAndLayout) {
  for (DType id : kIdDTypes) {
    const int64_t S = sentinel_of(id);
    for (DType d : {DType::F32, DType::BF16, DType::I64, DType::U8}) {
      const Tensor x0 = f32({1, 2, 3, 4, 5, 6}, {2, 3}).to_dtype(d);
      for (int v = 0; v < 3; ++v) {
        SCOPED_TRACE(where("sentinel writes", 0, d, id, v));
        const Tensor x = lay(x0, v);
        const Tensor ids = lay(ids_of({1, S, 0}, {1, 3}, id), (v + 1) % 3);
        const Tensor src = lay(f32({7, 8, 9}, {1, 3}).to_dtype(d), (v + 2) % 3);
        // column 1 of the ids is the sentinel: 8 goes nowhere
        EXPECT_TRUE(all_close(x.scatter(ids, src, 0), {1, 2, 9, 7, 5, 6}, 0, 0));
        EXPECT_TRUE(all_close(x.scatter_add(ids, src, 0), {1, 2, 12, 11, 5, 6}, 0, 0));
        Tensor in_place = x0.copy();
        in_place.scatter_set(ids, src, 0);
        EXPECT_TRUE(all_close(in_place, {1, 2, 9, 7, 5, 6}, 0, 0));
        in_place.scatter_add_set(ids, src, 0);
        EXPECT_TRUE(all_close(in_place, {1, 2, 18, 14, 5, 6}, 0, 0));
        // index_add along dim 1: src column 0 is dropped, column 1 adds into column 0
        const Tensor add_src = lay(f32({10, 20, 30, 40}, {2, 2}).to_dtype(d), (v + 2) % 3);
        EXPECT_TRUE(all_close(x.index_add(lay(ids_of({S, 0}, {2}, id), (v + 1) % 3), add_src, 1),
                              {21, 2, 3, 44, 5, 6}, 0, 0));
        EXPECT_TRUE(all_close(x.index_add(ids_of({S, S}, {2}, id), add_src, 1), {1, 2, 3, 4, 5, 6}, 0, 0));
      }
    }
    // one_hot: a sentinel id is an all-zero row
    EXPECT_EQ(Tensor::one_hot(ids_of({S, 1}, {2}, id), 3, DType::I64).to_vector<int64_t>(),
              (std::vector<int64_t>{0, 0, 0, 0, 1, 0}));
  }
}

// Long runs take the parallel paths: row copies, per-element gathers and the row-sweeping
// scatter (>= 16 positions outside the dim). Every 7th id is the sentinel.
TEST(IndexingSentinel, LargeParallelPaths) {
  const size_t n = 3000, vocab = 50, w = 40;
  std::vector<int64_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = i % 7 == 3 ? int64_t(0xffffffffu) : int64_t(i * 13 % vocab);
  std::vector<float> table(vocab * w);
  for (size_t i = 0; i < table.size(); ++i) table[i] = float(i % 97) - 40.0f;
  const Tensor t = f32(table, {vocab, w});
  const Tensor id = i64(ids, {n}).to_dtype(DType::U32);
  std::vector<double> want(n * w), acc(vocab * w, 0.0);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < w; ++j) {
      const bool skip = i % 7 == 3;
      want[i * w + j] = skip ? 0.0 : double(table[size_t(ids[i]) * w + j]);
      if (!skip) acc[size_t(ids[i]) * w + j] += double((i + j) % 5);
    }
  EXPECT_TRUE(all_close(t.embedding(id), want, 0, 0));
  EXPECT_TRUE(all_close(t.t().index_select(id, 1).t().contiguous(), want, 0, 0));
  std::vector<float> src(n * w);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < w; ++j) src[i * w + j] = float((i + j) % 5);
  const Tensor srct = f32(src, {n, w});
  EXPECT_TRUE(all_close(Tensor::zeros({vocab, w}, DType::F32).index_add(id, srct, 0), acc, 0, 0));
  const Tensor wide = id.reshape({n, 1}).broadcast_as({n, w});
  EXPECT_TRUE(all_close(Tensor::zeros({vocab, w}, DType::F32).scatter_add(wide, srct, 0), acc, 0, 0));
  EXPECT_TRUE(all_close(t.gather(wide.narrow(0, 0, 60), 0).flatten_all(),
                        std::vector<double>(want.begin(), want.begin() + 60 * w), 0, 0));
}

TEST(IndexingSentinel, OtherIdsStayErrors) {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  for (DType id : kIdDTypes) {
    SCOPED_TRACE(dtype_name(id));
    const int64_t below = sentinel_of(id) - 1;  // the largest real id: far out of range here
    EXPECT_THROW(x.index_select(ids_of({below}, {1}, id), 1), Error);
    EXPECT_THROW(x.gather(ids_of({0, below, 1, 2}, {2, 2}, id), 1), Error);
    EXPECT_THROW(x.scatter(ids_of({below, 0, 0}, {1, 3}, id), x, 0), Error);
    EXPECT_THROW(x.index_add(ids_of({0, below}, {2}, id), f32({1, 1, 1, 1}, {2, 2}), 1), Error);
  }
  // a failed in-place scatter with a sentinel beside the bad id still writes nothing
  Tensor dst = Tensor::zeros({2, 3}, DType::F32);
  EXPECT_THROW(dst.scatter_set(ids_of({4294967295LL, 0, 5}, {1, 3}, DType::U32), f32({1, 1, 1}, {1, 3}), 0), Error);
  EXPECT_EQ(dst.to_vector<float>(), std::vector<float>(6, 0.0f));
}

// ---- errors name the op the user called, not the backend entry or the composite's parts
namespace {

std::string error_of(const std::function<void()>& f, ErrorKind kind) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

}  // namespace

TEST(IndexingErrors, NameTheOpTheUserCalled) {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  std::string m = error_of([&] { x.scatter(i64({0, 1, 9}, {1, 3}), x, 1); }, ErrorKind::Index);
  EXPECT_EQ(m.find("scatter_set"), std::string::npos) << m;
  EXPECT_NE(m.find("scatter: id 9"), std::string::npos) << m;
  m = error_of([&] { x.scatter_add(i64({0, 1, 9}, {1, 3}), x, 1); }, ErrorKind::Index);
  EXPECT_EQ(m.find("scatter_add_set"), std::string::npos) << m;
  EXPECT_NE(m.find("scatter_add: id 9"), std::string::npos) << m;
  // the in-place forms are what the user called there
  m = error_of([&] { x.copy().scatter_set(i64({0, 1, 9}, {1, 3}), x, 1); }, ErrorKind::Index);
  EXPECT_NE(m.find("scatter_set: id 9"), std::string::npos) << m;
  // embedding: the position and shape are those of the user's ids, not the flattened ones
  Tensor table = Tensor::arange(0, 12, 1, DType::F32).reshape({4, 3});
  m = error_of([&] { table.embedding(i64({0, 3, 1, 2, 7, 0}, {2, 3})); }, ErrorKind::Index);
  EXPECT_EQ(m.find("index_select"), std::string::npos) << m;
  EXPECT_NE(m.find("embedding: id 7 at position [1, 1] of the ids [2, 3]"), std::string::npos) << m;
  EXPECT_NE(m.find("0..3"), std::string::npos) << m;
  m = error_of([&] { table.embedding(f32({0, 1}, {2})); }, ErrorKind::DType);
  EXPECT_NE(m.find("embedding"), std::string::npos) << m;
  EXPECT_EQ(m.find("index_select"), std::string::npos) << m;
  // slice_scatter with a start so large that start + len wraps
  m = error_of([&] { x.slice_scatter(f32({7, 7}, {2, 1}), 1, SIZE_MAX); }, ErrorKind::Shape);
  EXPECT_NE(m.find("slice_scatter"), std::string::npos) << m;
  EXPECT_EQ(m.find("narrow"), std::string::npos) << m;
  m = error_of([&] { x.slice_scatter(f32({7, 7}, {2, 1}), 1, 3); }, ErrorKind::Shape);
  EXPECT_NE(m.find("slice_scatter"), std::string::npos) << m;
  m = error_of([&] { x.slice_assign({{0, 5}}, x); }, ErrorKind::Shape);
  EXPECT_NE(m.find("slice_assign"), std::string::npos) << m;
  EXPECT_EQ(m.find("index:"), std::string::npos) << m;
}

// ---- Tensor::index with an end before the start: an empty dim (Candle's t.i(1..0))
TEST(IndexingRanges, EndBeforeStartIsEmpty) {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(x.index({{1, 0}}).shape(), (Shape{0, 3}));
  EXPECT_EQ(x.index({{0, 2}, {2, 1}}).shape(), (Shape{2, 0}));
  EXPECT_EQ(x.index({{2, 0}}).shape(), (Shape{0, 3}));   // start == size: still a valid start
  EXPECT_EQ(x.index({{1, -3}}).shape(), (Shape{0, 3}));  // end -3 is 0 here, before start 1
  EXPECT_EQ(x.index({{-1, 0}}).shape(), (Shape{0, 3}));  // start -1 is 1
  EXPECT_EQ(x.index({{0, 1}, {3, 2}}).shape(), (Shape{1, 0}));
  EXPECT_TRUE(all_close(x.index({{1, 2}, {1, -1}}), {5, 6}, 0, 0));  // ordinary ranges unchanged
  EXPECT_THROW(x.index({{3, 1}}), Error);  // start past the end
  EXPECT_THROW(x.index({{0, 3}}), Error);  // end past the end
  EXPECT_THROW(x.index({{-3, 1}}), Error);
  // an empty region assigns nothing
  Tensor r = x.slice_assign({{1, 0}}, Tensor::zeros({0, 3}, DType::F32));
  EXPECT_TRUE(all_close(r, {1, 2, 3, 4, 5, 6}, 0, 0));
}
