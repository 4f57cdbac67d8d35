// The pieces the layer split moved: the backend registry (and its no-GPU half in CPU builds),
// the shared float-only dispatch, the convolution shapes beside the backend contract, and the
// library's small-float conversions (src/ops/numeric.hpp). Expected values are by hand.
#include <string>

#include "backend/registry.hpp"
#include "backend/storage.hpp"
#include "ops/dtype_dispatch.hpp"
#include "ops/numeric.hpp"
#include "test_util.hpp"

using namespace wick;

namespace {
// The message of the Error(kind) f throws; a failure when it throws something else or nothing.
template <class F> std::string error_of(ErrorKind kind, F&& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no wick::Error thrown";
  return "";
}
bool cpu_only() { return !registry::gpu_kind().has_value(); }
}  // namespace

TEST(Registry, CpuBackendIsTheOneTheCoreUses) {
  EXPECT_EQ(&registry::cpu_backend(), &backend_for(Device::cpu()));
  DeviceInfo info = device_info(Device::cpu());
  EXPECT_EQ(info.name, "cpu");
  EXPECT_GE(info.compute_units, 1);
  MemoryStats m = memory_stats(Device::cpu());
  EXPECT_EQ(m.in_use, 0u);
  EXPECT_EQ(m.cached, 0u);
  EXPECT_EQ(built_backends().front(), "cpu");
  EXPECT_EQ(available_devices().front(), Device::cpu());
}

// A CPU-only build links src/backend/no_gpu: no GPU kind, no device, and every GPU request
// is an Error(Device) that says what to rebuild with (the messages core/device.cpp had).
TEST(Registry, NoGpuBuildSaysWhatIsMissing) {
  if (!cpu_only()) GTEST_SKIP() << "this build has a GPU backend";
  EXPECT_EQ(registry::gpu_device_count(), 0);
  EXPECT_EQ(built_backends(), std::vector<std::string>{"cpu"});
  EXPECT_EQ(available_devices(), std::vector<Device>{Device::cpu()});
  EXPECT_EQ(gpu_unavailable_reason(), "");
  EXPECT_EQ(Device::best(), Device::cpu());
  EXPECT_NE(error_of(ErrorKind::Device, [] { Device::gpu(0); })
                .find("Device::gpu(0): this build of wick has no GPU backend; rebuild with -DWICK_GPU=cuda or "
                      "-DWICK_GPU=rocm"),
            std::string::npos);
  EXPECT_NE(error_of(ErrorKind::Device, [] { Device::cuda(1); })
                .find("device cuda:1: this build of wick has no cuda backend (backends built: cpu); rebuild with "
                      "-DWICK_GPU=cuda"),
            std::string::npos);
  EXPECT_NE(error_of(ErrorKind::Device, [] { Device::parse("rocm:0"); }).find("rebuild with -DWICK_GPU=rocm"),
            std::string::npos);
  const Device ghost = Device::unchecked(DeviceKind::Cuda, 0);
  EXPECT_NE(error_of(ErrorKind::Device, [&] { device_info(ghost); }).find("device_info: cuda:0 is not in this build"),
            std::string::npos);
  EXPECT_NE(error_of(ErrorKind::Device, [&] { memory_stats(ghost); }).find("memory_stats: cuda:0 is not in this build"),
            std::string::npos);
  EXPECT_NE(error_of(ErrorKind::Device, [&] { backend_for(ghost); }).find("device cuda:0 is not available"),
            std::string::npos);
  EXPECT_NO_THROW(empty_cache(ghost));  // nothing is cached
  // The no-GPU registry entries themselves, for a caller that skipped gpu_kind().
  EXPECT_NE(error_of(ErrorKind::Device, [] { registry::gpu_backend(0); }).find("has no GPU backend"),
            std::string::npos);
}

// A GPU build names its own backend when asked for the other vendor's.
TEST(Registry, GpuBuildNamesItsBackend) {
  if (cpu_only()) GTEST_SKIP() << "CPU-only build";
  const bool cuda = *registry::gpu_kind() == DeviceKind::Cuda;
  EXPECT_EQ(built_backends(), (std::vector<std::string>{"cpu", cuda ? "cuda" : "rocm"}));
  const std::string msg = error_of(ErrorKind::Device, [&] { cuda ? Device::rocm(0) : Device::cuda(0); });
  EXPECT_NE(msg.find(cuda ? "(backends built: cpu, cuda)" : "(backends built: cpu, rocm)"), std::string::npos) << msg;
}

