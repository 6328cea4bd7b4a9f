// TrainingRun's step loop (Note [A trainer in phases]): a step, its log line, the stop vote,
// evaluations, health checks and rollbacks, checkpoints, and the step boundary.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "comms/broadcast_string.hpp"
#include "kernels/cpu/lr_schedule.hpp"
#include "runtime/checkpoint/checkpoint_store.hpp"
#include "runtime/checkpoint/checkpoint_trust.hpp"
#include "runtime/checkpoint/checkpoint_verify.hpp"
#include "runtime/config/config_hash.hpp"
#include "runtime/config/config_loader.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/train/checkpoint_loadable.hpp"
#include "runtime/train/checkpoint_loader.hpp"
#include "runtime/train/checkpoint_saver.hpp"
#include "runtime/train/health_check.hpp"
#include "runtime/train/root_only.hpp"
#include "runtime/train/training_run.hpp"

namespace memtrain::train {
namespace {

double seconds_since(TrainingRun::Clock::time_point t0) {
  return std::chrono::duration<double>(TrainingRun::Clock::now() - t0).count();
}

}  // namespace

// All ranks must agree to stop, or the others would wait in the next all-reduce forever.
// Every rank stops at the same step: the ranks vote on the stop signals after every step.
// Mixed signals (mpirun sent SIGTERM to one rank while a user sent another SIGUSR1) resolve
// to the most final: SIGTERM, then SIGUSR1, then SIGINT.
bool TrainingRun::stop_requested() {
  const int local = stop_.signal();
  std::int64_t votes[3] = {local == SIGTERM ? 1 : 0, local == SIGUSR1 ? 1 : 0, local == SIGINT ? 1 : 0};
  if (world_->size() > 1) world_->allreduce_sum(votes, 3);
  stop_signal_ = votes[0] > 0 ? SIGTERM : votes[1] > 0 ? SIGUSR1 : votes[2] > 0 ? SIGINT : 0;
  return stop_signal_ != 0;
}

// `write`: false for the evaluation at a resumed step that metrics.jsonl already has.
EvalResult TrainingRun::evaluate_and_log(std::int64_t step, bool write) {
  if (job_->ledger_agent) job_->ledger_agent->set_state(memory::JobState::evaluating);
  const int configured = config_.training.eval_micro_batch_size;
  int micro_batch = configured > 0 ? configured : plan_->micro_batch_size;
  std::int64_t batches = config_.training.eval_steps;
  const int eval_micro_batch = configured > 0 ? configured : config_.training.micro_batch_size;
  if (seat_) micro_batch = eval_micro_batch;
  if (seat_ && plan_->micro_batch_size < eval_micro_batch) {
    // An elastic job shrunk below it evaluates in its footprint, over the same validation
    // sequences: its micro-batch divides the evaluation's (elastic_footprints).
    const std::int64_t available =
        static_cast<std::int64_t>(data_.validation->num_sequences() / static_cast<std::uint64_t>(eval_micro_batch));
    batches = std::max<std::int64_t>(1, std::min<std::int64_t>(batches, available)) *
              (eval_micro_batch / plan_->micro_batch_size);
    micro_batch = plan_->micro_batch_size;
  }
  auto e = evaluate_model(job_->model, *data_.validation, *dp_, micro_batch, static_cast<int>(batches));
  if (dry_) e.loss = e.accuracy = e.perplexity = std::nan("");
  if (root_) {
    if (write) metrics_->write(EvalMetrics{step, e.loss, e.accuracy, e.perplexity});
    progress_->break_line();
    char line[160];
    std::snprintf(line, sizeof line, "eval step %lld | loss %.4f | accuracy %.2f %% | perplexity %.1f\n",
                  static_cast<long long>(step), e.loss, 100.0 * e.accuracy, e.perplexity);
    *out_ << line << std::flush;
  }
  last_eval_step_ = step;
  if (job_->ledger_agent) job_->ledger_agent->set_state(memory::JobState::training);
  if (watchdog_) watchdog_->progress(step_);
  return e;
}

void TrainingRun::saved_line(std::int64_t at, const std::string& path, double seconds, const char* how) {
  progress_->break_line();
  char line[96];
  std::snprintf(line, sizeof line, " (%.2f s%s)\n", seconds, how);
  *out_ << "memtrain: checkpoint of step " << at << " saved to " << path << line << std::flush;
}

// Checkpoints (checkpoint_saver.hpp): every checkpoint.interval steps, at the end, and when
// SIGTERM or SIGUSR1 (SIGINT with checkpoint.on_interrupt) stops the run. A dry run has no
// values to save.
void TrainingRun::start_checkpointing() {
  checkpointing_ = config_.checkpoint.interval > 0 && !dry_;
  if (checkpointing_) {
    // Rank 0 named the run directory; the other writers need the same path.
    checkpoints_root_ = comms::broadcast_string(*world_, root_ ? run_dir_->file("checkpoints") : std::string());
  }
  canonical_ = canonical_yaml(config_);
  hash_ = config_hash(config_);
  // MEMTRAIN_FAULT=kill_in_checkpoint counts over all of this process's checkpoints, so a
  // test can die inside the second one with the first one complete.
  budget_.emplace(faults_.kill_in_checkpoint ? checkpoint::WriteBudget(*faults_.kill_in_checkpoint)
                                             : checkpoint::WriteBudget());
  start_async_checkpoints();
}

// checkpoint.async: Note [An asynchronous checkpoint is committed by a vote]. Again after a
// preemption: the staging buffer is the rebuilt job's.
void TrainingRun::start_async_checkpoints() {
  if (checkpointing_ && config_.checkpoint.async) {
    async_checkpoints_.emplace(job_->checkpoint_staging, *grid_, checkpoints_root_, &*budget_,
                               [this](std::int64_t at, const std::string& path, double seconds) {
                                 saved_line(at, path, seconds, ", written in the background");
                               });
  }
}

// `final`: the run stops after it, so an asynchronous one is waited for.
void TrainingRun::save(std::int64_t at, bool final, bool trusted) {
  const StallWatchdog::Busy busy(watchdog_.get(), "checkpoint");
  if (job_->ledger_agent) job_->ledger_agent->set_state(memory::JobState::checkpointing);
  const CheckpointSource source{config_,
                                job_->model.parameters(),
                                *job_->optimizer,
                                job_->scaler,
                                canonical_,
                                hash_,
                                job_->gradient_sync.compressor(),
                                data_.data_key,
                                trusted,
                                bf16_gemm_.recorded_path(),
                                seat_ ? std::optional<PoolRecord>(pool_record()) : std::nullopt};
  if (async_checkpoints_) {
    async_checkpoints_->start(source, at);
    if (final) async_checkpoints_->wait();
    return;
  }
  const auto t0 = Clock::now();
  const std::string path = save_checkpoint(source, *grid_, checkpoints_root_, at, &*budget_);
  if (root_) saved_line(at, path, seconds_since(t0), "");
  if (job_->ledger_agent) job_->ledger_agent->set_state(memory::JobState::training);
}

// The newest checkpoint at or before max_step that verifies, is trusted and loads
// (verify_loadable), chosen on rank 0 and broadcast: its path and step (at = -1 when there is
// none).
std::string TrainingRun::choose_rollback_target(std::int64_t max_step, std::int64_t& at) {
  std::string target;
  at = -1;
  run_on_root(*world_, "choosing a checkpoint to roll back to", [&] {
    std::error_code ec;
    if (!std::filesystem::is_directory(checkpoints_root_, ec)) return;
    std::vector<std::string> skipped;
    const auto found = checkpoint::newest_trusted_checkpoint(
        checkpoints_root_, max_step, &skipped,
        [](const checkpoint::StoredCheckpoint& c) { return verify_loadable(c.path); });
    for (const auto& w : skipped) std::cerr << "memtrain: warning: " << w << "\n";
    if (found) {
      target = found->path;
      at = found->step;
    }
  });
  world_->broadcast(&at, sizeof at, 0);
  return comms::broadcast_string(*world_, target);
}

// Health checks (health_check.hpp). A rollback loads the newest valid checkpoint no later
// than `max_step` on every rank and continues from it; metrics.jsonl loses the steps after
// it, as on resume.
void TrainingRun::rollback(const std::string& reason, std::int64_t max_step) {
  const StallWatchdog::Busy busy(watchdog_.get(), "rollback");
  record_fault(reason);
  if (!checkpointing_) {
    throw RuntimeError(reason + "; no checkpoint to roll back to (checkpoint.interval is 0)");
  }
  if (async_checkpoints_) async_checkpoints_->wait();  // the newest one may be the target
  if (++rollbacks_ > config_.health.max_rollbacks) {
    throw RuntimeError(reason + "; stopping after " + std::to_string(config_.health.max_rollbacks) +
                       " rollbacks (health.max_rollbacks)");
  }
  std::int64_t at = -1;
  const std::string target = choose_rollback_target(max_step, at);
  if (at < 0) {
    throw RuntimeError(reason + "; no valid trusted checkpoint at or before step " + std::to_string(max_step) +
                       " to roll back to");
  }
  run_where(*world_, true, "loading checkpoint " + target, "another rank", [&] {
    load_checkpoint(target, *grid_, job_->model.parameters(), *job_->optimizer, job_->scaler,
                    job_->gradient_sync.compressor());
  });
  step_ = at;
  last_consistent_step_ = at;
  last_unskipped_step_ = at;
  remove_checkpoints_after(at);
  health_events_.back() += "; rolled back to step " + std::to_string(at);
  if (root_) {
    truncate_metrics_after(metrics_->path(), at);
    metrics_->reopen();
    metrics_->write_rolled_back(at, target, reason);
    progress_->break_line();
    *out_ << "memtrain: health: " << reason << "; rolled back to checkpoint " << target << " (step " << at
          << ", rollback " << rollbacks_ << " of at most " << config_.health.max_rollbacks << ")\n"
          << std::flush;
    std::cerr << "memtrain: health: " << reason << "; rolled back to " << target << "\n";
  }
}

bool TrainingRun::train_one_step() {
  const auto& tc = config_.training;
  StepSettings settings{kernels::learning_rate(static_cast<int>(step_), effective_lr_decay_steps(tc), tc.warmup_steps,
                                               tc.lr, tc.min_lr, tc.lr_schedule),
                        tc.grad_clip, tc.seed};
  if (faults_.nan_grad && faults_.nan_grad->covers(step_, world_->rank()) && step_ > nan_injected_through_) {
    nan_injected_through_ = step_;
    settings.after_gradients = [](models::BertForMaskedLM& m) { inject_nan_gradient(m); };
  }
  // Note [What a job may release]: the step's working set, without what ran between steps.
  job_->allocator->take_window_peak_allocated();
  const auto t0 = Clock::now();
  const comms::CollectiveCounts tp_before = job_->tp_group.counts();
  StepResult r;
  // Only the training step is profiled: evaluations and checkpoints run outside it.
  const bool profiled = options_.profile_ops && (step_ > 1 || tc.max_steps == 1);
  if (profiled) job_->ctx.set_op_profile(&op_profile_);
  try {
    r = train_step(job_->model, *data_.train, *plan_, *dp_, *job_->optimizer, step_ - 1, settings, &job_->scaler,
                   &job_->gradient_sync, world_);
    job_->ctx.set_op_profile(nullptr);
  } catch (const NonFiniteStreak& e) {
    job_->ctx.set_op_profile(nullptr);
    // Every rank threw: the flag was reduced over the world before the scaler saw it.
    rollback(std::string("step ") + std::to_string(step_) + ": " + e.what(), step_);
    return false;
  }
  if (grid_->tp_size() > 1) {
    r.time_tp_comm_s = job_->tp_group.counts().seconds - tp_before.seconds;
    r.tp_comm_bytes = job_->tp_group.counts().bytes - tp_before.bytes;
  }
  if (r.skipped && root_) {
    progress_->break_line();
    *out_ << "memtrain: step " << step_ << ": inf/NaN gradients at loss scale " << r.loss_scale << "; step skipped ("
          << r.skipped_steps << " so far), loss scale now " << job_->scaler.scale() << "\n"
          << std::flush;
  }
  if (!r.skipped) last_unskipped_step_ = step_;
  if (dry_) r.loss = r.grad_norm = std::nan("");
  const double wall = seconds_since(t0);
  if (profiled) {
    ++profiled_steps_;
    profiled_s_ += wall;
    profiled_flops_ += r.model_flops / static_cast<double>(world_->size());
  }
  last_loss_ = r.loss;
  if (job_->ledger_agent) {
    job_->ledger_agent->set_progress(step_, wall > 0 ? static_cast<double>(r.num_tokens) / wall : 0.0,
                                     memory::JobState::training, job_->allocator->take_window_peak_allocated());
  }
  // The step's line is written before the vote on a stop signal, so a signal that lands
  // during step k stops the run after step k with step k - 1 already on disk.
  if (log_) log_->record(step_, r, settings.lr, wall, job_->allocator->stats(), step_ == tc.max_steps);
  interrupted_ = stop_requested();
  if (interrupted_ && log_) log_->flush(step_, r, settings.lr, job_->allocator->stats());
  return true;
}

bool TrainingRun::check_health() {
  // Note [Replicas are compared before their state spreads]: before this step's checkpoint.
  const int interval = config_.health.consistency_interval;
  if (interval <= 0 || step_ % interval != 0 || dry_) return true;
  std::string diverged = check_replicas(job_->model.parameters(), *grid_, step_);
  if (ecc_) {
    const std::string rose = ecc_->check(*world_, step_, last_consistent_step_);
    if (!rose.empty()) diverged = diverged.empty() ? rose : diverged + "; " + rose;
  }
  if (!diverged.empty()) {
    rollback(diverged, last_consistent_step_);
    return false;
  }
  last_consistent_step_ = step_;
  return true;
}

std::int64_t TrainingRun::trust_bound() const {
  if (dry_) return step_;
  return replica_checks() ? std::min(last_unskipped_step_, last_consistent_step_) : last_unskipped_step_;
}

bool TrainingRun::stop_checks_pass() {
  std::string fault = check_finite(job_->model.parameters(), *grid_, step_);
  const std::int64_t finite_through = fault.empty() ? step_ : last_unskipped_step_;
  if (fault.empty() && replica_checks()) fault = check_replicas(job_->model.parameters(), *grid_, step_);
  if (!fault.empty()) {
    rollback(fault, std::min(finite_through, replica_checks() ? last_consistent_step_ : finite_through));
    return false;
  }
  last_unskipped_step_ = step_;
  last_consistent_step_ = step_;
  return true;
}

void TrainingRun::save_if_due() {
  const auto& tc = config_.training;
  const bool saving_stop =
      interrupted_ && (stop_signal_ == SIGTERM || stop_signal_ == SIGUSR1 || config_.checkpoint.on_interrupt);
  if (async_checkpoints_) async_checkpoints_->poll();
  const bool at_stop = step_ == tc.max_steps || saving_stop;
  if (checkpointing_ && (step_ % config_.checkpoint.interval == 0 || at_stop)) {
    // A stop's checkpoint is the one a clean stop resumes from: its checks run now, so that it
    // is trusted at once (or the run rolls back instead of sealing a fault).
    bool trusted = trust_bound() >= step_;
    if (!trusted && at_stop) {
      if (!stop_checks_pass()) return;
      trusted = true;
    }
    save(step_, step_ == tc.max_steps || interrupted_, trusted);
    if (!trusted) untrusted_.push_back(step_);
  }
  promote_trusted();
}

void TrainingRun::promote_trusted() {
  const std::int64_t bound = trust_bound();
  std::vector<std::int64_t> now;
  std::erase_if(untrusted_, [&](std::int64_t s) {
    if (s > bound) return false;
    now.push_back(s);
    return true;
  });
  if (now.empty()) return;
  if (async_checkpoints_) {
    const StallWatchdog::Busy busy(watchdog_.get(), "checkpoint");
    async_checkpoints_->wait();  // the newest one may still be written
  }
  if (!root_) return;
  for (const std::int64_t s : now) {
    const auto dir = std::filesystem::path(checkpoints_root_) / checkpoint::step_directory_name(s);
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) continue;  // rotated away (keep_last)
    try {
      checkpoint::mark_trusted(dir.string(), step_);
    } catch (const std::exception& e) {
      // It stays untrusted: a resume passes it by, which is safe.
      std::cerr << "memtrain: warning: checkpoint " << dir.string() << " stays untrusted: " << e.what() << "\n";
    }
  }
}

