// kernels::gpu::dropout_forward / backward draw the CPU's masks: the same Philox counters, so
// the GPU output is bitwise the CPU's (fp32), or the CPU's rounded to 16 bits.
#include "kernels/cuda/dropout.hpp"

#include "kernels/cpu/dropout.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/kernels/test_util.hpp"

namespace memtrain::gpu_testing {
namespace {

template <class T>
class DropoutTest : public GpuTest {};
using StorageTypes = ::testing::Types<float, __nv_bfloat16, __half>;
TYPED_TEST_SUITE(DropoutTest, StorageTypes);

TYPED_TEST(DropoutTest, DropsExactlyWhatTheCpuDrops) {
  using T = TypeParam;
  const kernels::RngKey key{1234, 77, 3, 2, 1};
  // rows, per_sample, first_sample, first_element (a sequence-parallel slice starts mid-sample
  // and mid-Philox-block).
  for (auto [rows, per_sample, first_sample, first_element] :
       {std::tuple{8, 128L * 96, 0ULL, 0ULL}, std::tuple{3, 33L, 5ULL, 7ULL}, std::tuple{1, 1L, 2ULL, 3ULL},
        std::tuple{16, 4097L, 1ULL << 33, (1ULL << 32) - 2}}) {
    for (float p : {0.1f, 0.5f, 0.0f, 1.0f}) {
      const std::size_t n = std::size_t(rows) * per_sample;
      const auto x = rounded<T>(kernels::testing::random_normal<float>(n, 9));
      std::vector<float> y_ref(n);
      kernels::dropout_forward(y_ref.data(), x.data(), rows, per_sample, p, key, first_sample, first_element);
      DeviceBuffer<T> gx(to_storage<T>(x)), gy(n), gdx(n);
      gy.poison();
      gdx.poison();
      kernels::gpu::dropout_forward<T>(this->ctx, gy.get(), gx.get(), rows, per_sample, p, key, first_sample,
                                       first_element);
      kernels::gpu::dropout_backward<T>(this->ctx, gdx.get(), gx.get(), rows, per_sample, p, key, first_sample,
                                        first_element);
      const auto y = to_floats(gy.download()), dx = to_floats(gdx.download());
      const auto expected = rounded<T>(y_ref);
      std::size_t dropped = 0;
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(y[i], expected[i]) << type_name<T>() << " p=" << p << " element " << i;
        ASSERT_EQ(dx[i], expected[i]) << "backward, element " << i;
        dropped += y_ref[i] == 0.0f && x[i] != 0.0f;
      }
      if (p == 0.5f && n > 1000) {
        EXPECT_NEAR(double(dropped) / n, 0.5, 0.05);
      }
    }
  }
}

// The fused dropout + residual: the CPU's fused kernel on the stored (rounded) inputs, then
// rounded once to T, bit for bit (the GPU's product and sum are not contracted into an FMA).
TYPED_TEST(DropoutTest, DropoutResidualIsTheCpusRoundedOnce) {
  using T = TypeParam;
  const kernels::RngKey key{99, 5, 1, 0, 2};
  for (auto [rows, per_sample, first_sample, first_element] :
       {std::tuple{8, 128L * 96, 0ULL, 0ULL}, std::tuple{3, 33L, 5ULL, 7ULL}, std::tuple{1, 1L, 2ULL, 3ULL}}) {
    for (float p : {0.1f, 0.5f, 0.0f}) {
      const std::size_t n = std::size_t(rows) * per_sample;
      const auto x = rounded<T>(kernels::testing::random_normal<float>(n, 21));
      const auto res = rounded<T>(kernels::testing::random_normal<float>(n, 22));
      std::vector<float> y_ref(n);
      kernels::dropout_residual_forward(y_ref.data(), x.data(), res.data(), rows, per_sample, p, key, first_sample,
                                        first_element);
      DeviceBuffer<T> gx(to_storage<T>(x)), gres(to_storage<T>(res)), gy(n);
      gy.poison();
      kernels::gpu::dropout_residual_forward<T>(this->ctx, gy.get(), gx.get(), gres.get(), rows, per_sample, p, key,
                                                first_sample, first_element);
      // In place too (out aliases inp), as the model calls it.
      kernels::gpu::dropout_residual_forward<T>(this->ctx, gx.get(), gx.get(), gres.get(), rows, per_sample, p, key,
                                                first_sample, first_element);
      const auto y = to_floats(gy.download()), y_in_place = to_floats(gx.download());
      const auto expected = rounded<T>(y_ref);
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(y[i], expected[i]) << type_name<T>() << " p=" << p << " element " << i;
        ASSERT_EQ(y_in_place[i], expected[i]) << "in place, element " << i;
      }
    }
  }
  DeviceBuffer<T> z(4);
  EXPECT_THROW(kernels::gpu::dropout_residual_forward<T>(this->ctx, z.get(), z.get(), z.get(), 1, 4, 1.0f, key, 0),
               std::invalid_argument);
}

TYPED_TEST(DropoutTest, NegativeProbabilityIsRefusedBeforeAnyLaunch) {
  DeviceBuffer<TypeParam> x(4);
  EXPECT_THROW(kernels::gpu::dropout_forward<TypeParam>(this->ctx, x.get(), x.get(), 1, 4, -0.1f, {}, 0),
               std::invalid_argument);
}

}  // namespace
}  // namespace memtrain::gpu_testing
