// TrainingRun's set-up and resume phases (Note [A trainer in phases]).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>
#include <unistd.h>

#include "comms/broadcast_string.hpp"
#include "comms/communicator.hpp"
#include "kernels/cpu/matmul_bf16.hpp"
#include "kernels/cpu/threads.hpp"
#include "runtime/checkpoint/fault_injection.hpp"
#include "runtime/config/config_hash.hpp"
#include "runtime/config/config_loader.hpp"
#include "runtime/config/model_options_from_config.hpp"
#include "runtime/config/resume_compatibility.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/train/checkpoint_loader.hpp"
#include "runtime/train/rank_agreement.hpp"
#include "runtime/train/root_only.hpp"
#include "runtime/train/run_directory_lock.hpp"
#include "runtime/train/training_run.hpp"

namespace memtrain::train {
namespace {

double seconds_since(TrainingRun::Clock::time_point t0) {
  return std::chrono::duration<double>(TrainingRun::Clock::now() - t0).count();
}

// training.num_threads, or 0 = this node's cores shared evenly by its ranks.
int compute_threads(int configured, const comms::Communicator& comm) {
  if (configured > 0) return configured;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, comm.local_size()));
}

// Note [A job is its run directory] (memory/shared_ledger.hpp): every rank takes rank 0's
// absolute --run-dir as the job's key. Without --run-dir the directory is named later, on rank
// 0 (open_run_directory); rank 0's pid and host stand for it, which are as unique.
LedgerJob ledger_job_of(const std::string& run_dir, const std::string& config_name, comms::Communicator& world) {
  LedgerJob job;
  if (world.rank() == 0) {
    if (!run_dir.empty()) {
      // One directory, one key, however it is spelled: ./runs/a/, a symbolic link to it.
      std::error_code ec;
      std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(run_dir), ec);
      if (ec) p = std::filesystem::absolute(run_dir).lexically_normal();
      job.key = p.string();
      while (job.key.size() > 1 && job.key.back() == '/') job.key.pop_back();
    } else {
      char host[256] = {};
      if (::gethostname(host, sizeof host - 1) != 0) host[0] = '?';
      job.key = "run of " + config_name + " by pid " + std::to_string(::getpid()) + "@" + host;
    }
  }
  job.key = world.size() > 1 ? comms::broadcast_string(world, job.key) : job.key;
  const std::string base = std::filesystem::path(job.key).filename().string();
  job.name = !run_dir.empty() && !base.empty() ? base : config_name;
  return job;
}

}  // namespace

TrainingRun::TrainingRun(const Config& config, const RunOptions& options)
    : config_(config), options_(options), resolved_(config) {}

TrainingRun::~TrainingRun() = default;

void TrainingRun::set_up() {
  // World = tp x dp (Note [Rank order of the grid]); what was "the world" before tensor
  // parallelism (batch split, counts, losses, evaluation, the gradient sum) is the dp group.
  auto world_group = comms::make_world_communicator();
  check_ranks_agree(*world_group, config_, options_);  // Note [Ranks agree before they start]
  check_tensor_parallel_world(config_, world_group->size());
  grid_.emplace(std::move(world_group), config_.parallel.tensor_model_parallel_size);
  world_ = &grid_->world();
  dp_ = &grid_->dp();
  root_ = world_->rank() == 0;
  if (root_) out_ = &std::cout;

  check_data_parallel_size(config_, grid_->dp_size());
  const auto& tc = config_.training;
  plan_ = BatchPlan::make(tc.global_batch_size, tc.micro_batch_size, grid_->dp_size(), grid_->dp_rank());
  threads_ = compute_threads(tc.num_threads, *world_);
  kernels::set_num_threads(threads_);

  data_ = load_training_data(config_, *world_, *out_);

  // memory.recompute: auto becomes the least recomputation that fits memory.budget.
  if (config_.memory.recompute == "auto") {
    if (!options_.resolve_recompute) {
      throw ConfigError("memory.recompute: auto needs a planner (RunOptions::resolve_recompute)");
    }
    resolved_ = options_.resolve_recompute(config_, world_->size(), *out_);
  }
  dry_ = options_.dry_run.has_value();
  faults_ = checkpoint::fault_plan_from_environment();
  checkpoint::check_fault_ranks(faults_, world_->size());
  if (dry_) target_ = options_.dry_run->for_world_size(world_->size());

  // The job's state, as the planner builds it (training_job.hpp). A GPU run's device, stream
  // and workspaces come first, so they outlive the allocator and every tensor (Note [What a
  // GPU run trains so far]).
  JobPlacement placement;
  if (dry_) placement.simulated = SimulatedDevice{target_.allocator_capacity(), "simulated " + target_.describe()};
  if (config_.memory.trace) placement.trace = &trace_;
  if (!dry_) placement.ledger_job = ledger_job_of(options_.run_dir, config_.name, *world_);
  // memory.admission: wait: the job waits for its planned need before it allocates anything.
  if (!dry_ && config_.memory.admission == "wait") enter_pool(placement.ledger_job);
  placement_ = placement;
  job_ = std::make_unique<TrainingJob>(resolved_, *grid_, placement_, *out_);
  if (seat_) apply_footprint(seat_->current());

  open_run_directory();
}

