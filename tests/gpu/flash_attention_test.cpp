// kernels::gpu::flash_attention_forward / backward against the CPU twin
// (kernels/cpu/flash_attention.hpp) in double precision: output, log-sum-exp and the three input
// gradients, with padding (a fully padded sample too), dropout, head offsets and odd shapes.
#include "kernels/cuda/flash_attention.hpp"

#include <limits>

#include "kernels/cpu/flash_attention.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/kernels/test_util.hpp"

namespace memtrain::gpu_testing {
namespace {

template <class T>
class FlashAttentionTest : public GpuTest {};
using StorageTypes = ::testing::Types<float, __nv_bfloat16, __half>;
TYPED_TEST_SUITE(FlashAttentionTest, StorageTypes);

struct Case {
  int B, T, C, NH, first_head;
  float p;
};

TYPED_TEST(FlashAttentionTest, MatchesTheCpuTwin) {
  using T = TypeParam;
  using kernels::testing::random_normal;
  const kernels::RngKey key{7, 3, 2, 1, 0};
  unsigned seed = 81;
  for (const Case& c : {Case{2, 128, 768, 12, 0, 0.1f}, Case{3, 33, 40, 5, 2, 0.1f}, Case{2, 100, 64, 4, 0, 0.0f},
                        Case{1, 1, 4, 2, 1, 0.5f}, Case{2, 70, 256, 2, 0, 0.2f}}) {
    const std::size_t n = std::size_t(c.B) * c.T * c.C, nl = std::size_t(c.B) * c.NH * c.T;
    const auto q = rounded<T>(random_normal<float>(n, seed++)), k = rounded<T>(random_normal<float>(n, seed++)),
               v = rounded<T>(random_normal<float>(n, seed++)), dout = rounded<T>(random_normal<float>(n, seed++));
    const auto dq0 = rounded<T>(random_normal<float>(n, seed++)), dk0 = rounded<T>(random_normal<float>(n, seed++)),
               dv0 = rounded<T>(random_normal<float>(n, seed++));
    // Sample b attends to its first T - 3b keys; with B = 3 and T = 33 none is fully padded, so
    // the last sample of the T = 70 case is padded completely to check the zeros and -inf.
    std::vector<float> mask(std::size_t(c.B) * c.T, 1.0f);
    for (int b = 0; b < c.B; ++b) {
      for (int t = std::max(1, c.T - 3 * b); t < c.T; ++t) mask[std::size_t(b) * c.T + t] = 0.0f;
    }
    if (c.T == 70) std::fill(mask.end() - c.T, mask.end(), 0.0f);
    const std::uint64_t first_sample = 11;
    const auto qd = widen(q), kd = widen(k), vd = widen(v), doutd = widen(dout), maskd = widen(mask);
    std::vector<double> out_ref(n), lse_ref(nl), dq_ref = widen(dq0), dk_ref = widen(dk0), dv_ref = widen(dv0);
    std::vector<double> work(kernels::flash_attention_workspace_elements(c.T, c.C, c.NH));
    kernels::flash_attention_forward(out_ref.data(), lse_ref.data(), qd.data(), kd.data(), vd.data(), maskd.data(), c.B,
                                     c.T, c.C, c.NH, c.p, key, first_sample, work.data(), c.first_head);
    kernels::flash_attention_backward(dq_ref.data(), dk_ref.data(), dv_ref.data(), doutd.data(), out_ref.data(),
                                      lse_ref.data(), qd.data(), kd.data(), vd.data(), maskd.data(), c.B, c.T, c.C,
                                      c.NH, c.p, key, first_sample, work.data(), c.first_head);

    DeviceBuffer<T> gq(to_storage<T>(q)), gk(to_storage<T>(k)), gv(to_storage<T>(v)), gdout(to_storage<T>(dout));
    DeviceBuffer<T> gmask(to_storage<T>(mask)), gout(n);
    DeviceBuffer<T> gdq(to_storage<T>(dq0)), gdk(to_storage<T>(dk0)), gdv(to_storage<T>(dv0));
    DeviceBuffer<float> glse(nl);
    gout.poison();
    glse.poison();
    kernels::gpu::flash_attention_forward<T>(this->ctx, gout.get(), glse.get(), gq.get(), gk.get(), gv.get(),
                                             gmask.get(), c.B, c.T, c.C, c.NH, c.p, key, first_sample, c.first_head);
    kernels::gpu::flash_attention_backward<T>(this->ctx, gdq.get(), gdk.get(), gdv.get(), gdout.get(), gout.get(),
                                              glse.get(), gq.get(), gk.get(), gv.get(), gmask.get(), c.B, c.T, c.C,
                                              c.NH, c.p, key, first_sample, c.first_head);
    const std::string where = std::string(type_name<T>()) + " B=" + std::to_string(c.B) + " T=" + std::to_string(c.T) +
                              " C=" + std::to_string(c.C) + " NH=" + std::to_string(c.NH) + " p=" + std::to_string(c.p);
    EXPECT_TRUE(close(to_floats(gout.download()), out_ref, tolerance<T>())) << "out, " << where;
    // lse: -inf exactly where the CPU has it, close elsewhere (inputs are rounded alike, the
    // scores are fp32 sums: 1e-5 relative whatever T).
    const auto lse = glse.download();
    std::vector<float> lse_live;
    std::vector<double> lse_ref_live;
    for (std::size_t x = 0; x < nl; ++x) {
      if (std::isinf(lse_ref[x])) {
        ASSERT_TRUE(std::isinf(lse[x]) && lse[x] < 0) << "lse[" << x << "] = " << lse[x] << ", " << where;
      } else {
        lse_live.push_back(lse[x]);
        lse_ref_live.push_back(lse_ref[x]);
      }
    }
    EXPECT_TRUE(close(lse_live, lse_ref_live, 1e-5)) << "lse, " << where;
    EXPECT_TRUE(close(to_floats(gdq.download()), dq_ref, tolerance<T>())) << "dq, " << where;
    EXPECT_TRUE(close(to_floats(gdk.download()), dk_ref, tolerance<T>())) << "dk, " << where;
    EXPECT_TRUE(close(to_floats(gdv.download()), dv_ref, tolerance<T>())) << "dv, " << where;
  }
}

TYPED_TEST(FlashAttentionTest, AHeadLargerThanTheKernelsTakeIsRefused) {
  using T = TypeParam;
  DeviceBuffer<T> x(2 * 512);
  DeviceBuffer<float> lse(2);
  EXPECT_THROW(kernels::gpu::flash_attention_forward<T>(this->ctx, x.get(), lse.get(), x.get(), x.get(), x.get(),
                                                        nullptr, 1, 2, 512, 2, 0.0f, {}, 0),
               std::invalid_argument);
}

}  // namespace
}  // namespace memtrain::gpu_testing
