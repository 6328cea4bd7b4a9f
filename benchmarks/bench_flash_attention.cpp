// Attention kernels (issue 5, flash attention): one forward + backward pass of the standard
// kernel (attention_forward/backward, [B, NH, T, T] probabilities and scratch) against the
// tiled one (flash_attention_forward/backward, per-thread tiles and [B, NH, T] lse), BERT-Base
// shapes: B = 8, C = 768, NH = 12, T = 128 and 512, dropout 0.1.
// Counters: tokens/s (items_per_second, B * T per pass) and the extra memory each kernel needs
// beyond q, k, v, out and their gradients (extra_MiB): probabilities + scratch for the standard
// kernel, lse + workspace for flash. The time ratio flash / standard is the cost of
// recomputing the probabilities in the backward pass and of the per-tile GEMMs.
// Run with OPENBLAS_CORETYPE set as `memtrain` sets it for itself (Note [OpenBLAS core
// detection], runtime/cli/process_environment.cpp), e.g. OPENBLAS_CORETYPE=SkylakeX: without it
// OpenBLAS uses its SSE3 kernels on these machines. A single memtrain process leaves
// OMP_WAIT_POLICY unset (Note [When OpenMP threads may spin]), so leave it unset here too.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <random>
#include <vector>

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/flash_attention.hpp"

namespace memtrain::bench {
namespace {

using kernels::RngKey;

constexpr int B = 8, C = 768, NH = 12;
constexpr float kDropout = 0.1f;

struct Inputs {
  explicit Inputs(int T)
      : n(static_cast<std::size_t>(B) * T * C),
        q(n),
        k(n),
        v(n),
        dout(n),
        out(n),
        dq(n),
        dk(n),
        dv(n),
        mask(static_cast<std::size_t>(B) * T, 1.0f) {
    std::mt19937_64 gen(1);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (auto* x : {&q, &k, &v, &dout})
      for (auto& e : *x) e = dist(gen);
    for (int t = T - T / 4; t < T; ++t) mask[static_cast<std::size_t>(B - 1) * T + t] = 0.0f;
  }
  std::size_t n;
  std::vector<float> q, k, v, dout, out, dq, dk, dv, mask;  // [B, T, C]; mask [B, T]
};

constexpr double kMiB = 1024.0 * 1024.0;

void BM_AttentionStandard(benchmark::State& state) {
  const int T = static_cast<int>(state.range(0));
  Inputs in(T);
  const std::size_t tt = static_cast<std::size_t>(B) * NH * T * T;
  std::vector<float> probs(tt), scratch(tt);  // [B, NH, T, T] each
  const RngKey key{.seed = 1};
  for (auto _ : state) {
    kernels::attention_forward(in.out.data(), probs.data(), in.q.data(), in.k.data(), in.v.data(), in.mask.data(), B, T,
                               C, NH, kDropout, key, 0);
    kernels::attention_backward(in.dq.data(), in.dk.data(), in.dv.data(), scratch.data(), in.dout.data(), probs.data(),
                                in.q.data(), in.k.data(), in.v.data(), B, T, C, NH, kDropout, key, 0);
    benchmark::DoNotOptimize(in.dq.data());
  }
  state.SetItemsProcessed(state.iterations() * B * T);
  state.counters["extra_MiB"] = 2.0 * tt * sizeof(float) / kMiB;
}

void BM_AttentionFlash(benchmark::State& state) {
  const int T = static_cast<int>(state.range(0));
  Inputs in(T);
  std::vector<float> lse(static_cast<std::size_t>(B) * NH * T);  // [B, NH, T]
  std::vector<float> ws(kernels::flash_attention_workspace_elements(T, C, NH));
  const RngKey key{.seed = 1};
  for (auto _ : state) {
    kernels::flash_attention_forward(in.out.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(), in.mask.data(),
                                     B, T, C, NH, kDropout, key, 0, ws.data());
    kernels::flash_attention_backward(in.dq.data(), in.dk.data(), in.dv.data(), in.dout.data(), in.out.data(),
                                      lse.data(), in.q.data(), in.k.data(), in.v.data(), in.mask.data(), B, T, C, NH,
                                      kDropout, key, 0, ws.data());
    benchmark::DoNotOptimize(in.dq.data());
  }
  state.SetItemsProcessed(state.iterations() * B * T);
  state.counters["extra_MiB"] = static_cast<double>(lse.size() + ws.size()) * sizeof(float) / kMiB;
}

BENCHMARK(BM_AttentionStandard)->Arg(128)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AttentionFlash)->Arg(128)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace memtrain::bench

BENCHMARK_MAIN();
