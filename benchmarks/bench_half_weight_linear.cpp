// Linear layers with 16-bit weights (Note [16-bit weights a block at a time], issue 15) against
// the fp32 linear on the same shapes: a bench-bert step's QKV/attention output, FFN up, FFN
// down and tied decoder, forward (out = inp W^T) and backward (dW = dout^T inp and
// dinp += dout W). fp32 rows read float weights; f16 rows read f16 bit patterns through
// linear_forward_half_weight / linear_backward_half_weight. Counter: model FLOP/s (2 N C OC per
// product). Arguments: N, C, OC, threads.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "benchmarks/bert_inputs.hpp"
#include "benchmarks/bert_linear_shapes.hpp"
#include "kernels/cpu/half_convert.hpp"
#include "kernels/cpu/linear.hpp"
#include "kernels/cpu/linear_half_weight.hpp"
#include "kernels/cpu/threads.hpp"

namespace memtrain::bench {
namespace {

using kernels::HalfFormat;

struct Shape {
  int N, C, OC;
  explicit Shape(const benchmark::State& s)
      : N(static_cast<int>(s.range(0))), C(static_cast<int>(s.range(1))), OC(static_cast<int>(s.range(2))) {
    kernels::set_num_threads(static_cast<int>(s.range(3)));
  }
};

void finish(benchmark::State& state, const Shape& s, int products) {
  state.counters["FLOP/s"] = benchmark::Counter(
      2.0 * products * s.N * s.C * s.OC * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_ForwardF32(benchmark::State& state) {
  const Shape s(state);
  const auto x = bert_normal(std::size_t(s.N) * s.C, 1), w = bert_normal(std::size_t(s.OC) * s.C, 2);
  std::vector<float> y(std::size_t(s.N) * s.OC);
  for (auto _ : state) {
    kernels::linear_forward<float>(y.data(), x.data(), w.data(), nullptr, s.N, s.C, s.OC);
    benchmark::DoNotOptimize(y.data());
  }
  finish(state, s, 1);
}

void BM_ForwardF16Weight(benchmark::State& state) {
  const Shape s(state);
  const auto x = bert_normal(std::size_t(s.N) * s.C, 1);
  const auto w = to_half(bert_normal(std::size_t(s.OC) * s.C, 2), HalfFormat::f16);
  std::vector<float> y(std::size_t(s.N) * s.OC), scratch(kernels::linear_half_weight_scratch_elements(s.OC, s.C));
  for (auto _ : state) {
    kernels::linear_forward_half_weight(y.data(), x.data(), w.data(), nullptr, s.N, s.C, s.OC, HalfFormat::f16,
                                        scratch.data());
    benchmark::DoNotOptimize(y.data());
  }
  finish(state, s, 1);
}

void BM_BackwardF32(benchmark::State& state) {
  const Shape s(state);
  const auto x = bert_normal(std::size_t(s.N) * s.C, 1), w = bert_normal(std::size_t(s.OC) * s.C, 2),
             dy = bert_normal(std::size_t(s.N) * s.OC, 3);
  std::vector<float> dx(std::size_t(s.N) * s.C), dw(std::size_t(s.OC) * s.C);
  for (auto _ : state) {
    kernels::linear_backward<float>(dx.data(), dw.data(), nullptr, dy.data(), x.data(), w.data(), s.N, s.C, s.OC);
    benchmark::DoNotOptimize(dx.data());
  }
  finish(state, s, 2);
}

void BM_BackwardF16Weight(benchmark::State& state) {
  const Shape s(state);
  const auto x = bert_normal(std::size_t(s.N) * s.C, 1), dy = bert_normal(std::size_t(s.N) * s.OC, 3);
  const auto w = to_half(bert_normal(std::size_t(s.OC) * s.C, 2), HalfFormat::f16);
  std::vector<float> dx(std::size_t(s.N) * s.C), scratch(kernels::linear_half_weight_scratch_elements(s.OC, s.C));
  std::vector<std::uint16_t> dw(std::size_t(s.OC) * s.C);
  for (auto _ : state) {
    kernels::linear_backward_half_weight(dx.data(), dw.data(), false, nullptr, dy.data(), x.data(), w.data(), s.N, s.C,
                                         s.OC, HalfFormat::f16, scratch.data());
    benchmark::DoNotOptimize(dx.data());
  }
  finish(state, s, 2);
}

BENCHMARK(BM_ForwardF32)->Apply(bert_linear_shapes);
BENCHMARK(BM_ForwardF16Weight)->Apply(bert_linear_shapes);
BENCHMARK(BM_BackwardF32)->Apply(bert_linear_shapes);
BENCHMARK(BM_BackwardF16Weight)->Apply(bert_linear_shapes);

}  // namespace
}  // namespace memtrain::bench

BENCHMARK_MAIN();
