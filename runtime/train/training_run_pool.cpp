// TrainingRun in a shared memory pool (memory.admission: wait; pool_seat.hpp): the wait before
// the job is built, the pool's requests at step boundaries, and a preemption.
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "memory/byte_size.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/json_text.hpp"
#include "runtime/train/checkpoint_loader.hpp"
#include "runtime/train/root_only.hpp"
#include "runtime/train/training_run.hpp"

namespace memtrain::train {
namespace {

models::Recompute recompute_of(const std::string& r) {
  return r == "full"        ? models::Recompute::full
         : r == "selective" ? models::Recompute::selective
                            : models::Recompute::none;
}

std::string seconds_text(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f s", s);
  return b;
}

}  // namespace

// Note [The need is planned before anything is allocated]
// A job admitted by plan reserves the need its own planner gives (the dry-run peak of its first
// steps and evaluations, times its ranks on this host) before it builds its model, so that the
// memory it waits for is the memory it will use; a need found out by allocating would already
// have taken memory from the jobs it waits behind. Rank 0 plans (a few dry-run steps per
// footprint) and broadcasts the figures, so every rank holds the same footprints.
void TrainingRun::enter_pool(const LedgerJob& who) {
  if (!options_.planned_peak_reserved) {
    throw ConfigError("memory.admission: wait needs a planner (RunOptions::planned_peak_reserved)");
  }
  // Every rank finds the same pool (Note [A GPU is a pool of its own]: a GPU job has one rank).
  pool_device_ = pool_device(config_, world_->local_rank(), world_->local_size(), world_->size());
  const auto need_of = [&](const Config& c) {
    return pool_need_bytes(options_.planned_peak_reserved(c, world_->size()), pool_device_);
  };
  const int share = config_.training.global_batch_size / grid_->dp_size();
  // Which footprints exist follows from the config alone; their needs are rank 0's dry runs.
  std::vector<Footprint> footprints;
  std::vector<std::int64_t> needs;
  run_on_root(*world_, "planning the job's memory need", [&] {
    footprints = elastic_footprints(resolved_, share, need_of);
    for (const Footprint& f : footprints) needs.push_back(static_cast<std::int64_t>(f.need_bytes));
  });
  std::int64_t count = static_cast<std::int64_t>(needs.size());
  world_->broadcast(&count, sizeof count, 0);
  needs.resize(static_cast<std::size_t>(count));
  world_->broadcast(needs.data(), static_cast<std::int64_t>(needs.size() * sizeof(std::int64_t)), 0);
  if (!root_) {
    // The same footprints, without the dry runs: their needs come from rank 0.
    std::size_t i = 0;
    footprints = elastic_footprints(resolved_, share, [&](const Config&) {
      return i < needs.size() ? static_cast<std::size_t>(needs[i++]) : std::size_t{0};
    });
    footprints.resize(needs.size());
    for (std::size_t k = 0; k < needs.size(); ++k) footprints[k].need_bytes = static_cast<std::size_t>(needs[k]);
  }
  if (root_) {
    *out_ << "memtrain: memory pool '" << pool_device_.ledger << "' ("
          << memory::format_byte_size(config_.memory.capacity) << "): this job needs " << footprints.front().describe()
          << (footprints.size() > 1 ? "; elastic down to " + footprints.back().describe() : std::string())
          << ", priority " << config_.memory.priority
          << (pool_device_.gpu
                  ? "; each figure counts " + memory::format_byte_size(pool_device_.outside_allocator_bytes()) +
                        " outside the allocator (CUDA context " + memory::format_byte_size(pool_device_.context_bytes) +
                        ", workspaces " + memory::format_byte_size(pool_device_.fixed_workspace_bytes) + ")"
                  : std::string())
          << "\n"
          << std::flush;
  }
  seat_ = std::make_unique<PoolSeat>(config_, pool_device_.ledger, who.key, who.name, std::move(footprints), *world_);
  start_wait_ = seat_->wait_for_admission([this] { return stop_.signal(); }, *out_);
  pool_wait_s_ += start_wait_.seconds;
  if (!start_wait_.admitted) {
    if (root_) {
      *out_ << "memtrain: stopped while waiting for memory (after " << seconds_text(start_wait_.seconds)
            << "); nothing ran\n"
            << std::flush;
    }
    throw StoppedWhileWaiting{start_wait_.stop_signal};
  }
  // Admitted with less than its need (an elastic job, with what was free): it starts shrunk.
  if (seat_->current() > 0) ++pool_shrinks_;
  if (root_ && (start_wait_.queued || seat_->current() > 0)) {
    *out_ << "memtrain: admitted after " << seconds_text(start_wait_.seconds) << " with "
          << seat_->footprints()[seat_->current()].describe() << "\n"
          << std::flush;
  }
}

void TrainingRun::write_pool_start_event() {
  if (!seat_ || !root_) return;
  const Footprint& now = seat_->footprints()[seat_->current()];
  if (start_wait_.queued) {
    char why[200];
    std::snprintf(why, sizeof why, "waited %.1f s on ledger %s: %zu jobs ahead, %s free", start_wait_.seconds,
                  seat_->ledger_name().c_str(), start_wait_.jobs_ahead,
                  memory::format_byte_size(start_wait_.free_bytes).c_str());
    metrics_->write_pool_event(step_, "wait", nullptr, &now, why);
  }
  if (seat_->current() > 0) {
    metrics_->write_pool_event(step_, "shrink", &seat_->footprints().front(), &now,
                               "admitted with less than its need on ledger " + seat_->ledger_name() +
                                   ": an elastic job starts in the largest footprint that fits what was free");
  }
}

void TrainingRun::apply_footprint(int footprint) {
  const Footprint& f = seat_->footprints()[footprint];
  set_micro_batch_size(f.micro_batch_size);
  job_->model.set_recompute(
      recompute_of(f.recompute),
      f.recompute_method == "block" ? models::RecomputeMethod::block : models::RecomputeMethod::uniform,
      f.recompute_num_layers);
}

void TrainingRun::pool_step_boundary() {
  // What the job holds in the pool: its allocator's segments and, on a GPU, the context and the
  // workspaces as they are now (the float views' scratch grows: Note [What a GPU job needs
  // outside the allocator]).
  const std::size_t held = pool_held_bytes(static_cast<std::size_t>(job_->allocator->stats().reserved_bytes.current),
                                           job_->device_workspace_bytes(), pool_device_);
  const PoolAction a = seat_->at_step_boundary(held);
  if (a.kind == PoolAction::none) return;
  if (a.kind == PoolAction::preempt) {
    preempt();
    return;
  }
  const Footprint from = seat_->footprints()[seat_->current()];
  apply_footprint(a.footprint);
  std::string why;
  if (a.kind == PoolAction::shrink) {
    // Note [An elastic job's footprints]: the cache goes first, with every shrink.
    const std::size_t released = job_->release_cached_memory();
    seat_->changed_to(a.footprint);
    ++pool_shrinks_;
    why = "a job of higher priority waits on ledger " + seat_->ledger_name() + "; released " +
          memory::format_byte_size(released) + " of cached memory";
  } else {
    seat_->changed_to(a.footprint);
    ++pool_grows_;
    why = "nobody waits on ledger " + seat_->ledger_name() + " and it has room";
  }
  const Footprint& to = seat_->footprints()[a.footprint];
  if (root_) {
    metrics_->write_pool_event(step_, a.kind == PoolAction::shrink ? "shrink" : "grow", &from, &to, why);
    progress_->break_line();
    *out_ << "memtrain: step " << step_ << ": " << (a.kind == PoolAction::shrink ? "shrunk" : "grew") << " from "
          << from.describe() << " to " << to.describe() << " (" << why << ")\n"
          << std::flush;
  }
}

// Note [A preemption is a checkpoint and a resume]
// A preempted job writes a checkpoint whose checks (finite values, replicas that agree) run
// before it is written, so that it is trusted (Note [A checkpoint is trusted once a health
// check has passed]); then it destroys its whole state, allocator included, so that every byte
// it held returns to the pool, and waits in the queue in the same process. Readmitted, it
// builds the job again and loads that checkpoint as a resume does: the steps after it are the
// ones a run never preempted takes, bit for bit (Note [A checkpoint needs no RNG state and no
// data cursor]). A job without checkpoints is never asked (the ledger's preemptible flag).
void TrainingRun::preempt() {
  const StallWatchdog::Busy busy(watchdog_.get(), "preempted");
  if (async_checkpoints_) async_checkpoints_->wait();
  std::int64_t have = -1;
  choose_rollback_target(step_, have);
  if (have != step_) {                // this step's periodic checkpoint, when trusted, serves
    if (!stop_checks_pass()) return;  // rolled back instead: the pool asks again at the next boundary
    // Counted before the checkpoint, whose pool record then includes it (Note [A pool record
    // travels with the checkpoints]).
    ++pool_preemptions_;
    save(step_, /*final=*/true, /*trusted=*/true);
    promote_trusted();
  } else {
    ++pool_preemptions_;
  }
  const Footprint before = seat_->footprints()[seat_->current()];
  if (root_) {
    metrics_->write_pool_event(step_, "preempt", &before, nullptr,
                               "a job of higher priority waits on ledger " + seat_->ledger_name() +
                                   " and shrinking the jobs below it is not enough");
    progress_->break_line();
    *out_ << "memtrain: step " << step_ << ": preempted (checkpoint written); waiting for memory\n" << std::flush;
  }
  async_checkpoints_.reset();
  job_.reset();  // every byte back to the pool: the allocator leaves the ledger with it
  seat_->requeue(step_);
  const WaitOutcome w = seat_->wait_for_admission([this] { return stop_.signal(); }, *out_);
  pool_wait_s_ += w.seconds;
  if (!w.admitted) {
    interrupted_ = true;
    stop_signal_ = w.stop_signal;
    stopped_while_preempted_ = true;
    return;
  }
  job_ = std::make_unique<TrainingJob>(resolved_, *grid_, placement_, *out_);
  std::int64_t at = -1;
  const std::string target = choose_rollback_target(step_, at);
  if (at != step_) {
    throw RuntimeError("resuming after a preemption at step " + std::to_string(step_) +
                       ": its checkpoint is not the newest trusted one (found step " + std::to_string(at) + ")");
  }
  run_where(*world_, true, "loading checkpoint " + target, "another rank", [&] {
    load_checkpoint(target, *grid_, job_->model.parameters(), *job_->optimizer, job_->scaler,
                    job_->gradient_sync.compressor());
  });
  if (bf16_gemm_.basis != Bf16GemmBasis::not_applicable) job_->model.set_native_bf16_gemm(bf16_gemm_.native);
  apply_footprint(seat_->current());
  start_async_checkpoints();
  const Footprint& now = seat_->footprints()[seat_->current()];
  if (root_) {
    metrics_->write_pool_event(step_, "resume", nullptr, &now,
                               "readmitted after " + seconds_text(w.seconds) + "; loaded " + target);
    *out_ << "memtrain: step " << step_ << ": readmitted after " << seconds_text(w.seconds) << ", resumed from "
          << target << " with " << now.describe() << "\n"
          << std::flush;
  }
}

PoolRecord TrainingRun::pool_record() const {
  PoolRecord now;
  now.bitwise = !seat_ || seat_->bitwise();
  now.shrinks = pool_shrinks_;
  now.grows = pool_grows_;
  now.preemptions = pool_preemptions_;
  now.waited_s = pool_wait_s_;
  return now.after(pool_before_);
}

std::string TrainingRun::pool_trajectory() const {
  if (!seat_) return {};
  const PoolRecord r = pool_record();
  std::string s = r.bitwise ? "bit for bit on its solo trajectory" : "within rounding of its solo trajectory";
  s += r.bitwise ? " (no micro-batch change)" : " (its micro-batch changed)";
  s += "; " + std::to_string(r.shrinks) + " shrinks, " + std::to_string(r.grows) + " grows, " +
       std::to_string(r.preemptions) + " preemptions, waited " + seconds_text(r.waited_s);
  if (pool_before_.shrinks + pool_before_.grows + pool_before_.preemptions > 0 || pool_before_.waited_s > 0 ||
      !pool_before_.bitwise) {
    s += " (with the steps before the resumed checkpoint)";
  }
  return s;
}

std::string TrainingRun::pool_record_json() const {
  nlohmann::ordered_json j;
  j["ledger"] = seat_->ledger_name();
  j.update(pool_record().to_json());
  return core::json_text(j);
}

}  // namespace memtrain::train
