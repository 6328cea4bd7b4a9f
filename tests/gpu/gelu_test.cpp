// kernels::gpu::bias_gelu_forward / backward against the CPU twin (kernels/cpu/gelu.hpp).
#include "kernels/cuda/gelu.hpp"

#include "kernels/cpu/gelu.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/kernels/test_util.hpp"

namespace memtrain::gpu_testing {
namespace {

template <class T>
class BiasGeluTest : public GpuTest {};
using StorageTypes = ::testing::Types<float, __nv_bfloat16, __half>;
TYPED_TEST_SUITE(BiasGeluTest, StorageTypes);

TYPED_TEST(BiasGeluTest, MatchesTheCpuTwin) {
  using T = TypeParam;
  using kernels::testing::random_normal;
  unsigned seed = 1;
  for (auto [N, C] : {std::pair{64, 3072}, std::pair{17, 33}, std::pair{1, 1}, std::pair{1000, 7}}) {
    const std::size_t n = std::size_t(N) * C;
    const auto x = rounded<T>(random_normal<float>(n, seed++, 2.0));
    const auto b = rounded<T>(random_normal<float>(C, seed++));
    const auto dy = rounded<T>(random_normal<float>(n, seed++));
    const auto dx0 = rounded<T>(random_normal<float>(n, seed++));
    const auto db0 = rounded<T>(random_normal<float>(C, seed++));
    const auto xd = widen(x), bd = widen(b), dyd = widen(dy);
    std::vector<double> y_ref(n), dx_ref = widen(dx0), db_ref = widen(db0);
    kernels::bias_gelu_forward(y_ref.data(), xd.data(), bd.data(), N, C);
    kernels::bias_gelu_backward(dx_ref.data(), db_ref.data(), dyd.data(), xd.data(), bd.data(), N, C);

    DeviceBuffer<T> gx(to_storage<T>(x)), gb(to_storage<T>(b)), gdy(to_storage<T>(dy)), gy(n);
    DeviceBuffer<T> gdx(to_storage<T>(dx0)), gdb(to_storage<T>(db0));
    gy.poison();
    kernels::gpu::bias_gelu_forward<T>(this->ctx, gy.get(), gx.get(), gb.get(), N, C);
    kernels::gpu::bias_gelu_backward<T>(this->ctx, gdx.get(), gdb.get(), gdy.get(), gx.get(), gb.get(), N, C);
    const std::string where = std::string(type_name<T>()) + " N=" + std::to_string(N) + " C=" + std::to_string(C);
    EXPECT_TRUE(close(to_floats(gy.download()), y_ref, tolerance<T>())) << "out, " << where;
    EXPECT_TRUE(close(to_floats(gdx.download()), dx_ref, tolerance<T>())) << "dinp, " << where;
    EXPECT_TRUE(close(to_floats(gdb.download()), db_ref, tolerance<T>())) << "dbias, " << where;
  }
}

TYPED_TEST(BiasGeluTest, InPlaceForwardEqualsOutOfPlace) {
  using T = TypeParam;
  const int N = 9, C = 130;
  const auto x = to_storage<T>(kernels::testing::random_normal<float>(std::size_t(N) * C, 3));
  const auto b = to_storage<T>(kernels::testing::random_normal<float>(C, 4));
  DeviceBuffer<T> gx(x), gb(b), gy(x.size()), inplace(x);
  gy.poison();
  kernels::gpu::bias_gelu_forward<T>(this->ctx, gy.get(), gx.get(), gb.get(), N, C);
  kernels::gpu::bias_gelu_forward<T>(this->ctx, inplace.get(), inplace.get(), gb.get(), N, C);
  EXPECT_EQ(to_floats(inplace.download()), to_floats(gy.download()));
}

}  // namespace
}  // namespace memtrain::gpu_testing
