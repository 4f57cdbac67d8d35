#pragma once
// What the filters of `wick check` and `wick bench` select, and what they could have matched: a
// filter that selects no case is a mistake on the command line (exit 2), not an empty run.
#include <string>
#include <vector>

#include "check/bench.hpp"
#include "check/check.hpp"

namespace wick::check {

// `check`: --op is a case's op ("sum") or its full name ("sum[dims=0,1]"); --dtype its dtype name.
bool case_selected(const Case& c, const Options& opt);
// Empty when some case passes opt's filters; else which filter emptied the selection and what it
// would match: the op names (sorted, unique) for --op, the op's dtypes for --dtype.
std::string check_filter_mismatch(const std::vector<Case>& cases, const Options& opt);
// The op names `check --op` takes, sorted and unique.
std::vector<std::string> case_op_names(const std::vector<Case>& cases);

// `bench`: --op is a substring of the case name; a large-only case runs when its name matches a
// non-empty --op, or with BenchSize::Large.
bool bench_selected(const BenchCase& c, const std::string& op, BenchSize size);
std::string bench_filter_mismatch(const std::vector<BenchCase>& cases, const std::string& op);
// `bench --suite torch`: --op is a substring of the case name.
bool torch_selected(const TorchCase& c, const std::string& op);
std::string torch_filter_mismatch(const std::vector<TorchCase>& cases, const std::string& op);

// Words joined by ", " on lines of at most `width` columns, each line indented by `indent` spaces.
std::string wrap_list(const std::vector<std::string>& words, size_t indent = 2, size_t width = 100);

}  // namespace wick::check
