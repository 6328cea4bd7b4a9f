// Activation planner benchmarks (issue 48, sec. 6: `memtrain replay --policy planned` was
// super-linear in the blocks live at once):
//  - BM_PlanArena/pattern/live: memory::plan_arena on n blocks live at once, in the two
//    patterns of scripts/bench/live_blocks_trace.py: stack (n allocs, then n frees) and
//    interleaved (n live, n rounds of free-one-alloc-one, then the frees). Counters: work
//    (ArenaPlan::work), work / (n log2 n), arena over the lower bound, layout (0 greedy by size,
//    1 best fit in time order).
//  - BM_GreedyBySizeOnly/pattern/live: the layout plan_arena used alone before issue 48, on the
//    same inputs (up to 10^4 live: its cost grows with the overlapping pairs, n^2 / 2 here).
//  - BM_PlanTransformerTrace/schedule: both layouts on the BERT-Large training trace of
//    bench_allocator (parameters and optimizer states live throughout): arena of plan_arena,
//    of greedy by size alone, and the lower bound, in GiB.
// Run: build/benchmarks/bench_activation_planner (configured with -DMEMTRAIN_BUILD_BENCHMARKS=ON).
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "benchmarks/transformer_trace.hpp"
#include "memory/activation_planner.hpp"
#include "memory/greedy_by_size_layout.hpp"

namespace memtrain::bench {
namespace {

using memory::TensorLifetime;
const char* const kScheduleNames[] = {"cycled", "increasing", "random"};
constexpr std::size_t kAlign = 512;  // replay's alignment
constexpr double GiB = 1024.0 * 1024.0 * 1024.0;

// The lifetimes of scripts/bench/live_blocks_trace.py's traces (sizes 512 B to 32 KiB).
std::vector<TensorLifetime> live_blocks(int pattern, std::size_t n) {
  std::mt19937_64 rng(1);
  std::vector<TensorLifetime> t;
  std::vector<std::size_t> live;
  std::size_t time = 0;
  auto alloc = [&] {
    live.push_back(t.size());
    t.push_back({kAlign * (1 + rng() % 64), time++, 0});
  };
  for (std::size_t i = 0; i < n; ++i) alloc();
  if (pattern == 1) {
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t k = rng() % live.size();
      std::swap(live[k], live.back());
      t[live.back()].last_use = time++;
      live.pop_back();
      alloc();
    }
  }
  for (const std::size_t k : live) t[k].last_use = time++;
  return t;
}

// Lifetimes of a generated trace: alloc to free, or to the end when never freed.
std::vector<TensorLifetime> lifetimes_of(const GeneratedTrace& g) {
  std::vector<TensorLifetime> t;
  std::vector<std::size_t> open(g.num_slots);
  for (std::size_t i = 0; i < g.compact.size(); ++i) {
    const CompactOp& op = g.compact[i];
    if (op.alloc) {
      open[op.slot] = t.size();
      t.push_back({op.bytes, i, g.compact.size()});
    } else {
      t[open[op.slot]].last_use = i;
    }
  }
  return t;
}

void BM_PlanArena(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(1));
  const auto t = live_blocks(static_cast<int>(state.range(0)), n);
  memory::ArenaPlan plan;
  for (auto _ : state) {
    plan = memory::plan_arena(t, kAlign);
    benchmark::DoNotOptimize(plan.arena_bytes);
  }
  state.counters["work"] = static_cast<double>(plan.work);
  state.counters["work_per_nlogn"] = static_cast<double>(plan.work) / (t.size() * std::log2(t.size()));
  state.counters["arena_over_bound"] = static_cast<double>(plan.arena_bytes) / plan.lower_bound_bytes;
  state.counters["layout"] = static_cast<double>(plan.layout);
}

void BM_GreedyBySizeOnly(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(1));
  const auto t = live_blocks(static_cast<int>(state.range(0)), n);
  std::vector<std::size_t> sizes, offsets;
  for (const auto& x : t) sizes.push_back((x.bytes + kAlign - 1) / kAlign * kAlign);
  std::size_t work = 0, arena = 0;
  for (auto _ : state) {
    work = 0;
    arena = memory::detail::greedy_by_size_layout(t, sizes, offsets, work);
    benchmark::DoNotOptimize(arena);
  }
  state.counters["work"] = static_cast<double>(work);
  state.counters["work_per_nlogn"] = static_cast<double>(work) / (t.size() * std::log2(t.size()));
  state.counters["arena_over_bound"] =
      static_cast<double>(arena) / memory::live_set_lower_bound(t, kAlign).lower_bound_bytes;
}

void BM_PlanTransformerTrace(benchmark::State& state) {
  const auto t = lifetimes_of(make_transformer_trace(transformer_config(static_cast<SeqSchedule>(state.range(0)))));
  memory::ArenaPlan plan;
  for (auto _ : state) {
    plan = memory::plan_arena(t, kAlign);
    benchmark::DoNotOptimize(plan.arena_bytes);
  }
  std::vector<std::size_t> sizes, offsets;
  for (const auto& x : t) sizes.push_back((x.bytes + kAlign - 1) / kAlign * kAlign);
  std::size_t work = 0;
  const std::size_t greedy = memory::detail::greedy_by_size_layout(t, sizes, offsets, work);
  state.counters["tensors"] = static_cast<double>(t.size());
  state.counters["pairs_per_tensor"] =
      static_cast<double>(memory::detail::overlapping_pairs(t, sizes, work)) / static_cast<double>(t.size());
  state.counters["arena_GiB"] = plan.arena_bytes / GiB;
  state.counters["greedy_by_size_GiB"] = greedy / GiB;
  state.counters["lower_bound_GiB"] = plan.lower_bound_bytes / GiB;
  state.counters["layout"] = static_cast<double>(plan.layout);
  state.SetLabel(kScheduleNames[state.range(0)]);
}

BENCHMARK(BM_PlanArena)
    ->ArgsProduct({{0, 1}, {10000, 30000, 100000, 1000000}})
    ->ArgNames({"pattern", "live"})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GreedyBySizeOnly)
    ->ArgsProduct({{0, 1}, {1000, 3000, 10000}})
    ->ArgNames({"pattern", "live"})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PlanTransformerTrace)->DenseRange(0, 2)->ArgNames({"schedule"})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace memtrain::bench

BENCHMARK_MAIN();
