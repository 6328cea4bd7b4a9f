// `memtrain plan` and `memtrain train` build a job's state with one builder (TrainingJob;
// issue 43): the planner's job is the trainer's, down to settings that allocate nothing (the
// loss scaler's health limit, which the planner's own copy of the object graph once dropped),
// and the planner's dry run allocates what the trainer's dry run allocates, event for event.
// The references are the trainer's builder and the trainer's own trace (memory.trace's CSV).
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "comms/process_grid.hpp"
#include "memory/replay.hpp"
#include "runtime/config/device_target.hpp"
#include "runtime/plan/plan_step.hpp"
#include "runtime/train/trainer.hpp"
#include "runtime/train/training_job.hpp"
#include "tests/train/temp_dir.hpp"
#include "tests/train/tiny_config.hpp"

namespace memtrain::train {
namespace {

// The drift issue 43 found: health.max_consecutive_skips is the scaler's limit in the trainer
// and was not in the planner's scaler.
TEST(PlanBuildsTheTrainersJob, LossScalerCarriesTheHealthLimit) {
  Config c = testing::tiny_mock_config();
  c.precision.dtype = "fp16";
  c.training.max_steps = 1;
  c.health.max_consecutive_skips = 3;
  ASSERT_NE(c.precision.loss_scale.max_skipped_steps_at_min, 3);  // the default is not the answer
  const StepMeasurement m = measure_step(c, 1);
  EXPECT_EQ(m.loss_scale.max_skipped_steps_at_min, 3);

  auto grid = comms::ProcessGrid::simulated(1, 1);
  std::ostringstream log;
  TrainingJob job(c, grid, JobPlacement{SimulatedDevice{std::size_t{1} << 40, "simulated test device"}, nullptr, {}},
                  log);
  EXPECT_EQ(job.scaler.config().max_skipped_steps_at_min, m.loss_scale.max_skipped_steps_at_min);
  EXPECT_EQ(job.scaler.config().initial_scale, m.loss_scale.initial_scale);
  EXPECT_TRUE(job.scaler.enabled());
}

// Allocation ids differ between two allocators; what must match is each event's kind, size,
// tag and stream, and which earlier allocation each free returns.
struct Event {
  bool alloc;
  std::size_t bytes;
  std::string tag;
  memory::StreamId stream;
  std::size_t freed;  // index of the allocation a free returns; 0 for an alloc
  bool operator==(const Event&) const = default;
};

std::vector<Event> normalised(const std::vector<memory::TraceOp>& ops) {
  std::map<std::string, std::size_t> index_of;
  std::map<std::size_t, std::size_t> bytes_of;
  std::vector<Event> out;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const auto& op = ops[i];
    if (op.kind == memory::TraceOp::Kind::alloc) {
      index_of[op.id] = i;
      bytes_of[i] = op.bytes;
      out.push_back({true, op.bytes, op.tag, op.stream, 0});
    } else {
      const std::size_t a = index_of.at(op.id);
      out.push_back({false, bytes_of.at(a), "", op.stream, a});
    }
  }
  return out;
}

class PlanTraceEqualsTrainDryRun : public ::testing::TestWithParam<const char*> {};

// A run of at most kMaxMeasuredSteps steps on mock data: the plan's trace begins with the
// whole of the trainer's (the trainer writes its CSV before its job is destroyed; the plan's
// trace goes on with the destruction's frees).
TEST_P(PlanTraceEqualsTrainDryRun, EventForEvent) {
  testing::TempDir tmp;
  Config c = testing::tiny_mock_config();
  c.precision.dtype = GetParam();
  c.model.hidden_dropout_prob = 0.1f;
  c.training.max_steps = 3;
  c.training.eval_interval = 2;
  c.training.eval_steps = 2;
  c.memory.trace = true;
  c.checkpoint.async = true;  // its staging buffer is part of the job
  c.checkpoint.interval = 2;

  RunOptions options{tmp.sub("dry")};
  options.dry_run = parse_device_target("80GiB");
  ASSERT_EQ(run_training(c, options), 0);
  const auto trained = normalised(memory::read_trace_file(tmp.sub("dry/memory_trace.csv")));

  const auto planned = normalised(measure_step(c, 1).trace);
  ASSERT_GT(trained.size(), 100u);
  ASSERT_GE(planned.size(), trained.size());
  for (std::size_t i = 0; i < trained.size(); ++i) {
    ASSERT_EQ(planned[i], trained[i]) << "event " << i << " of " << trained.size();
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, PlanTraceEqualsTrainDryRun, ::testing::Values("fp32", "fp16", "bf16"));

}  // namespace
}  // namespace memtrain::train
