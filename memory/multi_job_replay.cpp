#include "memory/multi_job_replay.hpp"

#include <algorithm>
#include <memory>
#include <stdexcept>

#include "memory/activation_planner.hpp"
#include "memory/allocator_options.hpp"
#include "memory/caching_allocator.hpp"
#include "memory/out_of_memory.hpp"
#include "memory/simulated_resource.hpp"
#include "memory/simulated_virtual_memory_resource.hpp"
#include "memory/stream_registry.hpp"
#include "memory/tag_registry.hpp"

namespace memtrain::memory {
namespace {

constexpr std::size_t kPlannedAlignment = 512;  // as replay.cpp's planned policy

std::size_t round_up(std::size_t bytes, std::size_t to) { return (bytes + to - 1) / to * to; }

// The memory of one run: its own allocator over the shared device.
class JobMemory {
 public:
  virtual ~JobMemory() = default;
  // False when the request failed (the allocator has already released its own cache and retried).
  virtual bool allocate(const InternedTrace::Op& op, TagId tag) = 0;
  virtual void free(const InternedTrace::Op& op) = 0;
  // Frees every block still held (the process ends); the destructor returns the segments.
  virtual void free_all() = 0;
  virtual MemoryUsage usage() const = 0;
  // empty_cache(); returns the bytes given back to the device.
  virtual std::size_t release_cache() = 0;
};

class CachingJobMemory final : public JobMemory {
 public:
  CachingJobMemory(std::shared_ptr<MemoryResource> device, const std::string& policy, std::size_t ids)
      : blocks_(ids), held_(ids, 0) {
    AllocatorOptions options;
    options.policy = policy;
    allocator_ = std::make_unique<CachingAllocator>(std::move(device), options);
    // Streams of a trace are logical (as in replay.cpp): a private registry per run.
    allocator_->set_stream_registry(&streams_);
  }
  ~CachingJobMemory() override {
    free_all();
    allocator_.reset();
  }
  bool allocate(const InternedTrace::Op& op, TagId tag) override {
    try {
      blocks_[op.id] = allocator_->allocate(op.bytes, op.stream, tag);
      held_[op.id] = 1;
      return true;
    } catch (const memtrain::OutOfMemory&) {
      return false;
    }
  }
  void free(const InternedTrace::Op& op) override {
    if (!held_[op.id]) return;  // its alloc failed, or the run was cut before it
    allocator_->deallocate(blocks_[op.id]);
    held_[op.id] = 0;
  }
  void free_all() override {
    for (std::size_t k = 0; k < held_.size(); ++k) {
      if (held_[k]) allocator_->deallocate(blocks_[k]);
      held_[k] = 0;
    }
  }
  MemoryUsage usage() const override { return allocator_->usage(); }
  std::size_t release_cache() override {
    const std::size_t before = allocator_->usage().reserved_bytes;
    allocator_->empty_cache();
    return before - std::min(before, allocator_->usage().reserved_bytes);
  }

 private:
  StreamRegistry streams_;  // before the allocator, which refers to it
  std::unique_ptr<CachingAllocator> allocator_;
  std::vector<Block> blocks_;
  std::vector<std::uint8_t> held_;
};

// `planned`: the job's arena (the offline layout of its run) is one reservation for its life.
class PlannedJobMemory final : public JobMemory {
 public:
  PlannedJobMemory(std::shared_ptr<MemoryResource> device, std::size_t arena_bytes, std::size_t ids)
      : device_(std::move(device)), arena_bytes_(arena_bytes), bytes_(ids, 0) {}
  ~PlannedJobMemory() override {
    if (arena_ != nullptr) device_->deallocate(arena_, arena_bytes_, kPlannedAlignment);
  }
  // Reserves the arena; false when the device cannot hold it.
  bool start() {
    if (arena_bytes_ == 0) return true;
    try {
      arena_ = device_->allocate(arena_bytes_, kPlannedAlignment);
      return true;
    } catch (const memtrain::OutOfMemory&) {
      return false;
    }
  }
  // The layout fits every request of the run in the arena.
  bool allocate(const InternedTrace::Op& op, TagId) override {
    bytes_[op.id] = round_up(op.bytes, kPlannedAlignment);
    allocated_ += bytes_[op.id];
    return true;
  }
  void free(const InternedTrace::Op& op) override {
    allocated_ -= bytes_[op.id];
    bytes_[op.id] = 0;
  }
  void free_all() override {
    std::fill(bytes_.begin(), bytes_.end(), 0);
    allocated_ = 0;
  }
  MemoryUsage usage() const override { return {allocated_, arena_ == nullptr ? 0 : arena_bytes_, 0}; }
  std::size_t release_cache() override { return 0; }

