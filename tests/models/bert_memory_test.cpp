// The model on the real memory stack (CachingAllocator over a host or simulated device): the
// allocator's per-tag statistics explain a step, and a dry run on a simulated device plans the
// same memory as the compute run (design.md, "Execution modes").
#include <gtest/gtest.h>

#include <memory>

#include "memory/caching_allocator.hpp"
#include "memory/host_resource.hpp"
#include "memory/simulated_resource.hpp"
#include "models/bert_for_masked_lm.hpp"
#include "runtime/core/tags.hpp"
#include "tests/models/bert_test_util.hpp"

namespace memtrain::models {
namespace {

BertConfig small_config() { return testing::small_bert_config(/*layers=*/2, /*dropout=*/0.1f, /*max_positions=*/32); }

memory::MemoryStats run_one_step(std::shared_ptr<memory::MemoryResource> upstream, bool dry_run,
                                 std::int64_t* num_parameters) {
  auto alloc = std::make_shared<memory::CachingAllocator>(std::move(upstream));
  core::Context ctx(alloc);
  ctx.set_dry_run(dry_run);
  BertForMaskedLM model(small_config(), ctx);
  model.init_parameters(5);
  *num_parameters = model.num_parameters();
  model.forward_backward(memtrain::testing::synthetic_batch(3, 24, 96, 0), 0.05f, 1, 1);
  return alloc->stats();
}

TEST(BertMemory, PerTagStatsShowActivationsFreedAndParametersKept) {
  std::int64_t n = 0;
  const auto s = run_one_step(std::make_shared<memory::HostResource>(), false, &n);
  const auto& t = core::tags();
  EXPECT_EQ(s.per_tag.at(t.activation).requested_bytes.current, 0);
  EXPECT_GT(s.per_tag.at(t.activation).requested_bytes.peak, 0);
  EXPECT_EQ(s.per_tag.at(t.temporary).requested_bytes.current, 0);
  EXPECT_EQ(s.per_tag.at(t.parameter).requested_bytes.current, 4 * n);
  EXPECT_EQ(s.per_tag.at(t.gradient).requested_bytes.current, 4 * n);
}

TEST(BertMemory, DryRunOnASimulatedDevicePlansTheSameMemoryAsTheComputeRun) {
  std::int64_t n = 0;
  const auto real = run_one_step(std::make_shared<memory::HostResource>(), false, &n);
  const auto dry =
      run_one_step(std::make_shared<memory::SimulatedResource>(std::size_t{1} << 30, "simulated 1 GiB"), true, &n);
  EXPECT_EQ(real.allocated_bytes.peak, dry.allocated_bytes.peak);
  EXPECT_EQ(real.allocated_bytes.allocated, dry.allocated_bytes.allocated);
  EXPECT_EQ(real.reserved_bytes.peak, dry.reserved_bytes.peak);
  EXPECT_EQ(real.per_tag.at(core::tags().activation).requested_bytes.peak,
            dry.per_tag.at(core::tags().activation).requested_bytes.peak);
}

}  // namespace
}  // namespace memtrain::models
