// kernels::gpu 16-bit conversions are bitwise the CPU's: every 16-bit pattern to fp32, and fp32
// patterns to 16 bits (random bits, the rounding boundaries, subnormals, infinities and NaNs).
#include "kernels/cuda/half_convert.hpp"

#include <random>

#include "tests/gpu/gpu_test_util.hpp"

namespace memtrain::gpu_testing {
namespace {

class HalfConvertTest : public GpuTest {};

TEST_F(HalfConvertTest, EverySixteenBitPatternWidensAsOnTheCpu) {
  std::vector<std::uint16_t> all(65536);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
  for (auto f : {kernels::HalfFormat::bf16, kernels::HalfFormat::f16}) {
    std::vector<float> ref(all.size());
    kernels::convert_half_to_float(ref.data(), all.data(), all.size(), f);
    DeviceBuffer<std::uint16_t> in(all);
    DeviceBuffer<float> out(all.size());
    out.poison();
    kernels::gpu::convert_half_to_float(ctx, out.get(), in.get(), all.size(), f);
    const auto got = out.download();
    ASSERT_EQ(std::memcmp(got.data(), ref.data(), ref.size() * 4), 0)
        << (f == kernels::HalfFormat::bf16 ? "bf16" : "f16");
  }
}

TEST_F(HalfConvertTest, FloatsNarrowAsOnTheCpu) {
  std::vector<std::uint32_t> bits;
  std::mt19937 gen(5);
  for (int i = 0; i < 1 << 20; ++i) bits.push_back(gen());
  // Halfway cases of both formats, around the f16 subnormal and overflow thresholds.
  for (std::uint32_t base : {0x3f800000u, 0x38800000u, 0x33000000u, 0x477fe000u, 0x7f7fffffu, 0x00000001u}) {
    for (std::uint32_t d = 0; d < 0x4000; ++d) {
      bits.push_back(base + d);
      bits.push_back((base + d) | 0x80000000u);
    }
  }
  for (std::uint32_t special : {0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0xffbfffffu, 0u, 0x80000000u}) {
    bits.push_back(special);
  }
  std::vector<float> x(bits.size());
  std::memcpy(x.data(), bits.data(), bits.size() * 4);
  for (auto f : {kernels::HalfFormat::bf16, kernels::HalfFormat::f16}) {
    std::vector<std::uint16_t> ref(x.size());
    kernels::convert_float_to_half(ref.data(), x.data(), x.size(), f);
    DeviceBuffer<float> in(x);
    DeviceBuffer<std::uint16_t> out(x.size());
    out.poison();
    kernels::gpu::convert_float_to_half(ctx, out.get(), in.get(), x.size(), f);
    const auto got = out.download();
    for (std::size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(got[i], ref[i]) << (f == kernels::HalfFormat::bf16 ? "bf16" : "f16") << " of bits 0x" << std::hex
                                << bits[i];
    }
  }
}

}  // namespace
}  // namespace memtrain::gpu_testing
