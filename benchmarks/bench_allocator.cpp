// Allocator benchmarks (issue 3, "Speed"):
//  - BM_CachedAllocFree/<policy>/<bytes>: one allocate + deallocate on the cached path, against
//    BM_MallocFree/<bytes> (glibc). Target: median <= 100 ns for best_fit.
//  - BM_ReplayDirect/<policy>, BM_ReplayInterned/<policy>, BM_ReplayTrace/<policy>: replay
//    throughput of a transformer trace, in events/s (items_per_second). Direct drives the
//    allocator from a compact op list. Interned is memory::replay_interned_trace, what
//    `memtrain replay` runs once the file is parsed and interned: id checks and peak live bytes,
//    a fresh simulated device and allocator, the replay, the report. ReplayTrace adds
//    intern_trace (one hash lookup per row) to that. Target: >= 5 million events/s.
//  - BM_TransformerUtilization/<policy>: the same trace (BERT-Large shapes, sequence length
//    changing every step) on a fresh simulated 80 GiB device; counters utilization
//    (peak allocated / peak reserved), fragmentation at peak reserved, peaks in GiB, OOMs.
//    Target: utilization >= 0.95 for best_fit and vmm_stitch; pytorch reported beside them.
//    Three sequence-length schedules (cycled, increasing, random) on a roomy 80 GiB device and
//    on a tight 16 GiB one (peak live bytes are 13.5 GiB), where cached segments must be
//    released and the request retried.
// scripts/bench_allocator.sh runs them and prints a table.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "benchmarks/transformer_trace.hpp"
#include "memory/caching_allocator.hpp"
#include "memory/host_resource.hpp"
#include "memory/out_of_memory.hpp"
#include "memory/replay.hpp"
#include "memory/simulated_resource.hpp"
#include "memory/simulated_virtual_memory_resource.hpp"
#include "memory/stream_registry.hpp"
#include "memory/tag_registry.hpp"

namespace memtrain::bench {
namespace {

using memory::AllocatorOptions;
using memory::Block;
using memory::CachingAllocator;

constexpr std::size_t GiB = std::size_t{1} << 30;
const char* const kPolicies[] = {"no_cache", "pytorch", "best_fit", "vmm_stitch"};

// vmm_stitch needs the page model; the others run on plain resources. `real_memory` picks host
// memory for the alloc/free pair (so no_cache measures a real upstream), simulated otherwise.
std::unique_ptr<CachingAllocator> make_allocator(const std::string& policy, std::size_t capacity, bool real_memory,
                                                 memory::StreamRegistry* streams) {
  std::shared_ptr<memory::MemoryResource> device;
  if (policy == "vmm_stitch") {
    device = std::make_shared<memory::SimulatedVirtualMemoryResource>(capacity, "bench vmm");
  } else if (real_memory) {
    device = std::make_shared<memory::HostResource>();
  } else {
    device = std::make_shared<memory::SimulatedResource>(capacity, "bench");
  }
  AllocatorOptions opt;
  opt.policy = policy;
  auto a = std::make_unique<CachingAllocator>(device, opt);
  a->set_stream_registry(streams);
  return a;
}

void BM_CachedAllocFree(benchmark::State& state) {
  const std::string policy = kPolicies[state.range(0)];
  const auto bytes = static_cast<std::size_t>(state.range(1));
  memory::StreamRegistry streams;
  auto a = make_allocator(policy, 64 * GiB, /*real_memory=*/true, &streams);
  a->deallocate(a->allocate(bytes));  // warm: the block is now cached
  for (auto _ : state) {
    Block b = a->allocate(bytes);
    benchmark::DoNotOptimize(b.ptr);
    a->deallocate(b);
  }
  state.SetLabel(policy);
}

void BM_MallocFree(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    void* p = std::malloc(bytes);
    benchmark::DoNotOptimize(p);
    std::free(p);
  }
  state.SetLabel("glibc");
}

const GeneratedTrace& trace(SeqSchedule schedule = SeqSchedule::cycled) {
  static const GeneratedTrace traces[] = {make_transformer_trace(transformer_config(SeqSchedule::cycled)),
                                          make_transformer_trace(transformer_config(SeqSchedule::increasing)),
                                          make_transformer_trace(transformer_config(SeqSchedule::random))};
  return traces[static_cast<int>(schedule)];
}
const char* const kScheduleNames[] = {"cycled", "increasing", "random"};

void BM_ReplayDirect(benchmark::State& state) {
  const std::string policy = kPolicies[state.range(0)];
  const GeneratedTrace& t = trace();
  memory::TagId tags[5];
  for (int i = 0; i < 5; ++i) tags[i] = memory::tag_registry().register_tag(kTraceTags[i]);
  memory::StreamRegistry streams;
  auto a = make_allocator(policy, 80 * GiB, /*real_memory=*/false, &streams);
  std::vector<Block> live(t.num_slots);
  std::size_t ooms = 0;
  for (auto _ : state) {
    for (const CompactOp& op : t.compact) {
      if (op.alloc) {
        try {
          live[op.slot] = a->allocate(op.bytes, memory::kDefaultStream, tags[op.tag]);
        } catch (const OutOfMemory&) {
          live[op.slot] = Block{};
          ++ooms;
        }
      } else {
        a->deallocate(live[op.slot]);
      }
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * t.compact.size()));
  state.counters["events"] = static_cast<double>(t.compact.size());
  state.counters["ooms"] = static_cast<double>(ooms);
  state.SetLabel(policy);
}

void BM_ReplayInterned(benchmark::State& state) {
  const std::string policy = kPolicies[state.range(0)];
  const memory::InternedTrace interned = memory::intern_trace(trace().ops);
  memory::ReplayReport report;
  for (auto _ : state) {
    report = memory::replay_interned_trace(interned, policy, 80 * GiB, "transformer");
    benchmark::DoNotOptimize(report.events);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * interned.ops.size()));
  state.counters["events"] = static_cast<double>(report.events);
  state.SetLabel(policy);
}

