#include "memory/job_trace.hpp"

#include <algorithm>

#include "memory/trace_format_error.hpp"

namespace memtrain::memory {

JobTrace::JobTrace(const std::vector<TraceOp>& ops, const std::vector<StepMark>& steps, std::string source)
    : trace_(intern_trace(ops)), source_(std::move(source)) {
  peak_live_bytes_ = memory::peak_live_bytes(trace_, source_);
  if (steps.size() < 2) {
    bounds_ = {0, trace_.ops.size()};
  } else {
    for (const StepMark& s : steps) bounds_.push_back(std::min(s.op_index, trace_.ops.size()));
  }
}

JobTrace JobTrace::read(const std::string& path) {
  std::vector<StepMark> steps;
  std::vector<TraceOp> ops = read_trace_file(path, &steps);
  return JobTrace(ops, steps, path);
}

std::vector<std::pair<std::size_t, std::size_t>> JobTrace::rows_at(std::size_t k, std::size_t run_steps) const {
  std::vector<std::pair<std::size_t, std::size_t>> rows;
  const std::size_t n = recorded_steps();
  if (k == 0 && bounds_.front() > 0) rows.emplace_back(0, bounds_.front());
  const std::size_t step = k + 1 == run_steps ? std::min(run_steps, n) : std::min(k + 1, repeated_step());
  if (bounds_[step] > bounds_[step - 1]) rows.emplace_back(bounds_[step - 1], bounds_[step]);
  if (k + 1 == run_steps && run_steps >= n && bounds_.back() < trace_.ops.size()) {
    rows.emplace_back(bounds_.back(), trace_.ops.size());
  }
  return rows;
}

void JobTrace::check_repeatable(std::size_t run_steps, const std::string& job) const {
  const std::size_t n = recorded_steps();
  if (run_steps <= n) return;
  const std::size_t r = repeated_step();
  const std::size_t begin = bounds_[r - 1], end = bounds_[r];
  std::vector<std::uint8_t> live(trace_.ids.size(), 0);
  auto refuse = [&](std::size_t i, const std::string& what) {
    throw TraceFormatError(source_ + ":" + std::to_string(trace_.lines[i]) + ": job '" + job + "' runs " +
                           std::to_string(run_steps) + " steps and the trace recorded " + std::to_string(n) +
                           ", so its step " + std::to_string(r) + " repeats, but that step " + what +
                           "; record more steps (training.max_steps) or set the job's steps to at most " +
                           std::to_string(n));
  };
  for (std::size_t i = begin; i < end; ++i) {
    const InternedTrace::Op& op = trace_.ops[i];
    if (op.alloc) {
      live[op.id] = 1;
    } else if (!live[op.id]) {
      refuse(i, "frees id '" + trace_.ids[op.id] + "', allocated before it");
    } else {
      live[op.id] = 0;
    }
  }
  for (std::size_t i = begin; i < end; ++i) {
    const InternedTrace::Op& op = trace_.ops[i];
    if (op.alloc && live[op.id]) refuse(i, "keeps id '" + trace_.ids[op.id] + "' it allocates");
  }
}

}  // namespace memtrain::memory
