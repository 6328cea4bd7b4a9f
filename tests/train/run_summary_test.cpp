// The run's summary block (format_summary): a run that took no step has no train loss to show
// (it printed "nan"), and the health checks' detections are listed.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "runtime/train/run_summary.hpp"

namespace memtrain::train {
namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(RunSummary, ARunWithoutStepsShowsNoTrainLoss) {
  RunSummary s;
  s.steps_done = 0;
  s.max_steps = 10;
  s.final_train_loss = std::nan("");
  const std::string text = format_summary(s);
  EXPECT_TRUE(has(text, "  train loss       none (no step ran in this process)\n")) << text;
  EXPECT_FALSE(has(text, "nan")) << text;
  s.dry_run = true;
  EXPECT_TRUE(has(format_summary(s), "  train loss       none (a dry run computes none)\n"));
}

TEST(RunSummary, ShowsTheLastStepsLossAndTheHealthEvents) {
  RunSummary s;
  s.steps_done = 3;
  s.max_steps = 3;
  s.final_train_loss = 1.25;
  s.health_events = {"step 9: gradients were inf/NaN; rolled back to step 4"};
  const std::string text = format_summary(s);
  EXPECT_TRUE(has(text, "  train loss       1.2500 (last step)\n")) << text;
  EXPECT_TRUE(has(text, "  health           step 9: gradients were inf/NaN; rolled back to step 4\n")) << text;
}

}  // namespace
}  // namespace memtrain::train
