#pragma once
// MEMTRAIN_FAULT: faults a test injects into a run on purpose (docs/checkpoints.md, "Fault
// injection"), so that recovery is tested against the failures it exists for.
#include <cstdint>
#include <optional>
#include <string>

namespace memtrain::checkpoint {

// The faults named by MEMTRAIN_FAULT, a comma-separated list of NAME=VALUE:
//   kill_at_step=K[:R]      the process SIGKILLs itself right after optimizer step K (with R:
//                           only world rank R; mpirun then ends the others);
//   kill_in_checkpoint=N    it SIGKILLs itself once it has written N bytes of checkpoint files
//                           (counted per process over all its checkpoints, in write order, so
//                           N past the first checkpoint's size dies inside the second).
//   nan_grad=S:R[:N]        world rank R sets one gradient element to NaN after summing the
//                           gradients of steps S .. S+N-1 (N = 1): a skipped step (or, N large
//                           enough, a streak that rolls back);
//   flip_param=S:R          world rank R flips one bit of one parameter after step S (silent
//                           corruption the consistency check must catch).
// Each step's fault fires once per process: a step run again after a rollback is clean.
// Every rank reads the same variable (mpirun exports it to all of them).
struct RankFault {
  std::int64_t step = 0;
  std::int64_t rank = 0;
  std::int64_t count = 1;  // consecutive steps from `step`
  bool covers(std::int64_t s, int world_rank) const { return world_rank == rank && s >= step && s < step + count; }
};

struct FaultPlan {
  std::optional<std::int64_t> kill_at_step;
  std::optional<std::int64_t> kill_in_checkpoint;
  std::optional<std::int64_t> kill_rank;  // kill_at_step's rank; none: every rank
  std::optional<RankFault> nan_grad;
  std::optional<RankFault> flip_param;

  // True when this world rank dies after `step`.
  bool kills_after(std::int64_t step, int world_rank) const {
    return kill_at_step && step == *kill_at_step && (!kill_rank || *kill_rank == world_rank);
  }

  bool any() const {
    return kill_at_step.has_value() || kill_in_checkpoint.has_value() || nan_grad.has_value() || flip_param.has_value();
  }
};

// Parses `text` (the variable's value; empty = no faults). Throws memtrain::ConfigError
// "MEMTRAIN_FAULT=<text>: <what>; expected ..." for an unknown name, a missing or non-integer
// value, or a negative count.
FaultPlan parse_fault_plan(const std::string& text);

// parse_fault_plan(getenv("MEMTRAIN_FAULT")), or no faults when unset.
FaultPlan fault_plan_from_environment();
// Throws memtrain::ConfigError "MEMTRAIN_FAULT: nan_grad names rank 5; the job has ranks 0..1"
// when a fault names a rank outside a world of `world_size` (it would never fire, and a test
// that means to inject one would pass without it).
void check_fault_ranks(const FaultPlan& plan, int world_size);

// SIGKILL of this process: no handler, no flush, no destructor runs (what a killed rank does).
[[noreturn]] void kill_self();

}  // namespace memtrain::checkpoint
