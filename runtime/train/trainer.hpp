#pragma once
// `memtrain train`: one training run of a validated Config, start to finish.
#include <functional>
#include <optional>
#include <ostream>
#include <string>

#include "runtime/config/config.hpp"
#include "runtime/config/device_target.hpp"
#include "runtime/train/progress_line.hpp"
#include "runtime/train/resume.hpp"
#include "runtime/train/step_boundary.hpp"

namespace memtrain::train {

struct RunOptions {
  std::string run_dir;  // empty: runs/<config name>-<timestamp> (RunDirectory::default_path)
  // `train --dry-run`: the same loop on a simulated device (design.md, "Execution modes"):
  // the allocator hands out addresses of dry_run->allocator_capacity() bytes only, no math runs,
  // losses are not computed (null in metrics.jsonl), and the sgemm probe and fill-mask
  // predictions are skipped. The allocation trace equals the compute run's, event for event.
  std::optional<DeviceTarget> dry_run{};
  // memory.recompute: auto is decided by dry runs (runtime/plan/recompute_auto.hpp), and
  // runtime/plan sits above the trainer (it replays the trainer's steps), so the caller hands
  // the resolver in: given the config, the world size and the log, it returns the config with
  // memory.recompute* resolved. Unset and recompute auto: run_training throws ConfigError.
  std::function<Config(const Config&, int world_size, std::ostream& log)> resolve_recompute{};
  // `train --resume`: whether run_dir's checkpoints are resumed (resume.hpp). A dry run never
  // resumes (it has no values to load).
  ResumeMode resume = ResumeMode::automatic;
  // `train --profile-ops`: every op of the training steps after the first (the first one also
  // pays for first-touch page faults) is timed (Note [Profiling ops in the step]); rank 0
  // prints the step breakdown and writes run_dir/op_profile.json with its own ops. A run of
  // one step profiles that step.
  bool profile_ops = false;
  // `train --progress`: whether rank 0's progress line is rewritten in place (progress_line.hpp).
  ProgressMode progress = ProgressMode::automatic;
  // Called on every rank at every step boundary (step_boundary.hpp): before the first step and
  // after each step, the last one included. Where an elastic job changes its micro-batch size
  // or recompute setting and releases cached memory; tests read the parameters there.
  std::function<void(StepBoundary&)> at_step_boundary{};
  // memory.admission: wait needs the job's planned need before it allocates anything: the peak
  // reserved bytes of one rank of `world_size` for a config (runtime/plan/planned_need.hpp),
  // handed in for the reason resolve_recompute is. Unset with admission wait: ConfigError.
  std::function<std::size_t(const Config&, int world_size)> planned_peak_reserved{};
};

// Trains config.model on config.data for training.max_steps steps on every rank of the world
// communicator (mpirun: data parallel), and returns the process exit code: 0 when done,
// kInterruptedExitCode (130) after a SIGINT stopped it cleanly at the end of a step
// (Note [SIGINT stops after the current step]).
//
// Rank 0 prepares the data (others wait), then the model, optimizer and allocator are built;
// only then is the run directory created (config.yaml, run.json), so a bad corpus or option
// never leaves a half-written run behind. Rank 0 writes run_dir/metrics.jsonl (a training line
// every log_interval steps, an eval line at step 0, every eval_interval steps and at the end),
// prints the progress line, the fill-mask predictions (not with data.mock) and the summary, and
// writes run_dir/memory_snapshot.json (and memory_trace.json with memory.trace).
//
// With checkpoints in the run directory, training resumes from the newest valid one (per
// options.resume, find_resume_point): every rank loads it (load_checkpoint), metrics.jsonl
// loses its lines after the checkpoint's step and gains a resumed_from line, and the steps
// after it run exactly as an uninterrupted run's would.
//
// Throws ConfigError (exit 2) for what the world size or environment makes invalid
// (global_batch_size vs. ranks, a run directory written by another trajectory, a checkpoint
// the config may not resume, corpus errors) and
// RuntimeError / memtrain::OutOfMemory (exit 1) for failures while running.
int run_training(const Config& config, const RunOptions& options);

}  // namespace memtrain::train
