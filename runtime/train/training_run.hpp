#pragma once
// One `memtrain train` run in explicit phases (run_training's implementation; trainer.hpp is
// the public entry): set-up, resume, the step loop, finish.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "comms/process_grid.hpp"
#include "memory/trace_recorder.hpp"
#include "runtime/checkpoint/durable_file.hpp"
#include "runtime/checkpoint/fault_injection.hpp"
#include "runtime/config/config.hpp"
#include "runtime/config/device_target.hpp"
#include "runtime/core/op_profile.hpp"
#include "runtime/train/async_checkpointer.hpp"
#include "runtime/train/batch_plan.hpp"
#include "runtime/train/bf16_gemm_choice.hpp"
#include "runtime/train/ecc_monitor.hpp"
#include "runtime/train/evaluator.hpp"
#include "runtime/train/metrics_writer.hpp"
#include "runtime/train/pool_device.hpp"
#include "runtime/train/pool_record.hpp"
#include "runtime/train/pool_seat.hpp"
#include "runtime/train/progress_line.hpp"
#include "runtime/train/resume.hpp"
#include "runtime/train/run_directory.hpp"
#include "runtime/train/stall_watchdog.hpp"
#include "runtime/train/step_boundary.hpp"
#include "runtime/train/stop_signal.hpp"
#include "runtime/train/train_step.hpp"
#include "runtime/train/trainer.hpp"
#include "runtime/train/training_data.hpp"
#include "runtime/train/training_job.hpp"
#include "runtime/train/training_log.hpp"

namespace memtrain::train {

// Note [A trainer in phases]
// A run is four phases, each a member function whose inputs are the members set by the phases
// before it:
//   set_up      the process grid, the data, memory.recompute: auto, the job's state
//               (TrainingJob, the planner's builder) and then the run directory;
//   resume      the newest valid checkpoint, loaded on every rank; then the path of the bf16
//               GEMMs, which may follow the checkpoint (choose_bf16_gemm);
//   run_steps   the step loop: a step, its log line, the stop vote, evaluations, the health
//               checks and rollbacks, checkpoints, and between two steps the step boundary
//               (step_boundary.hpp), where what costs memory may change;
//   finish      the last evaluation, fill-mask predictions, the memory outputs and the summary.
// State the loop carries from step to step (the current step, the stop signal, rollbacks, the
// profile's sums) lives in members, so each part of the loop is a function of its own.
class TrainingRun final : public StepBoundary {
 public:
  using Clock = std::chrono::steady_clock;

  // Nothing runs until run(). config and options must outlive the object.
  TrainingRun(const Config& config, const RunOptions& options);
  ~TrainingRun() override;

  // All phases; run_training's contract (trainer.hpp): the exit code, or a thrown ConfigError,
  // RuntimeError or OutOfMemory.
  int run();

  // StepBoundary (step_boundary.hpp).
  std::int64_t steps_done() const override { return step_; }
  int micro_batch_size() const override { return plan_->micro_batch_size; }
  void set_micro_batch_size(int micro_batch_size) override;
  void set_recompute(models::Recompute recompute, models::RecomputeMethod method, int num_layers) override;
  std::size_t release_cached_memory() override;
  memory::MemoryStats memory_stats() const override { return job_->allocator->stats(); }
  void reset_peak_memory_stats() override { job_->allocator->reset_peak_stats(); }
  const std::vector<models::Parameter>& parameters() const override { return job_->model.parameters(); }

 private:
  // A stop signal while the job waited for memory before it started: nothing ran.
  struct StoppedWhileWaiting {
    int signal;
  };

  // Phases.
  void set_up();
  void open_run_directory();
  void resume();
  // precision.bf16_gemm settled on rank 0 (the checkpoint's record, or a measurement) and
  // taken by every rank's model: Note [bf16_gemm: auto measures the step's GEMMs].
  void choose_bf16_gemm();
  void print_header();
  void run_steps();
  int finish();

  // The memory pool (memory.admission: wait; training_run_pool.cpp): the seat, its wait before
  // the job is built, what the pool asks at a step boundary, and a preemption.
  void enter_pool(const LedgerJob& who);
  void apply_footprint(int footprint);
  void pool_step_boundary();
  void preempt();
  void write_pool_start_event();
  std::string pool_trajectory() const;
  std::string pool_record_json() const;  // run.json's "pool"
  // The pool's record of the run: the resumed checkpoint's, then this process's changes (Note [A
  // pool record travels with the checkpoints]).
  PoolRecord pool_record() const;

  // Parts of set-up.
  void start_checkpointing();
  void start_async_checkpoints();
  void start_watchdog();
  void measure_peaks();

