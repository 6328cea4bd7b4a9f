#include "runtime/train/batch_plan.hpp"

#include <gtest/gtest.h>

#include <set>

#include "runtime/core/errors.hpp"

namespace memtrain::train {
namespace {

// Every split of a global batch of 8 must take samples [s*8, s*8 + 8) of the stream, each once.
TEST(BatchPlan, EverySplitCoversTheSameGlobalBatchOnce) {
  const int G = 8;
  for (int dp : {1, 2, 4}) {
    for (int micro : {1, 2, 4, 8}) {
      if (G % (micro * dp) != 0) continue;
      for (std::int64_t step : {0, 3}) {
        std::multiset<std::uint64_t> samples;
        for (int r = 0; r < dp; ++r) {
          const auto plan = BatchPlan::make(G, micro, dp, r);
          EXPECT_EQ(plan.accumulation_steps() * micro * dp, G);
          for (int a = 0; a < plan.accumulation_steps(); ++a) {
            for (int b = 0; b < micro; ++b) samples.insert(plan.first_sample(step, a) + b);
          }
        }
        std::multiset<std::uint64_t> expected;
        for (int i = 0; i < G; ++i) expected.insert(step * G + i);
        EXPECT_EQ(samples, expected) << "dp " << dp << " micro " << micro;
      }
    }
  }
}

TEST(BatchPlan, RankTakesItsContiguousSlice) {
  const auto plan = BatchPlan::make(16, 2, 4, 3);
  EXPECT_EQ(plan.first_sample(2, 0), 2u * 16 + 3 * 4);
  EXPECT_EQ(plan.first_sample(2, 1), 2u * 16 + 3 * 4 + 2);
}

TEST(BatchPlan, GlobalBatchNotAMultipleIsAConfigError) {
  EXPECT_THROW(BatchPlan::make(10, 4, 1, 0), ConfigError);
  EXPECT_THROW(BatchPlan::make(8, 4, 3, 0), ConfigError);
  EXPECT_THROW(BatchPlan::make(8, 0, 1, 0), ConfigError);
}

}  // namespace
}  // namespace memtrain::train
