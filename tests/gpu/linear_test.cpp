// kernels::gpu::linear_forward / linear_backward (cuBLASLt) against their CPU twins on fresh
// random inputs, fp32, TF32, bf16 and fp16, at shapes that include odd and degenerate sizes.
#include "kernels/cuda/linear.hpp"

#include "kernels/cpu/linear.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/kernels/test_util.hpp"

namespace memtrain::gpu_testing {
namespace {

struct Shape {
  int N, C, OC;
};
// BERT-Base's FFN and QKV shapes, and odd sizes that leave every leading dimension unaligned.
const Shape kShapes[] = {{64, 96, 160}, {37, 53, 29}, {1, 1, 1}, {5, 768, 3}, {256, 768, 2304}, {129, 3072, 768}};

template <class T>
class LinearTest : public GpuTest {};
using StorageTypes = ::testing::Types<float, __nv_bfloat16, __half>;
TYPED_TEST_SUITE(LinearTest, StorageTypes);

template <class T>
void check_linear(kernels::gpu::KernelContext& ctx, const Shape& s, double tol, unsigned seed) {
  using kernels::testing::random_normal;
  const std::size_t nx = std::size_t(s.N) * s.C, nw = std::size_t(s.OC) * s.C, ny = std::size_t(s.N) * s.OC;
  // Inputs rounded to T, so the fp32 CPU twin sees exactly what the GPU sees.
  const auto x = rounded<T>(random_normal<float>(nx, seed));
  const auto w = rounded<T>(random_normal<float>(nw, seed + 1, 0.05));
  const auto b = rounded<T>(random_normal<float>(s.OC, seed + 2));
  const auto dy = rounded<T>(random_normal<float>(ny, seed + 3));
  // Gradients accumulate: start them from nonzero values.
  const auto dx0 = rounded<T>(random_normal<float>(nx, seed + 4));
  const auto dw0 = rounded<T>(random_normal<float>(nw, seed + 5));
  const auto db0 = rounded<T>(random_normal<float>(s.OC, seed + 6));

  const auto xd = widen(x), wd = widen(w), bd = widen(b), dyd = widen(dy);
  std::vector<double> y_ref(ny), dx_ref = widen(dx0), dw_ref = widen(dw0), db_ref = widen(db0);
  kernels::linear_forward(y_ref.data(), xd.data(), wd.data(), bd.data(), s.N, s.C, s.OC);
  kernels::linear_backward(dx_ref.data(), dw_ref.data(), db_ref.data(), dyd.data(), xd.data(), wd.data(), s.N, s.C,
                           s.OC);

  DeviceBuffer<T> gx(to_storage<T>(x)), gw(to_storage<T>(w)), gb(to_storage<T>(b)), gdy(to_storage<T>(dy));
  DeviceBuffer<T> gy(ny), gdx(to_storage<T>(dx0)), gdw(to_storage<T>(dw0)), gdb(to_storage<T>(db0));
  gy.poison();
  kernels::gpu::linear_forward<T>(ctx, gy.get(), gx.get(), gw.get(), gb.get(), s.N, s.C, s.OC);
  kernels::gpu::linear_backward<T>(ctx, gdx.get(), gdw.get(), gdb.get(), gdy.get(), gx.get(), gw.get(), s.N, s.C, s.OC);
  MEMTRAIN_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  const std::string where = std::string(type_name<T>()) + " N=" + std::to_string(s.N) + " C=" + std::to_string(s.C) +
                            " OC=" + std::to_string(s.OC);
  EXPECT_TRUE(close(to_floats(gy.download()), y_ref, tol)) << "out, " << where;
  EXPECT_TRUE(close(to_floats(gdx.download()), dx_ref, tol)) << "dinp, " << where;
  EXPECT_TRUE(close(to_floats(gdw.download()), dw_ref, tol)) << "dweight, " << where;
  EXPECT_TRUE(close(to_floats(gdb.download()), db_ref, tol)) << "dbias, " << where;
}

TYPED_TEST(LinearTest, MatchesTheCpuTwinAtEveryShape) {
  unsigned seed = 100;
  for (const Shape& s : kShapes) check_linear<TypeParam>(this->ctx, s, tolerance<TypeParam>(), seed += 10);
}

TYPED_TEST(LinearTest, UnalignedOperandsStillMultiplyCorrectly) {
  // A weight one element into its buffer: 4-byte (fp32) or 2-byte (16-bit) aligned only.
  using T = TypeParam;
  const int N = 33, C = 64, OC = 48;
  const auto x = rounded<T>(kernels::testing::random_normal<float>(std::size_t(N) * C, 7));
  auto w = rounded<T>(kernels::testing::random_normal<float>(std::size_t(OC) * C + 1, 8, 0.1));
  std::vector<double> y_ref(std::size_t(N) * OC);
  const auto xd = widen(x), wd = widen(w);
  kernels::linear_forward(y_ref.data(), xd.data(), wd.data() + 1, nullptr, N, C, OC);
  DeviceBuffer<T> gx(to_storage<T>(x)), gw(to_storage<T>(w)), gy(y_ref.size());
  gy.poison();
  kernels::gpu::linear_forward<T>(this->ctx, gy.get(), gx.get(), gw.get() + 1, nullptr, N, C, OC);
  this->sync();
  EXPECT_TRUE(close(to_floats(gy.download()), y_ref, tolerance<T>()));
}

class LinearTf32Test : public GpuTest {};

TEST_F(LinearTf32Test, Tf32StaysWithinItsBound) {
  ctx.allow_tf32 = true;
  unsigned seed = 500;
  for (const Shape& s : kShapes) check_linear<float>(ctx, s, 1e-3, seed += 10);
}

}  // namespace
}  // namespace memtrain::gpu_testing
