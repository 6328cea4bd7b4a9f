// Every CUDA op of a training step gives the same bits when run again on the same inputs: the
// property bitwise recompute and resume need on a GPU (issue 14). The kernels sum in fixed
// orders without atomics (Note [Deterministic column sums]); cuBLASLt is asked for its
// heuristic's first algorithm with a fixed workspace, so it picks the same one each time.
#include <gtest/gtest.h>

#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/cross_entropy.hpp"
#include "kernels/cuda/embedding.hpp"
#include "kernels/cuda/flash_attention.hpp"
#include "kernels/cuda/gelu.hpp"
#include "kernels/cuda/layernorm.hpp"
#include "kernels/cuda/linear.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/kernels/test_util.hpp"

namespace memtrain::gpu_testing {
namespace {

using bf16 = __nv_bfloat16;

class Determinism : public GpuTest {
 protected:
  // Runs `op` twice on fresh copies of the accumulating outputs and compares every output's
  // bytes.
  template <class Op>
  void expect_repeats(const char* what, std::vector<DeviceBuffer<bf16>*> outs, Op op) {
    std::vector<std::vector<bf16>> start, first;
    for (auto* o : outs) start.push_back(o->download());
    op();
    for (auto* o : outs) first.push_back(o->download());
    for (std::size_t i = 0; i < outs.size(); ++i) outs[i]->upload(start[i]);
    op();
    for (std::size_t i = 0; i < outs.size(); ++i) {
      const auto again = outs[i]->download();
      ASSERT_EQ(std::memcmp(again.data(), first[i].data(), again.size() * sizeof(bf16)), 0)
          << what << ": output " << i << " differs between two runs";
    }
  }
};

std::vector<bf16> random_bf16(std::size_t n, unsigned seed) {
  return to_storage<bf16>(kernels::testing::random_normal<float>(n, seed));
}

TEST_F(Determinism, EveryBf16OpOfALayerRepeatsBitForBit) {
  const int B = 4, T = 128, C = 768, NH = 12, FF = 3072, N = B * T;
  const kernels::RngKey key{3, 4, 5, 6, 0};
  DeviceBuffer<bf16> x(random_bf16(std::size_t(N) * C, 1)), w(random_bf16(std::size_t(FF) * C, 2)),
      bias(random_bf16(FF, 3)), h(std::size_t(N) * FF), dh(random_bf16(std::size_t(N) * FF, 4)),
      dx(random_bf16(std::size_t(N) * C, 5)), dw(random_bf16(std::size_t(FF) * C, 6)), db(random_bf16(FF, 7));
  expect_repeats("linear", {&h, &dx, &dw, &db}, [&] {
    kernels::gpu::linear_forward<bf16>(ctx, h.get(), x.get(), w.get(), bias.get(), N, C, FF);
    kernels::gpu::linear_backward<bf16>(ctx, dx.get(), dw.get(), db.get(), dh.get(), x.get(), w.get(), N, C, FF);
  });
  expect_repeats("bias_gelu", {&h, &dx, &db}, [&] {
    kernels::gpu::bias_gelu_backward<bf16>(ctx, h.get(), db.get(), dh.get(), dh.get(), bias.get(), N, FF);
  });
  DeviceBuffer<float> stats(2 * N);
  DeviceBuffer<bf16> y(std::size_t(N) * C), gamma(random_bf16(C, 8)), dgamma(random_bf16(C, 9)),
      dbeta(random_bf16(C, 10));
  expect_repeats("layernorm", {&y, &dx, &dgamma, &dbeta}, [&] {
    kernels::gpu::layernorm_forward<bf16>(ctx, y.get(), stats.get(), stats.get() + N, x.get(), gamma.get(), gamma.get(),
                                          N, C, 1e-12f);
    kernels::gpu::layernorm_backward<bf16>(ctx, dx.get(), dgamma.get(), dbeta.get(), y.get(), x.get(), gamma.get(),
                                           stats.get(), stats.get() + N, N, C);
  });
  const std::size_t np = std::size_t(B) * NH * T * T;
  DeviceBuffer<bf16> probs(np), scratch(np), out(std::size_t(N) * C), dq(random_bf16(std::size_t(N) * C, 11)),
      dk(random_bf16(std::size_t(N) * C, 12)), dv(random_bf16(std::size_t(N) * C, 13));
  expect_repeats("attention", {&out, &probs, &dq, &dk, &dv}, [&] {
    kernels::gpu::attention_forward<bf16>(ctx, out.get(), probs.get(), x.get(), dx.get(), y.get(), nullptr, B, T, C, NH,
                                          0.1f, key, 0);
    kernels::gpu::attention_backward<bf16>(ctx, dq.get(), dk.get(), dv.get(), scratch.get(), y.get(), probs.get(),
                                           x.get(), dx.get(), y.get(), B, T, C, NH, 0.1f, key, 0);
  });
  DeviceBuffer<float> lse(std::size_t(B) * NH * T);
  expect_repeats("flash_attention", {&out, &dq, &dk, &dv}, [&] {
    kernels::gpu::flash_attention_forward<bf16>(ctx, out.get(), lse.get(), x.get(), dx.get(), y.get(), nullptr, B, T, C,
                                                NH, 0.1f, key, 0);
    kernels::gpu::flash_attention_backward<bf16>(ctx, dq.get(), dk.get(), dv.get(), y.get(), out.get(), lse.get(),
                                                 x.get(), dx.get(), y.get(), nullptr, B, T, C, NH, 0.1f, key, 0);
  });
}

TEST_F(Determinism, LossAndEmbeddingGradientsRepeatBitForBit) {
  const int M = 300, V = 30522, B = 4, T = 128, C = 256;
  DeviceBuffer<bf16> logits(random_bf16(std::size_t(M) * V, 21)), dlogits(std::size_t(M) * V);
  std::vector<std::int32_t> targets(M), ids(std::size_t(B) * T);
  for (int i = 0; i < M; ++i) targets[i] = (i * 7919) % V;
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>((i * 31) % 7);  // repeated rows
  DeviceBuffer<std::int32_t> gtargets(targets), gids(ids);
  std::int64_t correct = 0;
  const double loss = kernels::gpu::softmax_cross_entropy_forward_backward<bf16>(ctx, dlogits.get(), logits.get(),
                                                                                 gtargets.get(), M, V, 1e-3f, &correct);
  const auto d1 = dlogits.download();
  EXPECT_EQ(kernels::gpu::softmax_cross_entropy_forward_backward<bf16>(ctx, dlogits.get(), logits.get(), gtargets.get(),
                                                                       M, V, 1e-3f, &correct),
            loss);
  const auto d2 = dlogits.download();
  EXPECT_EQ(std::memcmp(d1.data(), d2.data(), d1.size() * 2), 0);

  const auto dout = kernels::testing::random_normal<float>(std::size_t(B) * T * C, 22);
  DeviceBuffer<float> gdout(dout), dword(std::size_t(7) * C);
  std::vector<std::vector<float>> runs;
  for (int run = 0; run < 2; ++run) {
    MEMTRAIN_CUDA_CHECK(cudaMemsetAsync(dword.get(), 0, dword.size() * 4, ctx.stream));
    kernels::gpu::bert_embeddings_backward(ctx, dword.get(), nullptr, nullptr, gdout.get(), gids.get(), nullptr, B, T,
                                           C);
    runs.push_back(dword.download());
  }
  EXPECT_EQ(runs[0], runs[1]);
}

}  // namespace
}  // namespace memtrain::gpu_testing
