#pragma once
// What the shared pool did to a run (memory.admission: wait): run.json's "pool", and meta.json's
// "pool" in each of its checkpoints.
#include <nlohmann/json.hpp>

namespace memtrain::train {

// Note [A pool record travels with the checkpoints]
// Whether a run is still bit for bit on its solo trajectory is a property of every step it took,
// not of the process that took the last ones: a job shrunk to a smaller micro-batch, checkpointed
// and resumed later by a new process (a crash, `memtrain supervise`, a relaunch after a stop
// while preempted) is within rounding, whatever the new process does. Each checkpoint therefore
// records the pool's changes up to its step, and a process that resumes from it starts its record
// there: the changes a resume discards (those after the checkpoint) are not counted, as their
// metrics.jsonl lines are dropped. A preemption's own checkpoint counts that preemption; what
// follows a checkpoint is not in it: the wait after a preemption, and the preemption itself when
// it reused the periodic checkpoint of its step (that checkpoint was written before it). A health
// rollback within one process keeps the counts: they say what the pool did, and a rollback does
// not undo a change of footprint (the job goes on in it).
struct PoolRecord {
  bool bitwise = true;  // no change of micro-batch so far (only recompute and preemption acted)
  int shrinks = 0;
  int grows = 0;
  int preemptions = 0;
  double waited_s = 0;  // seconds waited for memory, before the first step and after preemptions

  // This record after `earlier`, the record of the steps before it: counts and waits add up, and
  // the run is bitwise only if both parts are.
  PoolRecord after(const PoolRecord& earlier) const;
  // {"trajectory": "bitwise" | "within_rounding", "shrinks", "grows", "preemptions", "waited_s"}.
  nlohmann::ordered_json to_json() const;
};

}  // namespace memtrain::train
