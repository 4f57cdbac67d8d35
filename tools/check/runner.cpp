// Running the parity cases: layout variant vs contiguous reference, and a GPU against the CPU.
#include <cstdio>

#include "check/cases.hpp"
#include "check/filters.hpp"

namespace wick::check {

std::vector<Case> all_cases() {
  std::vector<Case> out;
  add_copy_cases(out);
  add_elementwise_cases(out);
  add_reduce_cases(out);
  add_index_cases(out);
  add_linalg_cases(out);
  add_conv_cases(out);
  add_nn_cases(out);
  add_quant_cases(out);
  return out;
}

static Verdict compare_all(const std::vector<Tensor>& got, const std::vector<Tensor>& want, const char* what) {
  if (got.size() != want.size()) return {false, std::string(what) + ": different number of results"};
  for (size_t i = 0; i < got.size(); ++i) {
    Verdict v = compare(got[i], want[i]);
    if (!v.ok) {
      std::string where = got.size() > 1 ? " (result " + std::to_string(i) + ")" : "";
      return {false, std::string(what) + where + ": " + v.reason};
    }
  }
  return {};
}

static Verdict run_case_unguarded(const Case& c, Device device) {
  Inputs var(device, c.dtype, c.layout, false);
  std::vector<Tensor> got = c.fn(var);
  for (const Guard& g : var.guards()) {
    Verdict v = check_guard(g);
    if (!v.ok) return v;
  }
  Inputs ref(device, c.dtype, c.layout, true);
  std::vector<Tensor> want = c.fn(ref);
  Verdict v = compare_all(got, want, "layout vs contiguous");
  if (!v.ok || device.is_cpu()) return v;
  Inputs on_cpu(Device::cpu(), c.dtype, c.layout, false);
  return compare_all(got, c.fn(on_cpu), "device vs cpu");
}

Verdict run_case(const Case& c, Device device) {
  try {
    return run_case_unguarded(c, device);
  } catch (const GuardFailure& e) {
    return {false, std::string("guard: ") + e.what()};
  } catch (const ReferenceFailure& e) {
    return {false, std::string("reference: ") + e.what()};
  } catch (const Error& e) {
    // The case exists only where the op is defined: any error, Unsupported included, is a failure.
    if (e.kind() == ErrorKind::Unsupported) return {false, std::string("unsupported (op missing?): ") + e.what()};
    return {false, std::string("threw ") + e.what()};
  } catch (const std::exception& e) {
    return {false, std::string("threw a non-wick exception: ") + e.what()};
  }
}

Summary run_checks(const Options& opt) {
  Summary s;
  std::vector<Device> devices = opt.devices.empty() ? available_devices() : opt.devices;
  std::vector<Case> cases = all_cases();
  for (const Device& d : devices)
    for (const Case& c : cases) {
      if (!case_selected(c, opt)) continue;
      Verdict v = run_case(c, d);
      if (v.ok) {
        ++s.passed;
        if (opt.verbose)
          std::printf("ok   op=%s dtype=%s layout=%s device=%s\n", c.full_name().c_str(), dtype_name(c.dtype),
                      layout_name(c.layout), d.name().c_str());
      } else {
        ++s.failed;
        std::printf("FAIL op=%s dtype=%s layout=%s device=%s: %s\n", c.full_name().c_str(), dtype_name(c.dtype),
                    layout_name(c.layout), d.name().c_str(), v.reason.c_str());
      }
      std::fflush(stdout);
    }
  return s;
}

}  // namespace wick::check
