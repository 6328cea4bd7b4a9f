#include "kernels/cpu/lr_schedule.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

namespace memtrain::kernels {
namespace {

constexpr double kLr = 1e-3, kMin = 1e-5;

TEST(LearningRate, WarmupRisesLinearlyFromZero) {
  for (const char* s : {"cosine", "linear", "constant"}) {
    EXPECT_EQ(learning_rate(0, 100, 10, kLr, kMin, s), 0.0) << s;
    EXPECT_DOUBLE_EQ(learning_rate(1, 100, 10, kLr, kMin, s), kLr / 10) << s;
    EXPECT_DOUBLE_EQ(learning_rate(5, 100, 10, kLr, kMin, s), kLr / 2) << s;
    EXPECT_DOUBLE_EQ(learning_rate(10, 100, 10, kLr, kMin, s), kLr) << s;
  }
}

// Cosine: min + (lr - min) (1 + cos(pi r)) / 2 with r = (step - warmup) / (max - warmup):
// halfway (r = 1/2) it is the midpoint, at r = 1/4 it is min + (lr - min)(1 + 1/sqrt 2)/2.
TEST(LearningRate, CosineDecayFollowsClosedForm) {
  EXPECT_DOUBLE_EQ(learning_rate(55, 100, 10, kLr, kMin, "cosine"), (kLr + kMin) / 2);
  EXPECT_NEAR(learning_rate(32, 98, 10, kLr, kMin, "cosine"),  // r = 22 / 88 = 1/4
              kMin + (kLr - kMin) * (1 + 1 / std::numbers::sqrt2) / 2, 1e-18);
  EXPECT_DOUBLE_EQ(learning_rate(100, 100, 10, kLr, kMin, "cosine"), kMin);
  EXPECT_DOUBLE_EQ(learning_rate(250, 100, 10, kLr, kMin, "cosine"), kMin);
}

TEST(LearningRate, LinearDecayFollowsClosedForm) {
  EXPECT_DOUBLE_EQ(learning_rate(55, 100, 10, kLr, kMin, "linear"), (kLr + kMin) / 2);
  EXPECT_DOUBLE_EQ(learning_rate(28, 100, 10, kLr, kMin, "linear"), kMin + (kLr - kMin) * 0.8);
  EXPECT_DOUBLE_EQ(learning_rate(100, 100, 10, kLr, kMin, "linear"), kMin);
}

TEST(LearningRate, ConstantHoldsAfterWarmupAndNoWarmupStartsAtLr) {
  EXPECT_DOUBLE_EQ(learning_rate(77, 100, 10, kLr, kMin, "constant"), kLr);
  EXPECT_DOUBLE_EQ(learning_rate(500, 100, 10, kLr, kMin, "constant"), kLr);
  EXPECT_DOUBLE_EQ(learning_rate(0, 100, 0, kLr, kMin, "cosine"), kLr);
  EXPECT_DOUBLE_EQ(learning_rate(1, 100, 0, kLr, kMin, "linear"), kLr - (kLr - kMin) / 100);
}

TEST(LearningRate, RejectsUnknownScheduleAndBadArguments) {
  try {
    learning_rate(1, 10, 1, kLr, kMin, "exponential");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("expected cosine, linear or constant"), std::string::npos);
  }
  EXPECT_THROW(learning_rate(-1, 10, 1, kLr, kMin, "cosine"), std::invalid_argument);
  EXPECT_THROW(learning_rate(1, 10, 1, kMin, kLr, "cosine"), std::invalid_argument);
}

}  // namespace
}  // namespace memtrain::kernels
