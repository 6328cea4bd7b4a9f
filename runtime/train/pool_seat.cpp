#include "runtime/train/pool_seat.hpp"

#include <chrono>
#include <thread>

#include "memory/byte_size.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/train/root_only.hpp"

namespace memtrain::train {
namespace {

constexpr auto kPollPeriod = std::chrono::milliseconds(50);

std::string bytes(std::size_t b) { return memory::format_byte_size(b); }

Footprint footprint_of(const Config& c, std::size_t need) {
  return Footprint{c.training.micro_batch_size, c.memory.recompute, c.memory.recompute_method,
                   c.memory.recompute_num_layers, need};
}

}  // namespace

std::string Footprint::describe() const {
  std::string r = recompute;
  if (recompute != "none" && recompute_num_layers > 0) {
    r += " (" + std::to_string(recompute_num_layers) + " layers, " + recompute_method + ")";
  }
  return "micro-batch " + std::to_string(micro_batch_size) + ", recompute " + r + ", " + bytes(need_bytes);
}

std::vector<Footprint> elastic_footprints(const Config& config, int share,
                                          const std::function<std::size_t(const Config&)>& need_of) {
  std::vector<Footprint> out{footprint_of(config, need_of(config))};
  if (!config.memory.elastic) return out;
  const auto add = [&](const Config& c) {
    const std::size_t need = need_of(c);
    if (need < out.back().need_bytes) out.push_back(footprint_of(c, need));
  };
  Config c = config;
  if (c.memory.recompute != "full" || c.memory.recompute_num_layers != 0) {
    c.memory.recompute = "full";
    c.memory.recompute_method = "uniform";
    c.memory.recompute_num_layers = 0;
    add(c);
  }
  // 16-bit gradients round at every accumulation: a split moves results by far more than 1e-6.
  if (config.precision.dtype != "fp32" && !config.precision.fp32_grad_accumulation) return out;
  // A smaller micro-batch divides the evaluation's too, so that an evaluation in the footprint
  // covers the same validation sequences (TrainingRun::evaluate_and_log).
  const int eval = config.training.eval_micro_batch_size > 0 ? config.training.eval_micro_batch_size
                                                             : config.training.micro_batch_size;
  for (int d = config.training.micro_batch_size - 1; d >= config.memory.elastic_min_micro_batch; --d) {
    if (share % d != 0 || eval % d != 0) continue;
    c.training.micro_batch_size = d;
    add(c);
  }
  return out;
}

PoolSeat::PoolSeat(const Config& config, std::string ledger, std::string key, std::string name,
                   std::vector<Footprint> footprints, comms::Communicator& world)
    : config_(config),
      world_(world),
      key_(std::move(key)),
      name_(std::move(name)),
      ledger_name_(std::move(ledger)),
      footprints_(std::move(footprints)) {
  const std::size_t capacity = config.memory.capacity;
  const Footprint& smallest = footprints_.back();
  if (smallest.need_bytes > capacity) {
    throw ConfigError("memory.admission = wait: this job needs " + bytes(footprints_.front().need_bytes) +
                      (footprints_.size() > 1
                           ? " (" + bytes(smallest.need_bytes) + " at its elastic floor, " + smallest.describe() + ")"
                           : std::string(" (") + footprints_.front().describe() + ")") +
                      " but the whole pool (memory.capacity, ledger '" + ledger_name_ + "') is " + bytes(capacity) +
                      "; it could never start: expected a smaller job, memory.elastic with a lower "
                      "elastic_min_micro_batch, or a larger pool");
  }
  try {
    ledger_ = std::make_shared<memory::SharedLedger>(ledger_name_, capacity);
  } catch (const std::invalid_argument& e) {
    throw ConfigError("memory.capacity = " + std::to_string(capacity) + " (" + bytes(capacity) + "): " + e.what() +
                      "; expected the memory.capacity of the other jobs on ledger '" + ledger_name_ +
                      "', or remove /dev/shm" + memory::SharedLedger::shm_name(ledger_name_) + " when none runs");
  } catch (const std::runtime_error& e) {
    throw RuntimeError(std::string("memory.admission: ") + e.what());
  }
}

PoolSeat::~PoolSeat() {
  if (!ticket_) return;
  try {
    ledger_->leave(*ticket_);
  } catch (const std::exception&) {
    // Reclaimed already (declared dead by another process): nothing is held.
  }
}

int PoolSeat::largest_within(std::size_t b) const {
  for (std::size_t i = 0; i < footprints_.size(); ++i) {
    if (footprints_[i].need_bytes <= b) return static_cast<int>(i);
  }
  return -1;
}

WaitOutcome PoolSeat::wait_for_admission(const std::function<int()>& stop_signal, std::ostream& log) {
  const auto t0 = std::chrono::steady_clock::now();
  const bool root = world_.rank() == 0;
  WaitOutcome out;
  out.waited_for_bytes = footprints_.front().need_bytes;
  // Rank 0 enters the queue; a refusal (the key already queued or running) reaches every rank.
  run_on_root(world_, "entering the memory pool's queue", [&] {
    if (ticket_) return;
    memory::AdmissionRequest r;
    r.name = name_;
    r.key = key_;
    r.priority = config_.memory.priority;
    r.need_bytes = footprints_.front().need_bytes;
    r.floor_bytes = footprints_.back().need_bytes;
    r.elastic = config_.memory.elastic;
    r.preemptible = config_.checkpoint.interval > 0;
    r.aging = std::chrono::seconds(config_.memory.priority_aging);
    r.answer_timeout = std::chrono::seconds(config_.memory.release_timeout);
    try {
      ticket_ = ledger_->enqueue(r);
    } catch (const std::invalid_argument& e) {
      throw RuntimeError(std::string("memory.admission: ") + e.what());
    }
  });
  // run_on_root ends in a collective: the other ranks find the job by its key from here on.
  std::int64_t decided[3] = {0, 0, 0};  // admitted, granted bytes, stop signal
  bool first = true;
  std::size_t last_ahead = SIZE_MAX;
  bool last_asked = false;
  std::vector<std::string> last_silent;
  for (;;) {
    if (root) {
      const memory::AdmissionStatus s = ledger_->poll_admission(*ticket_);
      if (first) {
        out.jobs_ahead = s.jobs_ahead;
        out.free_bytes = s.free_bytes;
      }
      if (!s.admitted) out.queued = true;
      if (s.admitted) {
        decided[0] = 1;
        decided[1] = static_cast<std::int64_t>(s.granted_bytes);
        break;
      }
      if (s.silent != last_silent) {
        for (const std::string& who : s.silent) {
          log << "memtrain: warning: job " << who << " on ledger " << ledger_name_
              << " was asked to make room and has not reached a step boundary within memory.release_timeout ("
              << config_.memory.release_timeout
              << " s): stopped or hung? It is passed over; jobs that fit start meanwhile, and this one waits "
                 "for memory to free\n";
        }
        last_silent = s.silent;
      }
      if (s.jobs_ahead != last_ahead || s.asked_others != last_asked) {
        log << "memtrain: waiting for " << bytes(footprints_.front().need_bytes) << " on ledger " << ledger_name_
            << ": " << s.jobs_ahead << (s.jobs_ahead == 1 ? " job" : " jobs") << " ahead, " << bytes(s.free_bytes)
            << " free" << (s.asked_others ? " (lower-priority jobs asked to make room)" : "")
            << (first && config_.memory.priority != 0 ? "; priority " + std::to_string(config_.memory.priority) : "")
            << "\n"
            << std::flush;
        last_ahead = s.jobs_ahead;
        last_asked = s.asked_others;
      }
      if (const int sig = stop_signal(); sig != 0) {
        ledger_->leave(*ticket_);
        ticket_.reset();
        decided[2] = sig;
        break;
      }
    } else {
      std::uint64_t n = 0;
      try {
        n = ledger_->admissions_of(key_);
      } catch (const std::runtime_error&) {
        break;  // rank 0 left the queue: its decision follows
      }
      if (n > admissions_seen_ || stop_signal() != 0) break;
    }
    first = false;
    std::this_thread::sleep_for(kPollPeriod);
  }
  if (world_.size() > 1) world_.broadcast(decided, sizeof decided, 0);
  out.admitted = decided[0] != 0;
  out.stop_signal = static_cast<int>(decided[2]);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!out.admitted) return out;
  ++admissions_seen_;
  const std::size_t granted = static_cast<std::size_t>(decided[1]);
  int f = largest_within(granted);
  if (f < 0) f = static_cast<int>(footprints_.size()) - 1;  // granted at least the floor
  current_ = f;
  observed_ = 0;
  settling_ = false;
  if (footprints_[f].micro_batch_size != config_.training.micro_batch_size) bitwise_ = false;
  // Granted what was free (an elastic start): keep what the footprint needs, give back the rest.
  if (root && footprints_[f].need_bytes < granted) ledger_->set_reservation(*ticket_, footprints_[f].need_bytes);
  return out;
}