TEST(DtypeDispatch, FloatOnlyCallsWithTheTypeAndNamesTheOpOtherwise) {
  EXPECT_EQ(dispatch_float(DType::F16, "op", [](auto tag) { return int(sizeof(tag)); }), 2);
  EXPECT_EQ(dispatch_float(DType::BF16, "op", [](auto tag) { return int(sizeof(tag)); }), 2);
  EXPECT_EQ(dispatch_float(DType::F8E4M3, "op", [](auto tag) { return int(sizeof(tag)); }), 1);
  EXPECT_EQ(dispatch_float(DType::F64, "op", [](auto tag) { return int(sizeof(tag)); }), 8);
  for (DType d : {DType::U8, DType::U32, DType::I16, DType::I32, DType::I64}) {
    const std::string msg = error_of(ErrorKind::DType, [&] { dispatch_float(d, "softmax", [](auto) { return 0; }); });
    EXPECT_NE(msg.find(std::string("softmax: not defined for integer dtype ") + dtype_name(d) +
                       "; convert with to_dtype(DType::F32) first"),
              std::string::npos)
        << msg;
  }
}

// PyTorch's formulas, worked by hand: out = (in + 2p - d(k-1) - 1) / s + 1 and, transposed,
// (in - 1) s - 2p + d(k-1) + out_pad + 1.
TEST(ConvShape, OutputSizes) {
  Conv2dShape s{1, 1, 5, 7, 1, 3, 2, Conv2dParams{}};
  s.p.padding_h = 1, s.p.stride_h = 2;  // (5 + 2 - 2 - 1) / 2 + 1 = 3
  s.p.dilation_w = 3;                   // (7 - 3 - 1) / 1 + 1 = 4
  EXPECT_EQ(s.h_out(), 3u);
  EXPECT_EQ(s.w_out(), 4u);
  Conv2dShape t{1, 1, 3, 4, 1, 3, 2, Conv2dParams{}};
  t.p.padding_h = 1, t.p.stride_h = 2, t.p.output_padding_h = 1;  // 2*2 - 2 + 2 + 1 + 1 = 6
  t.p.stride_w = 3, t.p.dilation_w = 2;                           // 3*3 - 0 + 2 + 0 + 1 = 12
  EXPECT_EQ(t.h_out_transposed(), 6u);
  EXPECT_EQ(t.w_out_transposed(), 12u);
}

// On the host, the library's conversions are the exact software ones (IEEE bit patterns by hand).
TEST(SmallFloat, LibraryConversionsOnTheHost) {
  EXPECT_EQ(from_f32<f16>(1.0f).bits, 0x3c00);
  EXPECT_EQ(from_f32<f16>(65504.0f).bits, 0x7bff);        // largest finite half
  EXPECT_EQ(from_f32<f16>(65520.0f).bits, 0x7c00);        // the tie above it rounds to inf
  EXPECT_EQ(from_f32<f16>(5.9604645e-08f).bits, 0x0001);  // 2^-24, smallest subnormal
  EXPECT_EQ(from_f32<bf16>(1.0f).bits, 0x3f80);
  EXPECT_EQ(from_f32<bf16>(1.00390625f).bits, 0x3f80);  // 1 + 2^-8: tie, to even
  EXPECT_EQ(from_f32<bf16>(1.01171875f).bits, 0x3f82);  // 1 + 3*2^-8: tie, to even (up)
  EXPECT_EQ(from_f32<f8e4m3>(448.0f).bits, 0x7e);
  EXPECT_EQ(to_f32(f16::from_bits(0xc000)), -2.0f);
  EXPECT_EQ(to_f32(bf16::from_bits(0x4049)), 3.140625f);
  EXPECT_EQ(to_f32(f8e4m3::from_bits(0x01)), 0.001953125f);             // 2^-9
  EXPECT_EQ(cast<f16>(double(1.0 + 1.0 / 2048 + 1e-12)).bits, 0x3c01);  // just above the tie: up, rounded once
}
