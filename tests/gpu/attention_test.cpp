// kernels::gpu::attention_forward / backward against the CPU twin (kernels/cpu/attention.hpp)
// run in double precision: probabilities, output and the three input gradients, with padding
// masks, dropout (the same masks), tensor-parallel head offsets and odd shapes.
#include "kernels/cuda/attention.hpp"

#include "kernels/cpu/attention.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/kernels/test_util.hpp"

namespace memtrain::gpu_testing {
namespace {

template <class T>
class AttentionTest : public GpuTest {};
using StorageTypes = ::testing::Types<float, __nv_bfloat16, __half>;
TYPED_TEST_SUITE(AttentionTest, StorageTypes);

struct Case {
  int B, T, C, NH, first_head;
  float p;
};

TYPED_TEST(AttentionTest, MatchesTheCpuTwin) {
  using T = TypeParam;
  using kernels::testing::random_normal;
  const kernels::RngKey key{99, 5, 1, 0, 0};
  unsigned seed = 51;
  for (const Case& c : {Case{2, 128, 768, 12, 0, 0.1f}, Case{3, 33, 40, 5, 2, 0.1f}, Case{2, 64, 64, 4, 0, 0.0f},
                        Case{1, 1, 4, 2, 1, 0.5f}}) {
    const std::size_t n = std::size_t(c.B) * c.T * c.C, np = std::size_t(c.B) * c.NH * c.T * c.T;
    const auto q = rounded<T>(random_normal<float>(n, seed++)), k = rounded<T>(random_normal<float>(n, seed++)),
               v = rounded<T>(random_normal<float>(n, seed++)), dout = rounded<T>(random_normal<float>(n, seed++));
    const auto dq0 = rounded<T>(random_normal<float>(n, seed++)), dk0 = rounded<T>(random_normal<float>(n, seed++)),
               dv0 = rounded<T>(random_normal<float>(n, seed++));
    // Padding: sample b attends to its first T - b keys (at least one).
    std::vector<float> mask(std::size_t(c.B) * c.T, 1.0f);
    for (int b = 0; b < c.B; ++b) {
      for (int t = std::max(1, c.T - b); t < c.T; ++t) mask[std::size_t(b) * c.T + t] = 0.0f;
    }
    const std::uint64_t first_sample = 7;
    const auto qd = widen(q), kd = widen(k), vd = widen(v), doutd = widen(dout), maskd = widen(mask);
    std::vector<double> out_ref(n), probs_ref(np), scratch_ref(np), dq_ref = widen(dq0), dk_ref = widen(dk0),
                                                                    dv_ref = widen(dv0);
    kernels::attention_forward(out_ref.data(), probs_ref.data(), qd.data(), kd.data(), vd.data(), maskd.data(), c.B,
                               c.T, c.C, c.NH, c.p, key, first_sample, c.first_head);
    kernels::attention_backward(dq_ref.data(), dk_ref.data(), dv_ref.data(), scratch_ref.data(), doutd.data(),
                                probs_ref.data(), qd.data(), kd.data(), vd.data(), c.B, c.T, c.C, c.NH, c.p, key,
                                first_sample, c.first_head);

    DeviceBuffer<T> gq(to_storage<T>(q)), gk(to_storage<T>(k)), gv(to_storage<T>(v)), gdout(to_storage<T>(dout));
    DeviceBuffer<T> gmask(to_storage<T>(mask)), gout(n), gprobs(np), gscratch(np);
    DeviceBuffer<T> gdq(to_storage<T>(dq0)), gdk(to_storage<T>(dk0)), gdv(to_storage<T>(dv0));
    gout.poison();
    gprobs.poison();
    gscratch.poison();
    kernels::gpu::attention_forward<T>(this->ctx, gout.get(), gprobs.get(), gq.get(), gk.get(), gv.get(), gmask.get(),
                                       c.B, c.T, c.C, c.NH, c.p, key, first_sample, c.first_head);
    kernels::gpu::attention_backward<T>(this->ctx, gdq.get(), gdk.get(), gdv.get(), gscratch.get(), gdout.get(),
                                        gprobs.get(), gq.get(), gk.get(), gv.get(), c.B, c.T, c.C, c.NH, c.p, key,
                                        first_sample, c.first_head);
    const std::string where = std::string(type_name<T>()) + " B=" + std::to_string(c.B) + " T=" + std::to_string(c.T) +
                              " C=" + std::to_string(c.C) + " NH=" + std::to_string(c.NH) + " p=" + std::to_string(c.p);
    EXPECT_TRUE(close(to_floats(gprobs.download()), probs_ref, tolerance<T>())) << "probs, " << where;
    EXPECT_TRUE(close(to_floats(gout.download()), out_ref, tolerance<T>())) << "out, " << where;
    EXPECT_TRUE(close(to_floats(gdq.download()), dq_ref, tolerance<T>())) << "dq, " << where;
    EXPECT_TRUE(close(to_floats(gdk.download()), dk_ref, tolerance<T>())) << "dk, " << where;
    EXPECT_TRUE(close(to_floats(gdv.download()), dv_ref, tolerance<T>())) << "dv, " << where;
  }
}

TYPED_TEST(AttentionTest, TooLittleScratchForDropoutIsRefused) {
  using T = TypeParam;
  kernels::gpu::KernelContext small = this->ctx;
  small.scratch_bytes = kernels::gpu::attention_scratch_bytes(2, 16, 2, 0.1f, sizeof(T)) - 1;
  DeviceBuffer<T> x(2 * 16 * 8), probs(2 * 2 * 16 * 16);
  EXPECT_THROW(kernels::gpu::attention_forward<T>(small, x.get(), probs.get(), x.get(), x.get(), x.get(), nullptr, 2,
                                                  16, 8, 2, 0.1f, {}, 0),
               std::invalid_argument);
}

}  // namespace
}  // namespace memtrain::gpu_testing
