#pragma once
// Helpers shared by the GoogleTest suites: fixtures, comparisons, layout variants.
#include <gtest/gtest.h>

#include <string>
#include <cstdint>
#include <vector>

#include "wick/wick.hpp"

namespace wick::test {

// Path of a file under tests/fixtures.
std::string fixture_path(const std::string& name);

// Values of any tensor as f64, row-major.
std::vector<double> values(const Tensor& t);

// Element-wise |a - b| <= atol + rtol * |b|, NaN matching NaN, inf matching same-signed inf.
::testing::AssertionResult all_close(const std::vector<double>& got, const std::vector<double>& want,
                                     double rtol = 1e-6, double atol = 1e-6);
::testing::AssertionResult all_close(const Tensor& got, const std::vector<double>& want, double rtol = 1e-6,
                                     double atol = 1e-6);

// Default tolerances per dtype for results rounded to that dtype once.
double rtol_for(DType d);

// The same logical tensor in other layouts (values equal to `t`):
Tensor as_transposed(const Tensor& t);  // last two dims stored transposed (rank >= 2)
Tensor as_offset(const Tensor& t);      // a narrow() view into a larger storage, nonzero offset

// llm::Sampler::sample over a logits tensor on `d` (top-k on the device, candidates to the host)
// against sample() over the whole row on the host: the same ids, draw after draw, for rows of n_vocab
// random logits with ties, one +inf row and one NaN row, under several settings (penalties
// above and below 1, greedy, top-k alone, the defaults) and seeds.
void expect_sampler_paths_agree(Device d, size_t n_vocab);

// A path for `file` in a fresh directory of the running test (under GoogleTest's temp dir).
std::string tmp_path(const std::string& file);
// Whole-file byte I/O for hand-made files.
void write_bytes(const std::string& path, const std::string& bytes);
std::string read_bytes(const std::string& path);

}  // namespace wick::test

#include <nlohmann/json.hpp>

namespace wick::test {

// Bytes from a hex string ("0aff" -> {0x0a, 0xff}), as the fixtures store block bytes.
std::vector<uint8_t> from_hex(const std::string& h);
// A JSON fixture under tests/fixtures (written by the gen_*.py script beside it).
nlohmann::json load_json_fixture(const std::string& name);
// {"dtype": "f32", "shape": [2, 3], "data": [...]} -> tensor on the CPU. Numbers may be
// the strings "nan", "inf", "-inf".
Tensor tensor_from_json(const nlohmann::json& j);
// The "data" of such an object as doubles (NaN/inf decoded).
std::vector<double> doubles_from_json(const nlohmann::json& data);

}  // namespace wick::test
