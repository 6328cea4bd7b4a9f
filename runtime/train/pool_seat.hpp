#pragma once
// A job's seat in a shared memory pool (memory.admission: wait): its footprints, its place in
// the ledger's queue, and what the pool asks of it at a step boundary (design.md, "Many jobs on
// one pool"; Note [Admission by plan], memory/shared_ledger.hpp).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "comms/communicator.hpp"
#include "memory/shared_ledger.hpp"
#include "runtime/config/config.hpp"

namespace memtrain::train {

// One way to run a job's steps: a micro-batch size and an activation-checkpointing setting,
// with the job's planned need under it (bytes, all its ranks on this host together).
struct Footprint {
  int micro_batch_size = 0;
  std::string recompute = "none";  // none | selective | full
  std::string recompute_method = "uniform";
  int recompute_num_layers = 0;
  std::size_t need_bytes = 0;
  // "micro-batch 8, recompute none, 41.2 MiB".
  std::string describe() const;
};

// Note [An elastic job's footprints]
// An elastic job can run in less memory in three ways, each cheaper in time than the next and
// tried in this order: release the allocator's cached segments (free, but only what is cached
// above what the step needs), recompute activations (full recompute on every layer: more
// forward work, the same steps bit for bit), and smaller micro-batches with more accumulation
// steps (the same global batch, masks and dropout, so the same update within float rounding of
// the gradient sums). The footprints are the configured one, then full recompute at the
// configured micro-batch, then full recompute at every smaller divisor of the rank's share of
// the global batch (that also divides the evaluation's micro-batch) down to
// memory.elastic_min_micro_batch; each one's need is the planner's
// dry-run peak (the one memory.recompute: auto uses), and one that saves nothing over the one
// before is left out. Releasing the cache comes with every shrink.
// A job whose gradients are 16-bit (precision.dtype bf16 or fp16 without
// precision.fp32_grad_accumulation) has no smaller micro-batches: its gradients are rounded to
// 16 bits at every accumulation, so a split moves its results by the 16-bit rounding, not within
// 1e-6 (in the stress test a bf16 job that ran at micro-batch 8 and then 16 ended 3.7e-4 from
// its solo loss). It shrinks by recompute only, bit for bit.
//
// `config`: the run's config (recompute resolved). `share`: sequences per optimizer step on one
// data-parallel rank (global_batch_size / dp). `need_of(config)`: the job's need for a config.
// Returns at least the configured footprint; only it when memory.elastic is off.
std::vector<Footprint> elastic_footprints(const Config& config, int share,
                                          const std::function<std::size_t(const Config&)>& need_of);

// Note [A footprint's slack]
// A footprint's need is the planner's peak for a fresh job; a job that changed footprint in the
// middle of a run holds a little more (its parameters' segments were laid out for the old one),
// and a run on a corpus masks other counts than the plan's mock batches. A reservation below
// what the job will hold would let a waiting job be admitted into memory the running one needs
// back at its next step, and one of them would run out (the cascade the pool exists to end). So
// each job watches what it holds at every step boundary (its allocators' reserved bytes: the
// last step's peak, since nothing is released between steps) and keeps its reservation at least
// that (reserving what it already holds takes nothing from anyone). After a shrink it keeps its
// old reservation for one step, in which the new footprint shows what it holds, and only then
// lowers it to that: the job a shrink makes room for waits one step longer, and is never
// admitted into memory the shrunk job takes back. The excess over the footprint's need is slack
// that a footprint it moves to is assumed to carry too when it picks one.

// What a job does at a step boundary, decided on rank 0 and the same on every rank.
struct PoolAction {
  enum Kind : std::int64_t { none = 0, shrink = 1, grow = 2, preempt = 3 };
  Kind kind = none;
  int footprint = 0;  // the footprint to run from now on (shrink, grow)
};

// How a wait ended.
struct WaitOutcome {
  bool admitted = false;
  bool queued = false;  // it did not start at once (rank 0's view)
  int stop_signal = 0;  // the signal that ended it, when not admitted
  double seconds = 0;
  std::size_t waited_for_bytes = 0;  // the need it waited for
  std::size_t jobs_ahead = 0;        // at its start
  std::size_t free_bytes = 0;        // at its start
};

// The seat. Every rank holds one (each rank opens the ledger); rank 0 holds the ticket and
// decides, the other ranks follow through the communicator.
class PoolSeat {
 public:
  // Opens the pool `ledger` (memory.ledger on the host, the GPU's own on a GPU: pool_device.hpp)
  // of capacity memory.capacity. footprints: elastic_footprints (the same on every rank). Throws
  // ConfigError (exit 2) when even the smallest footprint's need exceeds the whole pool, naming
  // both figures, and RuntimeError when the ledger cannot be opened.
  PoolSeat(const Config& config, std::string ledger, std::string key, std::string name,
           std::vector<Footprint> footprints, comms::Communicator& world);
  ~PoolSeat();
  PoolSeat(const PoolSeat&) = delete;
  PoolSeat& operator=(const PoolSeat&) = delete;

