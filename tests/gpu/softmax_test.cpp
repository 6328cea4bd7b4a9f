// kernels::gpu::masked_softmax_forward / backward against the CPU twin (kernels/cpu/softmax.hpp).
#include "kernels/cuda/softmax.hpp"

#include "kernels/cpu/softmax.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/kernels/test_util.hpp"

namespace memtrain::gpu_testing {
namespace {

template <class T>
class SoftmaxTest : public GpuTest {};
using StorageTypes = ::testing::Types<float, __nv_bfloat16, __half>;
TYPED_TEST_SUITE(SoftmaxTest, StorageTypes);

TYPED_TEST(SoftmaxTest, MatchesTheCpuTwinWithKeyMasks) {
  using T = TypeParam;
  using kernels::testing::random_normal;
  unsigned seed = 21;
  // rows, cols, rows per mask row (the T query rows of one sample share its key mask).
  for (auto [rows, cols, per_mask] :
       {std::tuple{96, 128, 32}, std::tuple{7, 513, 1}, std::tuple{40, 5, 8}, std::tuple{3, 1, 3}}) {
    const std::size_t n = std::size_t(rows) * cols;
    const auto x = rounded<T>(random_normal<float>(n, seed++, 3.0));
    const auto dy = rounded<T>(random_normal<float>(n, seed++));
    // Mask: random padding; the last mask row is fully masked (its rows must come out zeros).
    const int mask_rows = rows / per_mask;
    std::vector<float> mask(std::size_t(mask_rows) * cols);
    std::mt19937 gen(seed++);
    for (auto& m : mask) m = gen() % 4 == 0 ? 0.0f : 1.0f;
    for (int j = 0; j < cols; ++j) mask[std::size_t(mask_rows - 1) * cols + j] = 0.0f;
    const float scale = 0.125f;
    std::vector<double> p_ref(n), dx_ref(n);
    const auto xd = widen(x), maskd = widen(mask), dyd = widen(dy);
    kernels::masked_softmax_forward(p_ref.data(), xd.data(), maskd.data(), rows, cols, per_mask, double(scale));
    // The backward runs from the GPU's own probabilities (rounded to T) on both sides.
    DeviceBuffer<T> gx(to_storage<T>(x)), gmask(to_storage<T>(mask)), gp(n), gdy(to_storage<T>(dy)), gdx(n);
    gp.poison();
    gdx.poison();
    kernels::gpu::masked_softmax_forward<T>(this->ctx, gp.get(), gx.get(), gmask.get(), rows, cols, per_mask, scale);
    const auto p_gpu = to_floats(gp.download());
    const auto p_gpu_d = widen(p_gpu);
    kernels::masked_softmax_backward(dx_ref.data(), dyd.data(), p_gpu_d.data(), rows, cols, double(scale));
    kernels::gpu::masked_softmax_backward<T>(this->ctx, gdx.get(), gdy.get(), gp.get(), rows, cols, scale);
    const std::string where =
        std::string(type_name<T>()) + " rows=" + std::to_string(rows) + " cols=" + std::to_string(cols);
    EXPECT_TRUE(close(p_gpu, p_ref, tolerance<T>())) << "probs, " << where;
    EXPECT_TRUE(close(to_floats(gdx.download()), dx_ref, tolerance<T>())) << "dinp, " << where;
    for (int r = rows - per_mask; r < rows; ++r) {
      for (int j = 0; j < cols; ++j) ASSERT_EQ(p_gpu[std::size_t(r) * cols + j], 0.0f) << "fully masked row " << r;
    }
  }
}

}  // namespace
}  // namespace memtrain::gpu_testing
