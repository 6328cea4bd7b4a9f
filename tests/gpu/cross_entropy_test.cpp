// kernels::gpu::softmax_cross_entropy_forward_backward against the CPU twin
// (kernels/cpu/cross_entropy.hpp): loss, gradient, argmax accuracy, and the bad-target error.
#include "kernels/cuda/cross_entropy.hpp"

#include "kernels/cpu/cross_entropy.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/kernels/test_util.hpp"

namespace memtrain::gpu_testing {
namespace {

template <class T>
class CrossEntropyTest : public GpuTest {};
using StorageTypes = ::testing::Types<float, __nv_bfloat16, __half>;
TYPED_TEST_SUITE(CrossEntropyTest, StorageTypes);

TYPED_TEST(CrossEntropyTest, LossGradientAndAccuracyMatchTheCpuTwin) {
  using T = TypeParam;
  unsigned seed = 31;
  for (auto [M, V] : {std::pair{160, 30522}, std::pair{7, 33}, std::pair{1, 1}, std::pair{50, 257}}) {
    const std::size_t n = std::size_t(M) * V;
    auto logits = rounded<T>(kernels::testing::random_normal<float>(n, seed++, 2.0));
    std::mt19937 gen(seed++);
    std::vector<std::int32_t> targets(M);
    for (auto& t : targets) t = static_cast<std::int32_t>(gen() % V);
    // Make some rows right, with a tie for the maximum placed after the target (first wins).
    for (int r = 0; r < M; r += 3) {
      logits[std::size_t(r) * V + targets[r]] = 20.0f;
      if (targets[r] + 1 < V) logits[std::size_t(r) * V + targets[r] + 1] = 20.0f;
    }
    const float grad_scale = 1.0f / 1000;
    std::vector<double> d_ref(n);
    const auto logits_d = widen(logits);
    std::int64_t correct_ref = -1, correct = -1;
    const double loss_ref = kernels::softmax_cross_entropy_forward_backward(
        d_ref.data(), logits_d.data(), targets.data(), M, V, double(grad_scale), &correct_ref);
    DeviceBuffer<T> glogits(to_storage<T>(logits)), gd(n);
    DeviceBuffer<std::int32_t> gt(targets);
    gd.poison();
    const double loss = kernels::gpu::softmax_cross_entropy_forward_backward<T>(this->ctx, gd.get(), glogits.get(),
                                                                                gt.get(), M, V, grad_scale, &correct);
    const std::string where = std::string(type_name<T>()) + " M=" + std::to_string(M) + " V=" + std::to_string(V);
    EXPECT_NEAR(loss, loss_ref, 1e-5 * std::max(1.0, std::abs(loss_ref))) << where;
    EXPECT_EQ(correct, correct_ref) << where;
    EXPECT_TRUE(close(to_floats(gd.download()), d_ref, tolerance<T>())) << "dlogits, " << where;
    // Forward only (evaluation) gives the same loss.
    EXPECT_EQ(kernels::gpu::softmax_cross_entropy_forward_backward<T>(this->ctx, nullptr, glogits.get(), gt.get(), M, V,
                                                                      grad_scale, nullptr),
              loss);
  }
}

TYPED_TEST(CrossEntropyTest, ATargetOutsideTheVocabularyNamesItsRowAndWritesNothing) {
  using T = TypeParam;
  const int M = 4, V = 10;
  DeviceBuffer<T> logits(to_storage<T>(std::vector<float>(M * V, 0.5f))), d(M * V);
  d.poison();
  DeviceBuffer<std::int32_t> targets(std::vector<std::int32_t>{1, 2, 10, -1});
  try {
    kernels::gpu::softmax_cross_entropy_forward_backward<T>(this->ctx, d.get(), logits.get(), targets.get(), M, V, 1.0f,
                                                            nullptr);
    FAIL() << "a target of 10 with V = 10 was accepted";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("row 2 has target 10"), std::string::npos) << e.what();
  }
  for (float v : to_floats(d.download())) ASSERT_TRUE(std::isnan(v)) << "dlogits was written";
}

}  // namespace
}  // namespace memtrain::gpu_testing