  // Parts of the step loop.
  bool stop_requested();  // collective vote
  EvalResult evaluate_and_log(std::int64_t step, bool write = true);
  void save(std::int64_t at, bool final, bool trusted);
  void saved_line(std::int64_t at, const std::string& path, double seconds, const char* how);
  void rollback(const std::string& reason, std::int64_t max_step);
  std::string choose_rollback_target(std::int64_t max_step, std::int64_t& at);
  // Records a step row in the allocation trace (Note [Step boundaries in a trace],
  // memory/replay.hpp) when memory.trace is on: `step_` steps completed.
  void mark_step_in_trace();
  // One optimizer step (`step_` already advanced): false when it was rolled back.
  bool train_one_step();
  // The replica and ECC checks of health.consistency_interval: false when rolled back.
  bool check_health();
  // Trust (Note [A checkpoint is trusted once a health check has passed]).
  bool replica_checks() const { return config_.health.consistency_interval > 0 && !dry_; }
  // Checkpoints of steps <= this are trusted: every check since has passed.
  std::int64_t trust_bound() const;
  // A stop's checkpoint: its checks run now (finiteness, replicas). False when they failed and
  // the run rolled back.
  bool stop_checks_pass();
  // The checkpoint of this step, if due, with its trust; then earlier ones that became trusted.
  void save_if_due();
  void promote_trusted();
  // A detected fault: metrics.jsonl and the summary record it.
  void record_fault(const std::string& reason);
  // Rank 0 removes the checkpoints newer than `at` (they hold the fault's state).
  void remove_checkpoints_after(std::int64_t at);
  void write_summary();
  void write_out_of_memory_record();

  const Config& config_;
  const RunOptions& options_;
  const Clock::time_point start_ = Clock::now();
  StopSignal stop_;  // first: a SIGINT during set-up must not kill the process uncleanly

  // set_up
  std::optional<comms::ProcessGrid> grid_;
  comms::Communicator* world_ = nullptr;
  comms::Communicator* dp_ = nullptr;
  bool root_ = false;
  std::ostringstream discard_;
  std::ostream* out_ = &discard_;  // rank 0: std::cout
  std::optional<BatchPlan> plan_;
  int threads_ = 1;
  TrainingData data_;
  Config resolved_;  // memory.recompute resolved
  bool dry_ = false;
  checkpoint::FaultPlan faults_;
  DeviceTarget target_;
  memory::TraceRecorder trace_;     // before the job: it outlives the allocator's sink
  JobPlacement placement_;          // kept to rebuild the job after a preemption
  PoolDevice pool_device_;          // memory.admission: wait: the pool and what it holds beside the allocator
  std::unique_ptr<PoolSeat> seat_;  // memory.admission: wait
  WaitOutcome start_wait_;          // the wait before the job was built
  std::unique_ptr<TrainingJob> job_;
  core::OpProfile op_profile_;  // `train --profile-ops`: the context points to it during a step

  // open_run_directory, resume
  std::string run_path_;
  std::optional<RunDirectory> run_dir_;
  std::optional<MetricsWriter> metrics_;
  ResumePoint resume_;
  Bf16GemmChoice bf16_gemm_;

  // print_header, start_checkpointing
  double sgemm_flops_ = 0;
  double peak_flops_ = 0;
  std::string peak_description_;
  std::optional<Nvml> nvml_;
  std::optional<EccMonitor> ecc_;
  std::optional<ProgressLine> progress_;
  bool checkpointing_ = false;
  std::string checkpoints_root_;
  std::string canonical_;
  std::string hash_;
  std::optional<checkpoint::WriteBudget> budget_;
  std::optional<AsyncCheckpointer> async_checkpoints_;
  std::optional<TrainingLog> log_;
  std::unique_ptr<StallWatchdog> watchdog_;  // health.stall_timeout, several ranks only

  // run_steps
  std::int64_t step_ = 0;
  int stop_signal_ = 0;
  bool interrupted_ = false;
  EvalResult start_eval_;
  EvalResult end_eval_;
  std::int64_t last_eval_step_ = 0;
  double last_loss_ = 0;
  int rollbacks_ = 0;
  std::int64_t last_consistent_step_ = 0;  // a loaded checkpoint is presumed healthy
  std::int64_t last_unskipped_step_ = 0;   // the newest step that was not skipped (finite)
  std::vector<std::int64_t> untrusted_;    // steps of checkpoints written untrusted
  std::vector<std::string> health_events_;
  // The pool's changes (pool_seat.hpp), and a stop that came while the job waited after a
  // preemption (it then holds no memory and no job).
  int pool_shrinks_ = 0;
  int pool_grows_ = 0;
  int pool_preemptions_ = 0;
  double pool_wait_s_ = 0;
  PoolRecord pool_before_;  // the resumed checkpoint's record (rank 0)
  bool stopped_while_preempted_ = false;
  // MEMTRAIN_FAULT nan_grad / flip_param: each step's fault once per process.
  std::int64_t nan_injected_through_ = -1;
  std::int64_t flip_done_ = -1;
  // `--profile-ops`: steps timed, their wall time, this rank's share of their model FLOPs.
  std::int64_t profiled_steps_ = 0;
  double profiled_s_ = 0;
  double profiled_flops_ = 0;
};

}  // namespace memtrain::train
