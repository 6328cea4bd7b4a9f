// kernels::gpu AdamW, global-norm sum of squares and finiteness check against the CPU twins
// (kernels/cpu/adamw.hpp, kernels/cpu/half_convert.hpp). AdamW is bitwise the CPU's (Note [No
// fused multiply-add in AdamW]).
#include "kernels/cuda/adamw.hpp"

#include <limits>

#include "kernels/cpu/adamw.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/kernels/test_util.hpp"

namespace memtrain::gpu_testing {
namespace {

class AdamWTest : public GpuTest {};

TEST_F(AdamWTest, Fp32UpdateIsBitwiseTheCpus) {
  using kernels::testing::random_normal;
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{1000003}}) {
    auto p = random_normal<float>(n, 1), m = random_normal<float>(n, 2, 0.01), g = random_normal<float>(n, 3);
    auto v = random_normal<float>(n, 4, 0.01);
    for (auto& x : v) x = x * x;
    DeviceBuffer<float> gp(p), gm(m), gv(v), gg(g);
    for (std::int64_t step : {1, 2, 1000}) {
      kernels::adamw_update(p.data(), g.data(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.999f, 1e-6f, 0.01f, step, 0.37f);
      kernels::gpu::adamw_update(ctx, gp.get(), gg.get(), gm.get(), gv.get(), n, 1e-3f, 0.9f, 0.999f, 1e-6f, 0.01f,
                                 step, 0.37f);
    }
    EXPECT_EQ(gp.download(), p) << "param, n=" << n;
    EXPECT_EQ(gm.download(), m) << "m, n=" << n;
    EXPECT_EQ(gv.download(), v) << "v, n=" << n;
  }
  EXPECT_THROW(
      kernels::gpu::adamw_update(ctx, nullptr, nullptr, nullptr, nullptr, 0, 1e-3f, 0.9f, 0.999f, 1e-6f, 0.0f, 0),
      std::invalid_argument);
}

TEST_F(AdamWTest, Bf16UpdateIsBitwiseTheCpus) {
  using kernels::testing::random_normal;
  const std::int64_t n = 77777;
  auto master = random_normal<float>(n, 5), m = random_normal<float>(n, 6, 0.01), v = random_normal<float>(n, 7, 0.01);
  for (auto& x : v) x = x * x;
  std::vector<std::uint16_t> value(n), grad(n);
  const auto gf = random_normal<float>(n, 8);
  for (std::int64_t i = 0; i < n; ++i) grad[i] = kernels::float_to_bf16(gf[i]);
  DeviceBuffer<float> gmaster(master), gm(m), gv(v);
  DeviceBuffer<__nv_bfloat16> gvalue(n), ggrad(grad);
  gvalue.poison();
  kernels::adamw_update_bf16(master.data(), value.data(), grad.data(), m.data(), v.data(), n, 2e-4f, 0.9f, 0.98f, 1e-8f,
                             0.1f, 3, 0.5f);
  kernels::gpu::adamw_update_bf16(ctx, gmaster.get(), gvalue.get(), ggrad.get(), gm.get(), gv.get(), n, 2e-4f, 0.9f,
                                  0.98f, 1e-8f, 0.1f, 3, 0.5f);
  EXPECT_EQ(gmaster.download(), master);
  EXPECT_EQ(gm.download(), m);
  EXPECT_EQ(gv.download(), v);
  const auto got = gvalue.download();
  std::vector<std::uint16_t> bits(n);
  std::memcpy(bits.data(), got.data(), n * 2);
  EXPECT_EQ(bits, value);
}

TEST_F(AdamWTest, F16UpdateIsBitwiseTheCpus) {
  using kernels::testing::random_normal;
  const std::int64_t n = 77779;
  auto master = random_normal<float>(n, 15), m = random_normal<float>(n, 16, 0.01),
       v = random_normal<float>(n, 17, 0.01);
  for (auto& x : v) x = x * x;
  std::vector<std::uint16_t> value(n), grad(n);
  const auto gf = random_normal<float>(n, 18);
  kernels::convert_float_to_half(grad.data(), gf.data(), n, kernels::HalfFormat::f16);
  DeviceBuffer<float> gmaster(master), gm(m), gv(v);
  DeviceBuffer<__half> gvalue(n), ggrad(grad);
  gvalue.poison();
  kernels::adamw_update_f16(master.data(), value.data(), grad.data(), m.data(), v.data(), n, 2e-4f, 0.9f, 0.98f, 1e-8f,
                            0.1f, 3, 0.5f);
  kernels::gpu::adamw_update_f16(ctx, gmaster.get(), gvalue.get(), ggrad.get(), gm.get(), gv.get(), n, 2e-4f, 0.9f,
                                 0.98f, 1e-8f, 0.1f, 3, 0.5f);
  EXPECT_EQ(gmaster.download(), master);
  EXPECT_EQ(gm.download(), m);
  EXPECT_EQ(gv.download(), v);
  const auto got = gvalue.download();
  std::vector<std::uint16_t> bits(n);
  std::memcpy(bits.data(), got.data(), n * 2);
  EXPECT_EQ(bits, value);
}

TEST_F(AdamWTest, ScaleInPlaceIsBitwiseTheCpus) {
  auto x = kernels::testing::random_normal<float>(100003, 19);
  DeviceBuffer<float> gx(x);
  kernels::scale_inplace(x.data(), 100003, 0.3337f);
  kernels::gpu::scale_inplace(ctx, gx.get(), 100003, 0.3337f);
  EXPECT_EQ(gx.download(), x);
}

template <class T>
class ReductionTest : public GpuTest {};
using StorageTypes = ::testing::Types<float, __nv_bfloat16, __half>;
TYPED_TEST_SUITE(ReductionTest, StorageTypes);

TYPED_TEST(ReductionTest, SumOfSquaresMatchesTheCpuAndRepeatsBitwise) {
  using T = TypeParam;
  for (std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{1000}, std::int64_t{3000017}}) {
    const auto x = rounded<T>(kernels::testing::random_normal<float>(std::max<std::int64_t>(n, 1), 41));
    DeviceBuffer<T> gx(to_storage<T>(x));
    const double ref = kernels::sum_of_squares(x.data(), n);
    const double got = kernels::gpu::sum_of_squares<T>(this->ctx, gx.get(), n);
    EXPECT_NEAR(got, ref, 1e-12 * std::max(1.0, ref)) << type_name<T>() << " n=" << n;
    EXPECT_EQ(kernels::gpu::sum_of_squares<T>(this->ctx, gx.get(), n), got) << "not deterministic";
  }
}

TYPED_TEST(ReductionTest, AllFiniteFindsOneInfOrNanAnywhere) {
  using T = TypeParam;
  const std::int64_t n = 1 << 20;
  auto x = rounded<T>(kernels::testing::random_normal<float>(n, 42));
  DeviceBuffer<T> gx(to_storage<T>(x));
  EXPECT_TRUE(kernels::gpu::all_finite<T>(this->ctx, gx.get(), n));
  EXPECT_TRUE(kernels::gpu::all_finite<T>(this->ctx, gx.get(), 0));
  for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    for (std::int64_t at : {std::int64_t{0}, n / 2 + 3, n - 1}) {
      auto y = x;
      y[at] = bad;
      gx.upload(to_storage<T>(y));
      EXPECT_FALSE(kernels::gpu::all_finite<T>(this->ctx, gx.get(), n)) << bad << " at " << at;
      // And the CPU agrees (its twin takes fp32 or 16-bit words).
      EXPECT_FALSE(kernels::all_finite(y.data(), n));
    }
  }
}

}  // namespace
}  // namespace memtrain::gpu_testing