 private:
  std::shared_ptr<MemoryResource> device_;
  std::size_t arena_bytes_;
  void* arena_ = nullptr;
  std::vector<std::size_t> bytes_;  // by id: its bytes while live
  std::size_t allocated_ = 0;
};

// The arena a run of `steps` steps of `trace` needs under the offline layout. A repeated step
// is self-contained, so the live set during a repeat is the one during its first replay: the
// layout of the run with repeats left out holds the whole run.
std::size_t planned_arena_bytes(const JobTrace& trace, std::uint64_t steps) {
  const auto& ops = trace.trace().ops;
  const std::size_t once = std::min<std::uint64_t>(steps, trace.recorded_steps());
  std::vector<TensorLifetime> lifetimes;
  std::vector<std::size_t> open(trace.trace().ids.size());
  std::size_t t = 0;
  for (std::size_t k = 0; k < once; ++k) {
    for (const auto& [begin, end] : trace.rows_at(k, once)) {
      for (std::size_t i = begin; i < end; ++i, ++t) {
        if (ops[i].alloc) {
          open[ops[i].id] = lifetimes.size();
          lifetimes.push_back({ops[i].bytes, t, SIZE_MAX});
        } else {
          lifetimes[open[ops[i].id]].last_use = t;
        }
      }
    }
  }
  for (auto& l : lifetimes) l.last_use = std::min(l.last_use, t);
  return plan_arena(lifetimes, kPlannedAlignment).arena_bytes;
}

struct Run {
  std::size_t job = 0;
  std::uint64_t index = 0;  // the job's run number
  std::uint64_t start = 0;
  std::uint64_t last = 0;  // last tick
};

struct LiveRun {
  const Run* run = nullptr;
  std::unique_ptr<JobMemory> memory;
  MemoryUsage usage;
  // This tick's rows and the cursor through them.
  std::vector<std::pair<std::size_t, std::size_t>> rows;
  std::size_t count = 0, done = 0, range = 0, offset = 0;
  bool alive = true;
};

}  // namespace

MultiJobReport replay_jobs(const std::vector<ScheduledJob>& jobs, const std::string& policy, std::size_t capacity_bytes,
                           const MultiJobOptions& options) {
  const auto& names = replay_policies();
  if (std::find(names.begin(), names.end(), policy) == names.end()) {
    throw std::invalid_argument("unknown replay policy '" + policy + "'; expected one of " + replay_policy_list());
  }
  if (capacity_bytes == 0) throw std::invalid_argument("replay capacity is 0 bytes; expected a device size");
  for (const ScheduledJob& j : jobs) {
    if (j.trace == nullptr || j.steps == 0 || j.repeat == 0) {
      throw std::invalid_argument("job '" + j.name + "' has no trace, 0 steps or 0 runs; expected a trace, " +
                                  "steps >= 1 and repeat >= 1");
    }
    j.trace->check_repeatable(j.steps, j.name);
  }
  const bool planned = policy == "planned";
  AllocatorOptions device_options;
  device_options.policy = planned ? "no_cache" : policy;
  std::shared_ptr<MemoryResource> device;
  if (needs_virtual_memory(device_options)) {
    device = std::make_shared<SimulatedVirtualMemoryResource>(capacity_bytes, "simulated shared device");
  } else {
    device = std::make_shared<SimulatedResource>(capacity_bytes, "simulated shared device");
  }

  // Tags once per job (Note [Replay interns ids and tags once]), arenas once per job.
  std::vector<std::vector<TagId>> tags(jobs.size());
  std::vector<std::size_t> arenas(jobs.size(), 0);
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const InternedTrace& t = jobs[j].trace->trace();
    tags[j].assign(t.tags.size(), kUntagged);
    for (std::size_t k = 1; k < t.tags.size(); ++k) tags[j][k] = tag_registry().register_tag(t.tags[k]);
    if (planned) arenas[j] = planned_arena_bytes(*jobs[j].trace, jobs[j].steps);
  }

