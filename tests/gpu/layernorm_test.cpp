// kernels::gpu::layernorm_forward / backward against the CPU twin (kernels/cpu/layernorm.hpp).
#include "kernels/cuda/layernorm.hpp"

#include "kernels/cpu/layernorm.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/kernels/test_util.hpp"

namespace memtrain::gpu_testing {
namespace {

template <class T>
class LayerNormTest : public GpuTest {};
using StorageTypes = ::testing::Types<float, __nv_bfloat16, __half>;
TYPED_TEST_SUITE(LayerNormTest, StorageTypes);

TYPED_TEST(LayerNormTest, MatchesTheCpuTwin) {
  using T = TypeParam;
  using kernels::testing::random_normal;
  unsigned seed = 11;
  for (auto [N, C] :
       {std::pair{128, 768}, std::pair{33, 1024}, std::pair{5, 31}, std::pair{1, 1}, std::pair{300, 65}}) {
    const std::size_t n = std::size_t(N) * C;
    // An offset mean and a large scale: the two-pass variance must not cancel.
    auto raw = random_normal<float>(n, seed++, 3.0);
    for (auto& v : raw) v += 50.0f;
    const auto x = rounded<T>(raw);
    const auto gamma = rounded<T>(random_normal<float>(C, seed++));
    const auto beta = rounded<T>(random_normal<float>(C, seed++));
    const auto dy = rounded<T>(random_normal<float>(n, seed++));
    const auto dx0 = rounded<T>(random_normal<float>(n, seed++));
    const auto dg0 = rounded<T>(random_normal<float>(C, seed++));
    const auto db0 = rounded<T>(random_normal<float>(C, seed++));
    const float eps = 1e-12f;
    const auto xd = widen(x), gd = widen(gamma), bd = widen(beta), dyd = widen(dy);
    std::vector<double> y_ref(n), mean_ref(N), rstd_ref(N), dx_ref = widen(dx0), dg_ref = widen(dg0),
                                                            db_ref = widen(db0);
    kernels::layernorm_forward(y_ref.data(), mean_ref.data(), rstd_ref.data(), xd.data(), gd.data(), bd.data(), N, C,
                               double(eps));
    kernels::layernorm_backward(dx_ref.data(), dg_ref.data(), db_ref.data(), dyd.data(), xd.data(), gd.data(),
                                mean_ref.data(), rstd_ref.data(), N, C);

    DeviceBuffer<T> gx(to_storage<T>(x)), gg(to_storage<T>(gamma)), gbeta(to_storage<T>(beta));
    DeviceBuffer<T> gdy(to_storage<T>(dy)), gy(n), gdx(to_storage<T>(dx0)), gdg(to_storage<T>(dg0)),
        gdb(to_storage<T>(db0));
    DeviceBuffer<float> gmean(N), grstd(N);
    gy.poison();
    gmean.poison();
    grstd.poison();
    kernels::gpu::layernorm_forward<T>(this->ctx, gy.get(), gmean.get(), grstd.get(), gx.get(), gg.get(), gbeta.get(),
                                       N, C, eps);
    kernels::gpu::layernorm_backward<T>(this->ctx, gdx.get(), gdg.get(), gdb.get(), gdy.get(), gx.get(), gg.get(),
                                        gmean.get(), grstd.get(), N, C);
    const std::string where = std::string(type_name<T>()) + " N=" + std::to_string(N) + " C=" + std::to_string(C);
    EXPECT_TRUE(close(to_floats(gy.download()), y_ref, tolerance<T>())) << "out, " << where;
    EXPECT_TRUE(close(gmean.download(), mean_ref, 1e-5)) << "mean, " << where;
    EXPECT_TRUE(close(grstd.download(), rstd_ref, 1e-5)) << "rstd, " << where;
    EXPECT_TRUE(close(to_floats(gdx.download()), dx_ref, tolerance<T>())) << "dx, " << where;
    EXPECT_TRUE(close(to_floats(gdg.download()), dg_ref, tolerance<T>())) << "dgamma, " << where;
    EXPECT_TRUE(close(to_floats(gdb.download()), db_ref, tolerance<T>())) << "dbeta, " << where;
  }
}

}  // namespace
}  // namespace memtrain::gpu_testing