// Note [No half-written run directory]
// A run directory is the record of a run; one holding only config.yaml because the corpus
// had a bad byte or the allocator refused memory.policy would look like a run that died.
// It is therefore created only here, after everything that can reject the config for this
// world (batch split, data preparation, allocator options, model shapes) has passed.
// The default name has a one-second resolution: a second run started in the same second
// gets "-2" (and so on) rather than appending to, or being refused by, the first one's.
void TrainingRun::open_run_directory() {
  run_path_ = options_.run_dir;
  if (run_path_.empty() && options_.resume == ResumeMode::required && !dry_) {
    throw ConfigError(
        "--resume required needs --run-dir DIR, the run directory to resume (without one, "
        "every run gets a new timestamped directory, which has no checkpoints)");
  }
  if (run_path_.empty()) {
    const std::string base = RunDirectory::default_path(config_.name, std::chrono::system_clock::now());
    run_path_ = base;
    for (int n = 2; std::filesystem::exists(run_path_); ++n) run_path_ = base + "-" + std::to_string(n);
  }
  run_on_root(*world_, "creating the run directory", [&] {
    // Note [One job per run directory]: an existing run directory is locked before its
    // checkpoints are read; a new one when RunDirectory::open creates it.
    std::optional<RunDirectoryLock> lock;
    std::error_code ec;
    const bool seen_new = !std::filesystem::exists(run_path_, ec);
    if (RunDirectory::is_lockable(run_path_)) lock = RunDirectoryLock::acquire(run_path_);
    // Before the run directory is opened: a refused resume names the keys that differ, which
    // says more than the run directory's hash mismatch would.
    if (!dry_) resume_ = find_resume_point(run_path_, options_.resume, config_, std::cerr);
    // A dry run logs null losses and its own snapshot: into a directory that holds a run it
    // doubled every logged step and replaced the real memory snapshot.
    if (dry_ && std::filesystem::exists(std::filesystem::path(run_path_) / "run.json")) {
      throw ConfigError("--dry-run: run directory " + run_path_ +
                        " already holds a run (run.json); expected a new directory, or no --run-dir");
    }
    if (resume_.resume) {
      check_checkpoint_layout(resume_.checkpoint, config_, grid_->tp_size(), grid_->dp_size(), data_.data_key);
    }
    // Note [What a resume may change]: the directory belongs to a trajectory.
    run_dir_ = RunDirectory::open(run_path_, trajectory_hash(config_), canonical_yaml(config_), config_.name,
                                  config_.path, world_->size(), std::move(lock), seen_new);
    // A resume drops the logged steps after its checkpoint; starting over in a directory that
    // has logged steps (no checkpoint, none valid, a supervisor's relaunch before the first
    // one) drops them all: the run logs them again, and no step may appear twice. A compute
    // run is deterministic, so what is dropped is what the new run writes.
    if (!dry_ && (resume_.resume || run_dir_->reused())) {
      const MetricsTruncation truncation =
          truncate_metrics_after(run_dir_->file("metrics.jsonl"), resume_.resume ? resume_.step : -1);
      if (!resume_.resume && truncation.dropped_lines > 0) {
        std::cerr << "memtrain: run directory " << run_path_ << ": starting from step 0; the "
                  << truncation.dropped_lines << " lines of an earlier start in metrics.jsonl are replaced\n";
      }
    }
    metrics_.emplace(run_dir_->file("metrics.jsonl"));
    if (resume_.resume) {
      metrics_->write_resumed(resume_.step, resume_.checkpoint, resume_.data_parallel_size, grid_->dp_size());
    }
  });
}