  // Every run, by start tick and then the workload's order.
  std::vector<Run> runs;
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    for (std::uint64_t r = 0; r < jobs[j].repeat; ++r) {
      const std::uint64_t start = jobs[j].start + r * (jobs[j].steps + jobs[j].gap);
      runs.push_back({j, r, start, start + jobs[j].steps - 1});
    }
  }
  std::stable_sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) { return a.start < b.start; });

  MultiJobReport report;
  report.policy = policy;
  report.capacity_bytes = capacity_bytes;
  report.release = options.release;
  for (const ScheduledJob& j : jobs) report.jobs.push_back({j.name, j.repeat, 0, 0, 0});
  std::uint64_t last_tick = 0;
  for (const Run& r : runs) last_tick = std::max(last_tick, r.last);
  report.ticks = runs.empty() ? 0 : last_tick + 1;

  std::vector<LiveRun> live;  // in the order the runs started
  std::size_t allocated = 0, reserved = 0;
  auto refresh = [&](LiveRun& l) {
    const MemoryUsage now = l.memory->usage();
    allocated = allocated - l.usage.allocated_bytes + now.allocated_bytes;
    reserved = reserved - l.usage.reserved_bytes + now.reserved_bytes;
    l.usage = now;
    JobSummary& s = report.jobs[l.run->job];
    s.peak_allocated_bytes = std::max(s.peak_allocated_bytes, now.allocated_bytes);
    s.peak_reserved_bytes = std::max(s.peak_reserved_bytes, now.reserved_bytes);
  };
  auto end_run = [&](LiveRun& l) {
    l.memory->free_all();
    l.memory.reset();  // its segments go back to the device
    allocated -= l.usage.allocated_bytes;
    reserved -= l.usage.reserved_bytes;
    l.usage = {};
    l.alive = false;
  };
  auto fail_run = [&](LiveRun& l, std::uint64_t tick, std::size_t line, std::size_t request) {
    JobFailure f;
    f.job = jobs[l.run->job].name;
    f.run = l.run->index;
    f.tick = tick;
    f.step = tick - l.run->start + 1;
    f.line = line;
    f.request_bytes = request;
    f.device_free_bytes = capacity_bytes - std::min(capacity_bytes, reserved);
    for (const LiveRun& o : live) {
      if (&o == &l || !o.alive) continue;
      f.stranded_bytes += o.usage.reserved_bytes - std::min(o.usage.reserved_bytes, o.usage.allocated_bytes);
      f.stranded_releasable_bytes += o.usage.releasable_bytes;
    }
    f.cached_memory_would_cover = request <= f.device_free_bytes + f.stranded_releasable_bytes;
    ++report.failures;
    report.failures_cached_memory_would_cover += f.cached_memory_would_cover ? 1 : 0;
    report.stranded_bytes_at_failures += f.stranded_bytes;
    report.max_stranded_bytes = std::max(report.max_stranded_bytes, f.stranded_bytes);
    ++report.jobs[l.run->job].failed_runs;
    report.failure_list.push_back(std::move(f));
    end_run(l);
  };
  // Note [Cross-job release in the replay]: every other running job empties its cache.
  auto release_others = [&](const LiveRun& asker) {
    std::size_t released = 0;
    for (LiveRun& o : live) {
      if (&o == &asker || !o.alive || o.usage.releasable_bytes == 0) continue;
      const std::size_t bytes = o.memory->release_cache();
      refresh(o);
      if (bytes > 0) {
        ++report.releases;
        report.released_bytes += bytes;
        released += bytes;
      }
    }
    return released;
  };

  std::size_t next_run = 0;
  double sum_utilization = 0, sum_device_utilization = 0;
  std::uint64_t sampled_ticks = 0;
  for (std::uint64_t tick = 0; tick < report.ticks; ++tick) {
    TickSample sample;
    sample.tick = tick;
    const std::uint64_t failures_before = report.failures;
    for (; next_run < runs.size() && runs[next_run].start == tick; ++next_run) {
      const Run& r = runs[next_run];
      LiveRun l;
      l.run = &r;
      const std::size_t ids = jobs[r.job].trace->trace().ids.size();
      if (planned) {
        auto memory = std::make_unique<PlannedJobMemory>(device, arenas[r.job], ids);
        bool ok = memory->start();
        if (!ok && options.release && release_others(l) > 0) ok = memory->start();
        l.memory = std::move(memory);
        live.push_back(std::move(l));
        if (!ok) {
          fail_run(live.back(), tick, 0, arenas[r.job]);
          continue;
        }
      } else {
        l.memory = std::make_unique<CachingJobMemory>(device, policy, ids);
        live.push_back(std::move(l));
      }
      refresh(live.back());
    }
    sample.allocated_bytes = allocated;
    sample.reserved_bytes = reserved;
    sample.peak_reserved_bytes = reserved;
    // This tick's rows of every running job (Note [The common clock of a multi-job replay]).
    for (LiveRun& l : live) {
      if (!l.alive) continue;
      ++sample.active_jobs;
      l.rows = jobs[l.run->job].trace->rows_at(tick - l.run->start, jobs[l.run->job].steps);
      l.count = 0;
      for (const auto& [b, e] : l.rows) l.count += e - b;
      l.done = l.range = l.offset = 0;
    }
    for (;;) {
      // The next row: the running job least far through its tick, the earlier one on a tie.
      LiveRun* next = nullptr;
      for (LiveRun& l : live) {
        if (!l.alive || l.done == l.count) continue;
        if (next == nullptr || static_cast<unsigned __int128>(l.done + 1) * next->count <
                                   static_cast<unsigned __int128>(next->done + 1) * l.count) {
          next = &l;
        }
      }
      if (next == nullptr) break;
      LiveRun& l = *next;
      const JobTrace& trace = *jobs[l.run->job].trace;
      const std::size_t i = l.rows[l.range].first + l.offset;
      if (++l.offset == l.rows[l.range].second - l.rows[l.range].first) {
        ++l.range;
        l.offset = 0;
      }
      ++l.done;
      ++report.events;
      const InternedTrace::Op& op = trace.trace().ops[i];
      if (op.alloc) {
        const TagId tag = tags[l.run->job][op.tag];
        bool ok = l.memory->allocate(op, tag);
        if (!ok && options.release && release_others(l) > 0) ok = l.memory->allocate(op, tag);
        if (!ok) {
          fail_run(l, tick, trace.trace().lines[i], op.bytes);
          continue;
        }
      } else {
        l.memory->free(op);
      }
      refresh(l);
      if (allocated > sample.allocated_bytes) {
        sample.allocated_bytes = allocated;
        sample.reserved_bytes = reserved;
      }
      sample.peak_reserved_bytes = std::max(sample.peak_reserved_bytes, reserved);
      if (allocated > report.peak_allocated_bytes) report.peak_allocated_bytes = allocated;
      report.peak_reserved_bytes = std::max(report.peak_reserved_bytes, reserved);
    }
    for (LiveRun& l : live) {
      if (l.alive && l.run->last == tick) end_run(l);
    }
    std::erase_if(live, [](const LiveRun& l) { return !l.alive; });
    sample.failures = report.failures - failures_before;
    if (sample.reserved_bytes > 0) {
      ++sampled_ticks;
      sum_utilization += static_cast<double>(sample.allocated_bytes) / sample.reserved_bytes;
      sum_device_utilization += static_cast<double>(sample.allocated_bytes) / capacity_bytes;
    }
    report.timeline.push_back(sample);
  }
  report.utilization = report.peak_reserved_bytes == 0
                           ? 0.0
                           : static_cast<double>(report.peak_allocated_bytes) / report.peak_reserved_bytes;
  report.device_utilization = static_cast<double>(report.peak_allocated_bytes) / capacity_bytes;
  if (sampled_ticks > 0) {
    report.mean_utilization = sum_utilization / sampled_ticks;
    report.mean_device_utilization = sum_device_utilization / sampled_ticks;
  }
  return report;
}

}  // namespace memtrain::memory
