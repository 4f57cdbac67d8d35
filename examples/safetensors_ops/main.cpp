// Loads a safetensors file and runs a few ops on Device::best().
//   safetensors_ops            writes example.safetensors (values known by hand), loads it back, checks
//   safetensors_ops FILE       lists FILE's tensors; for each float one, a softmax over its last dim
//                              (rows must sum to 1) and its sum
// Exits 0 and prints "safetensors_ops: OK" when every check holds, 1 otherwise.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>
#include <wick/wick.hpp>

using namespace wick;

namespace {
int failures = 0;
void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::printf("FAIL: %s\n", what.c_str());
    ++failures;
  }
}

bool close(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::fabs(got[i] - want[i]) > tol * (1 + std::fabs(want[i]))) return false;
  return true;
}

bool is_float(DType d) {
  return d == DType::F16 || d == DType::BF16 || d == DType::F32 || d == DType::F64 || d == DType::F8E4M3;
}

// Softmax over the last dim of any float tensor: every row must sum to 1.
void softmax_rows_sum_to_one(const std::string& name, const Tensor& t) {
  if (t.rank() == 0 || t.numel() == 0) return;
  Tensor p = t.to_dtype(DType::F32).softmax_last_dim();
  std::vector<float> sums = p.sum({-1}).flatten_all().to_vector<float>();
  double worst = 0;
  for (float s : sums) worst = std::fmax(worst, std::fabs(s - 1.0));
  std::printf("  %s: softmax over the last dim, %zu rows, max |row sum - 1| = %.3g\n", name.c_str(), sums.size(),
              worst);
  expect(worst < 1e-4, name + ": softmax rows sum to 1 within 1e-4");
}

// Writes x (3, 4) f32 = 0..11, w (4, 2) f32 and ids (2) u32 with values chosen to check by hand.
void write_example(const std::string& path) {
  Tensor x = Tensor::arange(0, 12, 1, DType::F32).reshape({3, 4});
  Tensor w = Tensor::from_vector<float>({1, 0, 0, 1, 1, 1, -1, 2}, {4, 2});
  Tensor ids = Tensor::from_vector<uint32_t>({2, 0}, {2});
  save_safetensors({{"x", x}, {"w", w}, {"ids", ids}}, path, {{"written_by", "wick safetensors_ops example"}});
}

void check_example(const SafeTensors& st, Device dev) {
  expect(st.names().size() == 3, "the file holds 3 tensors");
  expect(st.metadata().count("written_by") == 1, "the metadata survives the round trip");
  Tensor x = st.load("x", dev), w = st.load("w", dev), ids = st.load("ids", dev);
  expect(x.shape() == Shape{3, 4} && x.dtype() == DType::F32 && x.device() == dev, "x is (3, 4) f32 on " + dev.name());

  // x = [[0 1 2 3] [4 5 6 7] [8 9 10 11]], w = [[1 0] [0 1] [1 1] [-1 2]]: x w by hand.
  std::vector<float> xw = x.matmul(w).to_vector<float>();
  std::printf("  x.matmul(w) = [[%g, %g], [%g, %g], [%g, %g]]\n", xw[0], xw[1], xw[2], xw[3], xw[4], xw[5]);
  expect(close(xw, {-1, 9, 3, 25, 7, 41}, 1e-6), "x.matmul(w) = [[-1, 9], [3, 25], [7, 41]]");

  // softmax of each row of x: a row k, k+1, k+2, k+3 gives e^j / (1 + e + e^2 + e^3), j = 0..3.
  std::vector<float> sm = x.softmax_last_dim().to_vector<float>();
  double z = 1 + std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  std::vector<double> want;
  for (int r = 0; r < 3; ++r)
    for (int j = 0; j < 4; ++j) want.push_back(std::exp(double(j)) / z);
  std::printf("  softmax(x[0]) = [%.6f, %.6f, %.6f, %.6f]\n", sm[0], sm[1], sm[2], sm[3]);
  expect(close(sm, want, 1e-5), "softmax_last_dim(x) = e^j / (1 + e + e^2 + e^3) in every row");

  // rows 2 and 0 of x, then the sum of each column: [8+0, 9+1, 10+2, 11+3].
  std::vector<float> picked = x.index_select(ids, 0).sum({0}).to_vector<float>();
  std::printf("  x.index_select([2, 0], 0).sum(0) = [%g, %g, %g, %g]\n", picked[0], picked[1], picked[2], picked[3]);
  expect(close(picked, {8, 10, 12, 14}, 0), "x.index_select([2, 0], 0).sum(0) = [8, 10, 12, 14]");

  // mean over all 12 elements of 0..11 is 5.5; the column maxima are the last row.
  expect(close(x.mean({0, 1}).to_vector<float>(), {5.5}, 1e-6), "mean(x) = 5.5");
  expect(close(x.max({0}).to_vector<float>(), {8, 9, 10, 11}, 0), "max(x, 0) = [8, 9, 10, 11]");
}
}  // namespace

int main(int argc, char** argv) try {
  if (argc > 2) {
    std::fprintf(stderr, "usage: %s [FILE.safetensors]\n", argv[0]);
    return 2;
  }
  Device dev = Device::best();
  std::string path = argc == 2 ? argv[1] : "example.safetensors";
  if (argc == 1) write_example(path);

  SafeTensors st = SafeTensors::open(path);
  std::printf("wick %s on %s: %s holds %zu tensors\n", WICK_VERSION, dev.name().c_str(), path.c_str(),
              st.names().size());
  std::vector<std::string> usable;  // tensors of a dtype wick has (I8, U16, ... are listed, not loaded)
  for (const std::string& name : st.names()) {
    try {
      std::printf("  %s: %s %s\n", name.c_str(), dtype_name(st.dtype(name)), shape_str(st.shape(name)).c_str());
      usable.push_back(name);
    } catch (const Error& e) {
      std::printf("  %s: skipped (%s)\n", name.c_str(), e.what());
    }
  }
  if (argc == 1) {
    check_example(st, dev);
  } else {
    for (const std::string& name : usable) {
      Tensor t = st.load(name, dev);
      if (is_float(t.dtype())) {
        softmax_rows_sum_to_one(name, t);
        std::printf("  %s: sum = %g\n", name.c_str(), t.to_dtype(DType::F64).sum_all().item<double>());
      }
    }
  }
  if (failures) {
    std::printf("safetensors_ops: %d check(s) failed\n", failures);
    return 1;
  }
  std::printf("safetensors_ops: OK\n");
  return 0;
} catch (const std::exception& e) {
  std::printf("safetensors_ops: error: %s\n", e.what());
  return 1;
}
