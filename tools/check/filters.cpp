// Filters of `wick check` / `wick bench` and the messages for a filter that matches nothing.
#include "check/filters.hpp"

#include <algorithm>

namespace wick::check {

static std::vector<std::string> sorted_unique(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

std::string wrap_list(const std::vector<std::string>& words, size_t indent, size_t width) {
  const std::string pad(indent, ' ');
  std::string out, line = pad;
  for (size_t i = 0; i < words.size(); ++i) {
    std::string w = words[i] + (i + 1 < words.size() ? "," : "");
    if (line.size() > pad.size() && line.size() + 1 + w.size() > width) {
      out += line + "\n";
      line = pad;
    }
    if (line.size() > pad.size()) line += " ";
    line += w;
  }
  if (line.size() > pad.size()) out += line + "\n";
  return out;
}

bool case_selected(const Case& c, const Options& opt) {
  if (!opt.op.empty() && c.op != opt.op && c.full_name() != opt.op) return false;
  if (!opt.dtype.empty() && opt.dtype != dtype_name(c.dtype)) return false;
  return true;
}

std::vector<std::string> case_op_names(const std::vector<Case>& cases) {
  std::vector<std::string> ops;
  for (const Case& c : cases) ops.push_back(c.op);
  return sorted_unique(std::move(ops));
}

std::string check_filter_mismatch(const std::vector<Case>& cases, const Options& opt) {
  for (const Case& c : cases)
    if (case_selected(c, opt)) return "";
  if (!opt.op.empty()) {
    Options op_only;
    op_only.op = opt.op;
    std::vector<std::string> dtypes;
    for (const Case& c : cases)
      if (case_selected(c, op_only)) dtypes.push_back(dtype_name(c.dtype));
    if (dtypes.empty())
      return "--op '" + opt.op + "' matches no case; --op takes one of these ops (or a full case name as " +
             "`check --verbose` prints it):\n" + wrap_list(case_op_names(cases));
    return "--op '" + opt.op + "' has no case of --dtype '" + opt.dtype + "'; its dtypes are:\n" +
           wrap_list(sorted_unique(std::move(dtypes)));
  }
  std::vector<std::string> dtypes;
  for (const Case& c : cases) dtypes.push_back(dtype_name(c.dtype));
  return "--dtype '" + opt.dtype + "' matches no case; the dtypes with cases are:\n" +
         wrap_list(sorted_unique(std::move(dtypes)));
}

bool bench_selected(const BenchCase& c, const std::string& op, BenchSize size) {
  bool named = !op.empty() && c.name.find(op) != std::string::npos;
  if (!op.empty() && !named) return false;
  return !c.large_only || named || size == BenchSize::Large;
}

std::string bench_filter_mismatch(const std::vector<BenchCase>& cases, const std::string& op) {
  std::vector<std::string> names;
  for (const BenchCase& c : cases) {
    if (bench_selected(c, op, BenchSize::Large)) return "";
    names.push_back(c.name);
  }
  return "--op '" + op + "' is in no case name (--op matches a substring of one); the cases are:\n" +
         wrap_list(sorted_unique(std::move(names)));
}

bool torch_selected(const TorchCase& c, const std::string& op) {
  return op.empty() || c.name.find(op) != std::string::npos;
}

std::string torch_filter_mismatch(const std::vector<TorchCase>& cases, const std::string& op) {
  std::vector<std::string> names;
  for (const TorchCase& c : cases) {
    if (torch_selected(c, op)) return "";
    names.push_back(c.name);
  }
  return "--op '" + op + "' is in no torch-suite case name (--op matches a substring of one); the cases are:\n" +
         wrap_list(sorted_unique(std::move(names)));
}

}  // namespace wick::check
