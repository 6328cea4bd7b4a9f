#pragma once
// One job's allocation trace cut into the steps of the common clock of a multi-job replay
// (Note [The common clock of a multi-job replay], multi_job_replay.hpp).
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "memory/replay.hpp"

namespace memtrain::memory {

// A trace and its step rows (Note [Step boundaries in a trace], replay.hpp). With step rows at
// op indices p0 <= p1 <= ... <= pm (m >= 1) the trace recorded m steps: its prologue is rows
// [0, p0) (set-up, the first evaluation), step k is [p(k-1), pk), its epilogue [pm, end) (the
// final evaluation, teardown). With fewer than two step rows the whole trace is one step.
class JobTrace {
 public:
  // Interns `ops` and checks their ids (peak_live_bytes). `steps` index into `ops` (as
  // parse_trace_csv gives them). `source` names the trace in messages. Throws TraceFormatError.
  JobTrace(const std::vector<TraceOp>& ops, const std::vector<StepMark>& steps, std::string source);
  // read_trace_file(path) with its step rows. Throws TraceFormatError.
  static JobTrace read(const std::string& path);

  // Steps the trace recorded (at least 1).
  std::size_t recorded_steps() const { return bounds_.size() - 1; }
  // The step a run longer than the trace repeats: the last but one when the trace recorded
  // three or more (the last one ends with the final evaluation; the one before it is the steady
  // state), else the last.
  std::size_t repeated_step() const { return recorded_steps() >= 3 ? recorded_steps() - 1 : recorded_steps(); }
  // The rows, as [begin, end) ranges of trace().ops, that tick `k` (0-based) of a run of
  // `run_steps` steps replays: the prologue at tick 0; then step k + 1 while the trace has it,
  // repeated_step() in the ticks the trace does not cover, and, at the run's last tick, the
  // trace's last step (a run at least as long as the trace) or step run_steps (a shorter one,
  // cut there); then, at the last tick of a run at least as long as the trace, the epilogue.
  std::vector<std::pair<std::size_t, std::size_t>> rows_at(std::size_t k, std::size_t run_steps) const;
  // Throws TraceFormatError when a run of `run_steps` steps would repeat repeated_step() and
  // that step is not self-contained (it frees a block allocated before it, or keeps one it
  // allocates): the repeated rows would free or allocate an id twice. `job` names the job.
  void check_repeatable(std::size_t run_steps, const std::string& job) const;

  const InternedTrace& trace() const { return trace_; }
  const std::string& source() const { return source_; }
  // The trace's largest sum of live requested bytes (bytes).
  std::size_t peak_live_bytes() const { return peak_live_bytes_; }

 private:
  InternedTrace trace_;
  std::string source_;
  std::vector<std::size_t> bounds_;  // p0, ..., pm; or {0, ops} with fewer than two step rows
  std::size_t peak_live_bytes_ = 0;
};

}  // namespace memtrain::memory