  // Enters the queue (rank 0's ticket) and waits, every rank together, until the job is admitted
  // or `stop_signal()` returns a signal on rank 0 (or on the others: each rank polls its own).
  // Rank 0 prints "waiting for 1.20 GiB on ledger gpu0: 2 jobs ahead, 400 MiB free" to `log`
  // when the wait starts and when what it waits behind changes. Polls every 50 ms; no collective
  // runs while it waits, so a waiting job takes no CPU from the running ones. Afterwards
  // current() is the largest footprint that fits what was granted.
  WaitOutcome wait_for_admission(const std::function<int()>& stop_signal, std::ostream& log);
  // A preempted job after `step` steps: back in the queue (its arrival kept; `memtrain top`
  // shows it waiting at that step), then wait_for_admission.
  void requeue(std::int64_t step);

  // Rank 0 reads what the pool asks and picks the action; every rank returns the same one.
  // Shrink: the largest footprint whose need is within the asked target (the smallest when none
  // is). Grow: while nobody waits, the largest footprint that fits the job's reservation plus
  // what is free; its reservation is raised before the job grows. Preempt: only for a job with
  // checkpoints (memory.admission's preemptible).
  // `held_bytes`: what the job's allocators reserve now (all its ranks on this host), which at a
  // step boundary is the last step's peak (Note [A footprint's slack]).
  PoolAction at_step_boundary(std::size_t held_bytes);
  // The job now runs `footprint` (after a shrink, its cache released, or a grow). Its
  // reservation follows at the next boundary (Note [A footprint's slack]).
  void changed_to(int footprint);

  const std::vector<Footprint>& footprints() const { return footprints_; }
  int current() const { return current_; }
  // Whether every footprint the job has run keeps the configured micro-batch (bit for bit on the
  // solo trajectory) or not (within rounding).
  bool bitwise() const { return bitwise_; }
  const std::string& ledger_name() const { return ledger_name_; }

 private:
  int largest_within(std::size_t bytes) const;
  // What the job holds above its footprint's planned need (Note [A footprint's slack]).
  std::size_t slack() const;

  const Config& config_;
  comms::Communicator& world_;
  std::string key_;
  std::string name_;
  std::string ledger_name_;
  std::vector<Footprint> footprints_;
  std::shared_ptr<memory::SharedLedger> ledger_;
  std::optional<memory::JobId> ticket_;  // rank 0
  std::uint64_t admissions_seen_ = 0;
  int current_ = 0;
  std::size_t observed_ = 0;  // the most the job has held in its current footprint (rank 0)
  bool settling_ = false;     // its footprint changed at the last boundary
  bool bitwise_ = true;
};

}  // namespace memtrain::train