// Every rank loads its tensor-parallel rank's files (Note [A checkpoint needs no RNG state
// and no data cursor]: nothing else is needed to continue the trajectory).
void TrainingRun::resume() {
  std::int64_t header[2] = {resume_.resume ? 1 : 0, resume_.step};
  world_->broadcast(header, sizeof header, 0);
  resume_.resume = header[0] != 0;
  resume_.step = header[1];
  resume_.checkpoint = comms::broadcast_string(*world_, resume_.checkpoint);
  step_ = resume_.step;
  last_consistent_step_ = resume_.step;
  last_unskipped_step_ = resume_.step;
  last_eval_step_ = resume_.step;
  if (!resume_.resume) return;
  if (resume_.pool) pool_before_ = *resume_.pool;
  const auto t0 = Clock::now();
  run_where(*world_, true, "loading checkpoint " + resume_.checkpoint, "another rank", [&] {
    load_checkpoint(resume_.checkpoint, *grid_, job_->model.parameters(), *job_->optimizer, job_->scaler,
                    job_->gradient_sync.compressor());
  });
  char line[64];
  std::snprintf(line, sizeof line, " in %.2f s\n", seconds_since(t0));
  *out_ << "memtrain: resumed from checkpoint " << resume_.checkpoint << " (step " << resume_.step << ")" << line
        << std::flush;
  if (resume_.step >= config_.training.max_steps) {
    *out_ << "memtrain: the checkpoint's step " << resume_.step
          << " is at or past training.max_steps = " << config_.training.max_steps
          << ": no steps to train (raise training.max_steps to continue)\n"
          << std::flush;
  }
}

// Rank 0 settles the path (it alone read the checkpoint's meta.json) and broadcasts it with
// the speeds it measured, so every rank's model takes the same one.
void TrainingRun::choose_bf16_gemm() {
  Bf16GemmInputs in;
  in.bf16_on_cpu = config_.precision.dtype == "bf16" && config_.device == "cpu";
  in.configured = config_.precision.bf16_gemm;
  in.dot_products = kernels::bf16_gemm_native();
  in.dry_run = dry_;
  in.resuming = resume_.resume;
  in.recorded = resume_.bf16_gemm;
  // basis, native, native FLOP/s, fp32 FLOP/s, forced (-1 none, 0 fp32, 1 native)
  double decided[5] = {0, 0, 0, 0, -1};
  run_on_root(*world_, "choosing the bf16 GEMM path", [&] {
    const Bf16GemmPlan plan = plan_bf16_gemm(in);
    bool native = plan.native;
    if (plan.basis == Bf16GemmBasis::measurement) {
      const auto forced = forced_bf16_gemm_preference();
      const auto tp = tensor_parallel(resolved_, &job_->tp_group);
      const Bf16GemmSpeeds speeds = measure_bf16_gemm_paths(
          step_forward_gemms(resolved_, grid_->tp_size(), tp.padded_vocab_size(config_.model.vocab_size)));
      native = prefers_native(speeds, forced);
      decided[2] = speeds.native_flops;
      decided[3] = speeds.fp32_flops;
      decided[4] = forced ? (*forced ? 1 : 0) : -1;
    }
    decided[0] = static_cast<double>(plan.basis);
    decided[1] = native ? 1 : 0;
  });
  world_->broadcast(decided, sizeof decided, 0);
  bf16_gemm_.basis = static_cast<Bf16GemmBasis>(static_cast<int>(decided[0]));
  bf16_gemm_.native = decided[1] != 0;
  if (bf16_gemm_.basis == Bf16GemmBasis::measurement) {
    bf16_gemm_.speeds = Bf16GemmSpeeds{decided[2], decided[3]};
    if (decided[4] >= 0) bf16_gemm_.forced = decided[4] > 0;
  }
  if (bf16_gemm_.basis == Bf16GemmBasis::config && !resume_.bf16_gemm.empty() &&
      resume_.bf16_gemm != bf16_gemm_.recorded_path()) {
    bf16_gemm_.overridden = resume_.bf16_gemm;  // rank 0's, for its header
  }
  if (bf16_gemm_.basis != Bf16GemmBasis::not_applicable) job_->model.set_native_bf16_gemm(bf16_gemm_.native);
}

}  // namespace memtrain::train
