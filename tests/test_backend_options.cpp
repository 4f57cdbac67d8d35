// The backends' environment switches (src/backend/options.hpp): every value its table documents
// parses to the option it names, unset / empty / auto give the defaults, and any other value is an
// Error naming the variable and the values it takes. The expected values are the table's, written
// out here, not read from the parser.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "backend/options.hpp"
#include "wick/error.hpp"

using namespace wick;
using namespace wick::backend;

namespace {

Options parse(const std::map<std::string, std::string>& env) {
  return parse_options([&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

// The message of the Error a bad value gives, or "" where it parsed.
std::string error_of(const std::string& name, const std::string& value) {
  try {
    parse({{name, value}});
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Argument) << name << "=" << value;
    return e.what();
  }
  return "";
}

const char* const kNames[] = {"WICK_DECODE_ATTN",    "WICK_DECODE_MERGE", "WICK_DECODE_ONE_RUN",
                              "WICK_DECODE_STAGES",  "WICK_FLASH_WGMMA",  "WICK_QMV_STAGED",
                              "WICK_QMV_NORM_BLOCK", "WICK_CPU_ISA",      "WICK_QMATMUL_PATH"};

void expect_defaults(const Options& o) {
  EXPECT_EQ(o.decode_attn, DecodeAttn::Auto);
  EXPECT_FALSE(o.decode_merge_all);
  EXPECT_EQ(o.decode_one_run_keys, -1);
  EXPECT_FALSE(o.decode_registers);
  EXPECT_EQ(o.flash_wgmma, FlashWgmma::Auto);
  EXPECT_FALSE(o.qmv_unstaged);
  EXPECT_EQ(o.qmv_norm_block, 0);
  EXPECT_EQ(o.cpu_isa, CpuIsa::Auto);
  EXPECT_EQ(o.qmatmul_path, QMatmulPath::Auto);
}

TEST(BackendOptions, UnsetEmptyAndAutoAreTheDefaults) {
  expect_defaults(parse({}));
  for (const char* name : kNames) {
    SCOPED_TRACE(name);
    expect_defaults(parse({{name, ""}}));
    expect_defaults(parse({{name, "auto"}}));
  }
}

TEST(BackendOptions, EveryDocumentedValue) {
  EXPECT_EQ(parse({{"WICK_DECODE_ATTN", "runs"}}).decode_attn, DecodeAttn::Runs);
  EXPECT_EQ(parse({{"WICK_DECODE_ATTN", "stream"}}).decode_attn, DecodeAttn::Stream);
  EXPECT_TRUE(parse({{"WICK_DECODE_MERGE", "all"}}).decode_merge_all);
  EXPECT_EQ(parse({{"WICK_DECODE_ONE_RUN", "0"}}).decode_one_run_keys, 0);
  EXPECT_EQ(parse({{"WICK_DECODE_ONE_RUN", "256"}}).decode_one_run_keys, 256);
  EXPECT_EQ(parse({{"WICK_DECODE_ONE_RUN", "1000000"}}).decode_one_run_keys, 1000000);
  EXPECT_TRUE(parse({{"WICK_DECODE_STAGES", "0"}}).decode_registers);
  EXPECT_EQ(parse({{"WICK_FLASH_WGMMA", "0"}}).flash_wgmma, FlashWgmma::Off);
  EXPECT_EQ(parse({{"WICK_FLASH_WGMMA", "2p"}}).flash_wgmma, FlashWgmma::G2Pipe);
  EXPECT_EQ(parse({{"WICK_FLASH_WGMMA", "2s"}}).flash_wgmma, FlashWgmma::G2Serial);
  EXPECT_EQ(parse({{"WICK_FLASH_WGMMA", "3p"}}).flash_wgmma, FlashWgmma::G3Pipe);
  EXPECT_EQ(parse({{"WICK_FLASH_WGMMA", "3s"}}).flash_wgmma, FlashWgmma::G3Serial);
  EXPECT_TRUE(parse({{"WICK_QMV_STAGED", "0"}}).qmv_unstaged);
  EXPECT_EQ(parse({{"WICK_QMV_NORM_BLOCK", "128"}}).qmv_norm_block, 128);
  EXPECT_EQ(parse({{"WICK_QMV_NORM_BLOCK", "256"}}).qmv_norm_block, 256);
  EXPECT_EQ(parse({{"WICK_QMV_NORM_BLOCK", "512"}}).qmv_norm_block, 512);
  EXPECT_EQ(parse({{"WICK_CPU_ISA", "scalar"}}).cpu_isa, CpuIsa::Scalar);
  EXPECT_EQ(parse({{"WICK_CPU_ISA", "avx2"}}).cpu_isa, CpuIsa::Avx2);
  EXPECT_EQ(parse({{"WICK_CPU_ISA", "avx512"}}).cpu_isa, CpuIsa::Avx512);
  EXPECT_EQ(parse({{"WICK_QMATMUL_PATH", "rows"}}).qmatmul_path, QMatmulPath::Rows);
  EXPECT_EQ(parse({{"WICK_QMATMUL_PATH", "sgemm"}}).qmatmul_path, QMatmulPath::Sgemm);
}

// The ctest variants of CMakeLists.txt set several at once.
TEST(BackendOptions, SeveralAtOnce) {
  const Options o = parse({{"WICK_DECODE_ONE_RUN", "1000000"}, {"WICK_DECODE_ATTN", "stream"}});
  EXPECT_EQ(o.decode_one_run_keys, 1000000);
  EXPECT_EQ(o.decode_attn, DecodeAttn::Stream);
  EXPECT_FALSE(o.decode_registers);
  const Options r = parse({{"WICK_DECODE_STAGES", "0"}, {"WICK_DECODE_ATTN", "stream"}});
  EXPECT_TRUE(r.decode_registers);
  EXPECT_EQ(r.decode_attn, DecodeAttn::Stream);
}

TEST(BackendOptions, BadValuesNameTheVariableAndWhatItTakes) {
  struct Bad {
    const char* name;
    const char* value;
    const char* accepted;  // a piece of the message listing what the variable takes
  };
  const Bad cases[] = {
      {"WICK_DECODE_ATTN", "stream8", "runs"},
      {"WICK_DECODE_ATTN", "Runs", "stream"},
      {"WICK_DECODE_MERGE", "serial", "all"},
      {"WICK_DECODE_MERGE", "launch", "all"},
      {"WICK_DECODE_ONE_RUN", "-1", ">= 0"},
      {"WICK_DECODE_ONE_RUN", "12k", ">= 0"},
      {"WICK_DECODE_ONE_RUN", "1e6", ">= 0"},
      {"WICK_DECODE_STAGES", "3", "0"},
      {"WICK_FLASH_WGMMA", "4p", "2p"},
      {"WICK_FLASH_WGMMA", "off", "3s"},
      {"WICK_QMV_STAGED", "1", "0"},
      {"WICK_QMV_STAGED", "off", "0"},
      {"WICK_QMV_NORM_BLOCK", "192", "128, 256"},
      {"WICK_QMV_NORM_BLOCK", "1024", "512"},
      {"WICK_CPU_ISA", "avx512f", "avx2"},
      {"WICK_CPU_ISA", "sse", "scalar"},
      {"WICK_QMATMUL_PATH", "panels", "rows"},
      {"WICK_QMATMUL_PATH", "blas", "sgemm"},
  };
  for (const Bad& c : cases) {
    const std::string msg = error_of(c.name, c.value);
    SCOPED_TRACE(std::string(c.name) + "=" + c.value + ": " + msg);
    ASSERT_FALSE(msg.empty()) << "accepted";
    EXPECT_NE(msg.find(std::string(c.name) + "=" + c.value), std::string::npos);
    EXPECT_NE(msg.find(c.accepted), std::string::npos);
    EXPECT_NE(msg.find("auto"), std::string::npos);
  }
}

// set_options replaces what options() gives (tests and benchmarks force each path with it); a
// reference taken before keeps reading the set it was taken from.
TEST(BackendOptions, SetOptionsReplacesTheProcessOptions) {
  const Options saved = options();
  const Options& before = options();
  Options o = saved;
  o.qmatmul_path = QMatmulPath::Sgemm;
  o.qmv_norm_block = 128;
  set_options(o);
  EXPECT_EQ(options().qmatmul_path, QMatmulPath::Sgemm);
  EXPECT_EQ(options().qmv_norm_block, 128);
  EXPECT_EQ(before.qmatmul_path, saved.qmatmul_path);
  EXPECT_EQ(before.qmv_norm_block, saved.qmv_norm_block);
  set_options(saved);
  EXPECT_EQ(options().qmatmul_path, saved.qmatmul_path);
  EXPECT_EQ(options().qmv_norm_block, saved.qmv_norm_block);
}

// A bad value in the environment throws on the first call and on the next (a failed parse keeps
// nothing); once the value is fixed, the next call parses it. The threadsafe death test style runs
// this test alone in a fresh process, where nothing has read the environment yet; the exit code
// says which step failed.
TEST(BackendOptions, BadEnvironmentThrowsOnEveryCallUntilFixed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto child = [] {
    setenv("WICK_QMATMUL_PATH", "panels", 1);
    for (int call = 0; call < 2; ++call) {
      try {
        options();
        std::exit(1 + call);
      } catch (const Error& e) {
        if (std::string(e.what()).find("WICK_QMATMUL_PATH=panels") == std::string::npos) std::exit(3);
      }
    }
    setenv("WICK_QMATMUL_PATH", "sgemm", 1);
    std::exit(options().qmatmul_path == QMatmulPath::Sgemm ? 0 : 4);
  };
  EXPECT_EXIT(child(), testing::ExitedWithCode(0), "");
}

}  // namespace