void PoolSeat::requeue(std::int64_t step) {
  if (world_.rank() == 0 && ticket_) ledger_->requeue(*ticket_, step);
}

std::size_t PoolSeat::slack() const {
  const std::size_t need = footprints_[current_].need_bytes;
  return observed_ > need ? observed_ - need : 0;
}

PoolAction PoolSeat::at_step_boundary(std::size_t held_bytes) {
  std::int64_t decided[2] = {PoolAction::none, current_};
  if (world_.rank() == 0 && ticket_) {
    observed_ = std::max(observed_, held_bytes);
    // Note [A footprint's slack]: the reservation covers what the job holds. The first boundary
    // after a change is when what the new footprint holds is known: only then does the
    // reservation come down to it.
    const std::size_t covered = std::max(observed_, footprints_[current_].need_bytes);
    if (settling_) {
      settling_ = false;
      ledger_->set_reservation(*ticket_, covered);
    }
    memory::PoolRequest r = ledger_->pool_request(*ticket_);
    if (observed_ > r.reservation_bytes && ledger_->set_reservation(*ticket_, observed_)) {
      r.reservation_bytes = observed_;
    }
    const std::size_t slack = this->slack();
    const int last = static_cast<int>(footprints_.size()) - 1;
    if (r.preempt && config_.checkpoint.interval > 0) {
      decided[0] = PoolAction::preempt;
    } else if (r.target_bytes > 0 && config_.memory.elastic) {
      int f = r.target_bytes > slack ? largest_within(r.target_bytes - slack) : -1;
      if (f < 0) f = last;
      if (f > current_) {
        decided[0] = PoolAction::shrink;
        decided[1] = f;
      }
    } else if (config_.memory.elastic && current_ > 0 && r.waiting_jobs == 0) {
      const std::size_t room = r.reservation_bytes + r.free_bytes;
      const int f = room > slack ? largest_within(room - slack) : -1;
      if (f >= 0 && f < current_ && ledger_->set_reservation(*ticket_, footprints_[f].need_bytes + slack)) {
        decided[0] = PoolAction::grow;
        decided[1] = f;
      }
    }
  }
  if (world_.size() > 1) world_.broadcast(decided, sizeof decided, 0);
  PoolAction a;
  a.kind = static_cast<PoolAction::Kind>(decided[0]);
  a.footprint = static_cast<int>(decided[1]);
  if ((a.kind == PoolAction::shrink || a.kind == PoolAction::grow) &&
      footprints_[a.footprint].micro_batch_size != config_.training.micro_batch_size) {
    bitwise_ = false;
  }
  return a;
}

void PoolSeat::changed_to(int footprint) {
  current_ = footprint;
  observed_ = 0;
  settling_ = true;
}

}  // namespace memtrain::train
