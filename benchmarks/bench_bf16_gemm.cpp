// bf16 GEMMs through oneDNN against sgemm through OpenBLAS (Note [bf16 GEMMs through oneDNN],
// issue 15) on the Linear shapes of a bench-bert step (hidden 768, FFN 3072, 1024 tokens, about
// 150 masked positions for the tied decoder over 30522 words): forward products
// out [N, OC] = inp [N, C] W [OC, C]^T, each side on its own operands (float for sgemm, bf16
// bit patterns for oneDNN). Counter: model FLOP/s (2 N C OC per product). Arguments: N, C, OC,
// threads. OpenBLAS follows OPENBLAS_CORETYPE, oneDNN ONEDNN_MAX_CPU_ISA; on a CPU where oneDNN
// runs no bf16 matmul the bf16 rows are skipped with the reason.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "benchmarks/bert_inputs.hpp"
#include "benchmarks/bert_linear_shapes.hpp"
#include "kernels/cpu/half_convert.hpp"
#include "kernels/cpu/linear.hpp"
#include "kernels/cpu/linear_bf16.hpp"
#include "kernels/cpu/matmul_bf16.hpp"
#include "kernels/cpu/threads.hpp"

namespace memtrain::bench {
namespace {

void finish(benchmark::State& state, int N, int C, int OC) {
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * N * C * OC * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_LinearSgemm(benchmark::State& state) {
  const int N = static_cast<int>(state.range(0)), C = static_cast<int>(state.range(1)),
            OC = static_cast<int>(state.range(2));
  kernels::set_num_threads(static_cast<int>(state.range(3)));
  const auto x = bert_normal(std::size_t(N) * C, 1), w = bert_normal(std::size_t(OC) * C, 2);
  std::vector<float> y(std::size_t(N) * OC);
  for (auto _ : state) {
    kernels::linear_forward<float>(y.data(), x.data(), w.data(), nullptr, N, C, OC);
    benchmark::DoNotOptimize(y.data());
  }
  finish(state, N, C, OC);
}

void BM_LinearBf16OneDnn(benchmark::State& state) {
  const int N = static_cast<int>(state.range(0)), C = static_cast<int>(state.range(1)),
            OC = static_cast<int>(state.range(2));
  kernels::set_num_threads(static_cast<int>(state.range(3)));
  const auto x = to_half(bert_normal(std::size_t(N) * C, 1), kernels::HalfFormat::bf16);
  const auto w = to_half(bert_normal(std::size_t(OC) * C, 2), kernels::HalfFormat::bf16);
  std::vector<float> y(std::size_t(N) * OC);
  try {
    kernels::linear_forward_bf16(y.data(), x.data(), w.data(), nullptr, N, C, OC);  // makes the primitive
  } catch (const std::runtime_error& e) {
    state.SkipWithError(e.what());
    return;
  }
  state.SetLabel(kernels::bf16_gemm_description());
  for (auto _ : state) {
    kernels::linear_forward_bf16(y.data(), x.data(), w.data(), nullptr, N, C, OC);
    benchmark::DoNotOptimize(y.data());
  }
  finish(state, N, C, OC);
}

BENCHMARK(BM_LinearSgemm)->Apply(bert_linear_shapes);
BENCHMARK(BM_LinearBf16OneDnn)->Apply(bert_linear_shapes);

}  // namespace
}  // namespace memtrain::bench

BENCHMARK_MAIN();