void TrainingRun::record_fault(const std::string& reason) {
  health_events_.push_back(reason);
  if (root_ && metrics_) metrics_->write_fault_detected(step_, reason);
}

// Note [A checkpoint is trusted once a health check has passed]: the checkpoints after the one
// a rollback loads were written after the fault or cannot be shown to predate it. They are
// removed rather than quarantined: the steps run again and write them anew, a relaunch must
// not find them, and what was detected is in metrics.jsonl (fault_detected_at, rolled_back_to).
void TrainingRun::remove_checkpoints_after(std::int64_t at) {
  std::erase_if(untrusted_, [at](std::int64_t s) { return s > at; });
  run_on_root(*world_, "removing checkpoints after the rollback's", [&] {
    for (const auto& c : checkpoint::list_checkpoints(checkpoints_root_)) {
      if (c.step <= at) continue;
      std::error_code ec;
      std::filesystem::remove_all(c.path, ec);
      if (ec) throw RuntimeError("cannot remove checkpoint " + c.path + " after a rollback: " + ec.message());
      std::cerr << "memtrain: health: removed checkpoint " << c.path << " (written after the fault)\n";
    }
  });
}

void TrainingRun::mark_step_in_trace() {
  if (!config_.memory.trace) return;
  memory::TraceEvent mark;
  mark.kind = memory::TraceEventKind::step;
  mark.time_ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
  mark.allocation_id = static_cast<std::uint64_t>(step_);
  trace_.record(mark);
}

