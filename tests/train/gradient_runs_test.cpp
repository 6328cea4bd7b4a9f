// contiguous_gradient_runs (runtime/train/gradient_reads.hpp), which a GPU's norm and finiteness
// check read instead of one parameter at a time: every element of every gradient is in exactly
// one run, gradients packed into a bucket merge, and the norm over the runs is the per-parameter
// norm within rounding. Checked on the tiny test BERT's bucketed gradients, in fp32 and bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numeric>

#include "models/bert_for_masked_lm.hpp"
#include "runtime/config/model_options_from_config.hpp"
#include "runtime/train/gradient_reads.hpp"
#include "runtime/train/model_memory.hpp"
#include "tests/kernels/test_util.hpp"
#include "tests/train/tiny_config.hpp"

namespace memtrain::train {
namespace {

void expect_runs_cover_the_gradients(const char* dtype) {
  Config c = testing::tiny_mock_config();
  c.precision.dtype = dtype;
  core::Context ctx(make_model_allocator(c.memory));
  models::BertForMaskedLM model(c.model, ctx, model_options(c));
  // Gradients with distinct values, so a missed or doubled element changes the sum.
  std::int64_t total = 0;
  std::uint64_t seed = 1;
  for (auto& p : model.parameters()) {
    const auto v = kernels::testing::random_normal<float>(static_cast<std::size_t>(p.grad.numel()), seed++);
    models::store_f32(p.grad, v.data(), p.grad.numel());
    total += p.grad.numel();
  }
  const auto runs = detail::contiguous_gradient_runs(model.parameters());
  std::int64_t covered = 0;
  for (const auto& r : runs) covered += r.n;
  EXPECT_EQ(covered, total);
  EXPECT_GE(runs.size(), 1u);
  EXPECT_LE(runs.size(), model.gradient_buckets().size()) << "a bucket's gradients did not merge";
  EXPECT_LT(runs.size(), model.parameters().size());

  const kernels::OpContext cpu{};
  double per_parameter = 0.0, over_runs = 0.0;
  for (const auto& p : model.parameters()) per_parameter += detail::sum_of_squares(cpu, p.grad, 0, p.grad.numel());
  for (const auto& r : runs) over_runs += detail::sum_of_squares(cpu, r);
  EXPECT_NEAR(over_runs, per_parameter, 1e-12 * per_parameter) << dtype;
}

TEST(ContiguousGradientRuns, CoverEveryGradientOnceAndMergeEachBucketFp32) { expect_runs_cover_the_gradients("fp32"); }
TEST(ContiguousGradientRuns, CoverEveryGradientOnceAndMergeEachBucketBf16) { expect_runs_cover_the_gradients("bf16"); }

}  // namespace
}  // namespace memtrain::train
