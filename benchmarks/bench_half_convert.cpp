// 16-bit conversions (issue 5, mixed precision): float <-> f16 through F16C and through the
// portable scalar path, float <-> bf16, and the overflow check, on the parameter count of one
// BERT-Base layer (about 7.1 M elements), the size the master-weight copy runs at per layer.
// Counters: elements/s (items_per_second) and bytes/s read + written (bytes_per_second).
// Arguments: threads (kernels::set_num_threads).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "benchmarks/bert_inputs.hpp"
#include "kernels/cpu/half_convert.hpp"
#include "kernels/cpu/threads.hpp"

namespace memtrain::bench {
namespace {

using kernels::HalfFormat;

constexpr std::int64_t kN = 7'087'872;  // BERT-Base layer: 12 C^2 + 13 C with C = 768

std::vector<float> inputs() { return bert_normal(kN, 1); }

void finish(benchmark::State& state, std::int64_t bytes_per_element) {
  state.SetItemsProcessed(state.iterations() * kN);
  state.SetBytesProcessed(state.iterations() * kN * bytes_per_element);
}

void BM_FloatToHalf(benchmark::State& state, HalfFormat f) {
  kernels::set_num_threads(static_cast<int>(state.range(0)));
  const auto x = inputs();
  std::vector<std::uint16_t> h(kN);
  for (auto _ : state) {
    kernels::convert_float_to_half(h.data(), x.data(), kN, f);
    benchmark::DoNotOptimize(h.data());
  }
  finish(state, 6);
}

void BM_HalfToFloat(benchmark::State& state, HalfFormat f) {
  kernels::set_num_threads(static_cast<int>(state.range(0)));
  std::vector<std::uint16_t> h(kN);
  kernels::convert_float_to_half(h.data(), inputs().data(), kN, f);
  std::vector<float> x(kN);
  for (auto _ : state) {
    kernels::convert_half_to_float(x.data(), h.data(), kN, f);
    benchmark::DoNotOptimize(x.data());
  }
  finish(state, 6);
}

// The portable f16 conversion the F16C path replaces (one thread).
void BM_FloatToF16Scalar(benchmark::State& state) {
  const auto x = inputs();
  std::vector<std::uint16_t> h(kN);
  for (auto _ : state) {
    kernels::detail::convert_float_to_half_scalar(h.data(), x.data(), kN, HalfFormat::f16);
    benchmark::DoNotOptimize(h.data());
  }
  finish(state, 6);
}

void BM_AllFiniteFloat(benchmark::State& state) {
  kernels::set_num_threads(static_cast<int>(state.range(0)));
  const auto x = inputs();
  for (auto _ : state) benchmark::DoNotOptimize(kernels::all_finite(x.data(), kN));
  finish(state, 4);
}

BENCHMARK_CAPTURE(BM_FloatToHalf, f16, HalfFormat::f16)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK_CAPTURE(BM_FloatToHalf, bf16, HalfFormat::bf16)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK_CAPTURE(BM_HalfToFloat, f16, HalfFormat::f16)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK_CAPTURE(BM_HalfToFloat, bf16, HalfFormat::bf16)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_FloatToF16Scalar)->UseRealTime();
BENCHMARK(BM_AllFiniteFloat)->Arg(1)->Arg(2)->UseRealTime();

}  // namespace
}  // namespace memtrain::bench

BENCHMARK_MAIN();
