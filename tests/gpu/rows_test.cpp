// kernels::gpu row adds, gathers and scatters against their CPU twins (kernels/cpu/rows.hpp),
// bit for bit (each element is one float add or a moved value), at odd sizes, with outputs
// poisoned where the op overwrites so an unwritten element fails.
#include "kernels/cuda/rows.hpp"

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/rows.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/kernels/test_util.hpp"

namespace memtrain::gpu_testing {
namespace {

using kernels::testing::random_normal;

class RowsTest : public GpuTest {};

TEST_F(RowsTest, AddBiasAndAddInplaceAreBitwiseTheCpus) {
  const std::int64_t N = 1023, C = 771;
  auto y = random_normal<float>(N * C, 1);
  const auto b = random_normal<float>(C, 2), x = random_normal<float>(N * C, 3);
  DeviceBuffer<float> gy(y), gb(b), gx(x);
  kernels::gpu::add_bias(ctx, gy.get(), gb.get(), N, C);
  kernels::add_bias(y.data(), b.data(), N, C);
  EXPECT_EQ(gy.download(), y);
  kernels::gpu::add_inplace(ctx, gy.get(), gx.get(), N * C);
  kernels::add_inplace(y.data(), x.data(), N * C);
  EXPECT_EQ(gy.download(), y);
}

TEST_F(RowsTest, GatherAndScatterAddAreBitwiseTheCpus) {
  const std::int64_t N = 517, C = 333;
  const auto h = random_normal<float>(N * C, 4);
  std::vector<std::int32_t> rows;
  for (std::int32_t r = 3; r < N; r += 7) rows.push_back(r % 5 == 0 ? -1 : r);
  const auto M = static_cast<std::int64_t>(rows.size());
  DeviceBuffer<float> gh(h), gg(M * C);
  DeviceBuffer<std::int32_t> grows(rows);
  gg.poison();
  kernels::gpu::gather_rows(ctx, gg.get(), gh.get(), grows.get(), M, C * 4);
  std::vector<float> g(M * C);
  kernels::gather_rows(g.data(), h.data(), rows.data(), M, C * 4);
  EXPECT_EQ(gg.download(), g);
  // 16-bit rows: half the bytes, moved as stored.
  DeviceBuffer<float> gg16(M * C / 2 + 1);
  gg16.poison();
  kernels::gpu::gather_rows(ctx, gg16.get(), gh.get(), grows.get(), M, C * 2);
  std::vector<std::uint16_t> g16(M * C), got16(M * C);
  kernels::gather_rows(g16.data(), h.data(), rows.data(), M, C * 2);
  const auto raw = gg16.download();
  std::memcpy(got16.data(), raw.data(), g16.size() * 2);
  EXPECT_EQ(got16, g16);
  EXPECT_THROW(kernels::gpu::gather_rows(ctx, gg.get(), gh.get(), grows.get(), M, 3), std::invalid_argument);

  auto dh = random_normal<float>(N * C, 5);
  DeviceBuffer<float> gdh(dh);
  kernels::gpu::scatter_add_rows(ctx, gdh.get(), gg.get(), grows.get(), M, C);
  kernels::scatter_add_rows(dh.data(), g.data(), rows.data(), M, C);
  EXPECT_EQ(gdh.download(), dh);
}

}  // namespace
}  // namespace memtrain::gpu_testing
