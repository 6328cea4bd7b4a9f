#include "runtime/train/lr_schedule.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "runtime/core/errors.hpp"

namespace memtrain::train {
namespace {

// Values from the closed forms of the schedules (Hugging Face get_*_schedule_with_warmup with a
// floor), computed by hand.
TEST(LrSchedule, WarmupRisesLinearlyToThePeak) {
  LrSchedule s{1e-3, 0.0, 10, 110, "cosine"};
  EXPECT_DOUBLE_EQ(s.at(1), 1e-4);
  EXPECT_DOUBLE_EQ(s.at(5), 5e-4);
  EXPECT_DOUBLE_EQ(s.at(10), 1e-3);
}

TEST(LrSchedule, LinearDecaysToMinLrAtMaxSteps) {
  LrSchedule s{1e-3, 1e-4, 10, 110, "linear"};
  EXPECT_DOUBLE_EQ(s.at(60), 1e-4 + 0.9e-3 * 0.5);  // halfway through decay
  EXPECT_DOUBLE_EQ(s.at(110), 1e-4);
}

TEST(LrSchedule, CosineIsHalfwayAtTheMiddleAndMinAtTheEnd) {
  LrSchedule s{1e-3, 1e-4, 0, 100, "cosine"};
  EXPECT_NEAR(s.at(50), (1e-3 + 1e-4) / 2, 1e-15);
  EXPECT_NEAR(s.at(25), 1e-4 + 0.9e-3 * 0.5 * (1 + std::cos(M_PI / 4)), 1e-15);
  EXPECT_NEAR(s.at(100), 1e-4, 1e-15);
}

TEST(LrSchedule, ConstantKeepsThePeakAfterWarmup) {
  LrSchedule s{2e-4, 0.0, 4, 100, "constant"};
  EXPECT_DOUBLE_EQ(s.at(2), 1e-4);
  EXPECT_DOUBLE_EQ(s.at(99), 2e-4);
}

TEST(LrSchedule, UnknownKindIsAConfigError) {
  LrSchedule s{1e-3, 0.0, 0, 10, "exponential"};
  EXPECT_THROW(s.at(1), ConfigError);
}

}  // namespace
}  // namespace memtrain::train