void TrainingRun::run_steps() {
  const auto& tc = config_.training;
  // A resumed run logs the evaluations an uninterrupted one would: none at the resumed step
  // (its line, if that step had one, was kept).
  start_eval_ = evaluate_and_log(resume_.step, !resume_.resume);
  end_eval_ = start_eval_;
  last_loss_ = std::nan("");
  // A SIGINT during setup (data preparation can take a minute) stops before the first step.
  interrupted_ = stop_requested();
  while (!interrupted_ && step_ < tc.max_steps) {
    mark_step_in_trace();
    if (seat_) {
      pool_step_boundary();
      if (stopped_while_preempted_) return;  // no job left to evaluate or report
    }
    if (options_.at_step_boundary) options_.at_step_boundary(*this);
    ++step_;
    if (!train_one_step()) continue;
    if (watchdog_) watchdog_->progress(step_);
    const bool last = step_ == tc.max_steps || interrupted_;
    if (step_ % tc.eval_interval == 0 || last) end_eval_ = evaluate_and_log(step_);
    if (faults_.flip_param && faults_.flip_param->covers(step_, world_->rank()) && step_ > flip_done_) {
      flip_done_ = step_;
      flip_parameter_bit(job_->model);
    }
    if (!check_health()) continue;
    save_if_due();
    if (faults_.kills_after(step_, world_->rank())) checkpoint::kill_self();
  }
  mark_step_in_trace();
  if (options_.at_step_boundary) options_.at_step_boundary(*this);
  if (async_checkpoints_) {
    const StallWatchdog::Busy busy(watchdog_.get(), "checkpoint");
    async_checkpoints_->wait();  // an interrupt without a saving stop
  }
  if (last_eval_step_ != step_) end_eval_ = evaluate_and_log(step_);
  progress_->break_line();
}

}  // namespace memtrain::train