void BM_ReplayTrace(benchmark::State& state) {
  const std::string policy = kPolicies[state.range(0)];
  const GeneratedTrace& t = trace();
  memory::ReplayReport report;
  for (auto _ : state) {
    report = memory::replay_trace(t.ops, policy, 80 * GiB, "transformer");
    benchmark::DoNotOptimize(report.events);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * t.ops.size()));
  state.counters["events"] = static_cast<double>(report.events);
  state.SetLabel(policy);
}

void BM_TransformerUtilization(benchmark::State& state) {
  const std::string policy = kPolicies[state.range(0)];
  const auto schedule = static_cast<SeqSchedule>(state.range(1));
  const std::size_t capacity = static_cast<std::size_t>(state.range(2)) * GiB;
  const GeneratedTrace& t = trace(schedule);
  memory::TagId tags[5];
  for (int i = 0; i < 5; ++i) tags[i] = memory::tag_registry().register_tag(kTraceTags[i]);
  memory::MemoryStats stats;
  std::size_t ooms = 0;
  for (auto _ : state) {
    memory::StreamRegistry streams;
    auto a = make_allocator(policy, capacity, /*real_memory=*/false, &streams);
    std::vector<Block> live(t.num_slots);
    for (const CompactOp& op : t.compact) {
      if (op.alloc) {
        try {
          live[op.slot] = a->allocate(op.bytes, memory::kDefaultStream, tags[op.tag]);
        } catch (const OutOfMemory&) {
          live[op.slot] = Block{};
          ++ooms;
        }
      } else {
        a->deallocate(live[op.slot]);
      }
    }
    stats = a->stats();
  }
  const double peak_alloc = static_cast<double>(stats.allocated_bytes.peak);
  const double peak_reserved = static_cast<double>(stats.reserved_bytes.peak);
  state.counters["utilization"] = peak_reserved > 0 ? peak_alloc / peak_reserved : 0.0;
  state.counters["live_utilization"] = peak_reserved > 0 ? static_cast<double>(t.peak_live_bytes) / peak_reserved : 0.0;
  state.counters["frag_at_peak"] = stats.fragmentation_at_peak_reserved;
  state.counters["peak_alloc_GiB"] = peak_alloc / GiB;
  state.counters["peak_reserved_GiB"] = peak_reserved / GiB;
  state.counters["peak_live_GiB"] = static_cast<double>(t.peak_live_bytes) / GiB;
  state.counters["ooms"] = static_cast<double>(ooms);
  state.counters["retries"] = static_cast<double>(stats.num_alloc_retries);
  state.counters["events"] = static_cast<double>(t.compact.size());
  state.SetLabel(policy + " " + kScheduleNames[state.range(1)]);
}

// Policy index 0..3 = no_cache, pytorch, best_fit, vmm_stitch.
BENCHMARK(BM_CachedAllocFree)->ArgsProduct({{0, 1, 2, 3}, {4096, 1 << 20}})->ArgNames({"policy", "bytes"});
BENCHMARK(BM_MallocFree)->Arg(4096)->Arg(1 << 20)->ArgNames({"bytes"});
BENCHMARK(BM_ReplayDirect)->DenseRange(0, 3)->ArgNames({"policy"})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReplayInterned)->DenseRange(0, 3)->ArgNames({"policy"})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReplayTrace)->DenseRange(0, 3)->ArgNames({"policy"})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TransformerUtilization)
    ->ArgsProduct({{1, 2, 3}, {0, 1, 2}, {80, 16}})
    ->ArgNames({"policy", "seq", "capacity_GiB"})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace
}  // namespace memtrain::bench

BENCHMARK_MAIN();
