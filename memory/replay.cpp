#include "memory/replay.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "memory/activation_planner.hpp"
#include "memory/allocation_policy_registry.hpp"
#include "memory/allocator_options.hpp"
#include "memory/byte_size.hpp"
#include "memory/caching_allocator.hpp"
#include "memory/out_of_memory.hpp"
#include "memory/simulated_resource.hpp"
#include "memory/simulated_virtual_memory_resource.hpp"
#include "memory/stream_registry.hpp"
#include "memory/tag_registry.hpp"

namespace memtrain::memory {
namespace {

[[noreturn]] void fail(const std::string& source, const InternedTrace& trace, std::size_t i, const std::string& what) {
  throw TraceFormatError(source + ":" + std::to_string(trace.lines[i]) + ": " + what);
}

}  // namespace

std::size_t peak_live_bytes(const InternedTrace& trace, const std::string& source) {
  // A hand-built InternedTrace may be inconsistent; intern_trace's never is.
  if (trace.lines.size() != trace.ops.size() || trace.tags.empty()) {
    throw std::invalid_argument("interned trace has " + std::to_string(trace.ops.size()) + " ops, " +
                                std::to_string(trace.lines.size()) + " lines and " + std::to_string(trace.tags.size()) +
                                " tags; expected one line per op and tags[0] = untagged (use intern_trace)");
  }
  std::vector<std::size_t> bytes_of(trace.ids.size());
  std::vector<bool> live(trace.ids.size());
  // Wider than size_t: a trace may request any 64-bit size (an out-of-memory event), and two
  // requests of 2^63 bytes wrapped the sum. The peak saturates at SIZE_MAX.
  unsigned __int128 current = 0, peak = 0;
  for (std::size_t i = 0; i < trace.ops.size(); ++i) {
    const InternedTrace::Op& op = trace.ops[i];
    if (op.id >= trace.ids.size() || op.tag >= trace.tags.size()) {
      fail(source, trace, i,
           "interned op names id " + std::to_string(op.id) + " and tag " + std::to_string(op.tag) +
               "; expected below " + std::to_string(trace.ids.size()) + " and " + std::to_string(trace.tags.size()) +
               " (use intern_trace)");
    }
    const std::string& id = trace.ids[op.id];
    if (op.alloc) {
      if (live[op.id]) fail(source, trace, i, "alloc of id '" + id + "' which is still live; free it first");
      live[op.id] = true;
      bytes_of[op.id] = op.bytes;
      current += op.bytes;
      peak = std::max(peak, current);
    } else {
      if (!live[op.id]) fail(source, trace, i, "free of id '" + id + "' which is not live");
      if (op.bytes != 0 && op.bytes != bytes_of[op.id]) {
        fail(source, trace, i,
             "free of id '" + id + "' with " + std::to_string(op.bytes) + " bytes; it was allocated with " +
                 std::to_string(bytes_of[op.id]));
      }
      current -= bytes_of[op.id];
      live[op.id] = false;
    }
  }
  return peak > std::numeric_limits<std::size_t>::max() ? std::numeric_limits<std::size_t>::max()
                                                        : static_cast<std::size_t>(peak);
}

namespace {

ReplayReport replay_on_allocator(const InternedTrace& trace, const std::string& policy, std::size_t capacity_bytes) {
  std::shared_ptr<MemoryResource> device;
  AllocatorOptions options;
  options.policy = policy;
  if (needs_virtual_memory(options)) {
    device = std::make_shared<SimulatedVirtualMemoryResource>(capacity_bytes, "simulated replay device");
  } else {
    device = std::make_shared<SimulatedResource>(capacity_bytes, "simulated replay device");
  }
  CachingAllocator allocator(device, options);
  // Streams of a trace are logical: their work is complete when the trace frees a block, so a
  // private registry keeps replays independent of the process's streams.
  StreamRegistry streams;
  allocator.set_stream_registry(&streams);

  // Tags are registered once per replay, not per alloc (Note [Replay interns ids and tags once]).
  std::vector<TagId> tag_ids(trace.tags.size(), kUntagged);
  for (std::size_t t = 1; t < trace.tags.size(); ++t) tag_ids[t] = tag_registry().register_tag(trace.tags[t]);

  ReplayReport report;
  // By interned id: its block while live. A failed alloc leaves it not held, so its free is
  // skipped (ids were checked beforehand).
  std::vector<Block> blocks(trace.ids.size());
  std::vector<std::uint8_t> held(trace.ids.size(), 0);
  for (std::size_t i = 0; i < trace.ops.size(); ++i) {
    const InternedTrace::Op& op = trace.ops[i];
    if (op.alloc) {
      ++report.num_allocs;
      try {
        blocks[op.id] = allocator.allocate(op.bytes, op.stream, tag_ids[op.tag]);
        held[op.id] = 1;
      } catch (const memtrain::OutOfMemory&) {
        if (!report.first_oom_event) {
          report.first_oom_event = i;
          report.first_oom_line = trace.lines[i];
        }
      }
    } else {
      ++report.num_frees;
      if (!held[op.id]) continue;
      allocator.deallocate(blocks[op.id]);
      held[op.id] = 0;
    }
  }
  const MemoryStats s = allocator.stats();
  report.peak_allocated_bytes = static_cast<std::size_t>(s.allocated_bytes.peak);
  report.peak_reserved_bytes = static_cast<std::size_t>(s.reserved_bytes.peak);
  report.fragmentation = s.fragmentation_at_peak_reserved;
  report.num_ooms = static_cast<std::size_t>(s.num_ooms);
  report.num_alloc_retries = static_cast<std::size_t>(s.num_alloc_retries);
  for (std::size_t k = 0; k < blocks.size(); ++k) {
    if (held[k]) allocator.deallocate(blocks[k]);
  }
  return report;
}

// Note [The planned policy is a greedy offline bound, not the optimum]
// An allocator sees requests one at a time; the planner sees the whole trace, so each alloc's
// lifetime is known (alloc event to free event, or to the end when never freed) and one arena
// is laid out for all of them (activation_planner.hpp). The layout is greedy (by size with best-fit
// offsets, or best fit in time order when many blocks are live together: Note [Two layouts,
// each at most O(n log n)]); the optimum is NP-hard (dynamic storage allocation), so `planned` is an upper bound
// on what an offline layout needs, and the peak live bytes (lower_bound_bytes) a lower bound:
// the true optimum lies between them. Its utilization is the ratio of the two, so 1 - that is
// the greedy layout's largest possible gap to the optimum. The arena is "reserved" from the start,
// and allocations whose planned bytes end past the capacity are the ones that fail: a device
// of that size could not hold this layout. Streams do not matter here: nothing is reused before
// its free in trace order.
ReplayReport replay_planned(const InternedTrace& trace, std::size_t capacity_bytes) {
  const auto& ops = trace.ops;
  constexpr std::size_t kAlignment = 512;  // the allocators' smallest rounding
  std::vector<TensorLifetime> lifetimes;
  std::vector<std::size_t> alloc_event;  // trace index of each lifetime's alloc
  // A request larger than the device fails in any layout, as it does on the allocators. It
  // enters the plan with no bytes: a size near 2^64 would overflow the planner's arithmetic.
  std::vector<bool> larger_than_device;
  std::vector<std::size_t> open(trace.ids.size());  // by interned id: its live lifetime
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const InternedTrace::Op& op = ops[i];
    if (op.alloc) {
      open[op.id] = lifetimes.size();
      larger_than_device.push_back(op.bytes > capacity_bytes / kAlignment * kAlignment);
      lifetimes.push_back({larger_than_device.back() ? 0 : op.bytes, i, ops.size()});
      alloc_event.push_back(i);
    } else {
      lifetimes[open[op.id]].last_use = i;  // ids were checked beforehand
    }
  }
  const ArenaPlan plan = plan_arena(lifetimes, kAlignment);

  ReplayReport report;
  for (const InternedTrace::Op& op : ops) (op.alloc ? report.num_allocs : report.num_frees)++;
  report.peak_reserved_bytes = std::min(plan.arena_bytes, capacity_bytes);
  for (std::size_t k = 0; k < lifetimes.size(); ++k) {
    const std::size_t size = (lifetimes[k].bytes + kAlignment - 1) / kAlignment * kAlignment;
    if (larger_than_device[k] || plan.offsets[k] + size > capacity_bytes) {
      ++report.num_ooms;
      if (!report.first_oom_event || alloc_event[k] < *report.first_oom_event) {
        report.first_oom_event = alloc_event[k];
        report.first_oom_line = trace.lines[alloc_event[k]];
      }
    }
  }
  // Allocated bytes at the fullest moment, counting only the tensors that fit; free space in
  // the arena at that moment gives the fragmentation (one segment: reserved never changes).
  std::vector<std::pair<std::size_t, std::size_t>> busy;
  for (std::size_t k = 0; k < lifetimes.size(); ++k) {
    const std::size_t size = (lifetimes[k].bytes + kAlignment - 1) / kAlignment * kAlignment;
    if (size == 0 || plan.offsets[k] + size > capacity_bytes) continue;
    if (lifetimes[k].first_use <= plan.peak_time && plan.peak_time <= lifetimes[k].last_use) {
      busy.emplace_back(plan.offsets[k], plan.offsets[k] + size);
    }
  }
  std::sort(busy.begin(), busy.end());
  std::size_t allocated = 0, top = 0, largest_free = 0, total_free = 0;
  for (const auto& [begin, end] : busy) {
    allocated += end - begin;
    if (begin > top) {
      largest_free = std::max(largest_free, begin - top);
      total_free += begin - top;
    }
    top = std::max(top, end);
  }
  if (report.peak_reserved_bytes > top) {
    largest_free = std::max(largest_free, report.peak_reserved_bytes - top);
    total_free += report.peak_reserved_bytes - top;
  }
  report.peak_allocated_bytes = allocated;
  report.fragmentation = total_free == 0 ? 0.0 : 1.0 - static_cast<double>(largest_free) / total_free;
  return report;
}

}  // namespace

const std::vector<std::string>& replay_policies() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n = policy_names();
    n.emplace_back("planned");
    return n;
  }();
  return names;
}

std::string replay_policy_list() {
  std::string list;
  for (const auto& n : replay_policies()) list += (list.empty() ? "" : ", ") + n;
  return list;
}

ReplayReport replay_interned_trace(const InternedTrace& trace, const std::string& policy, std::size_t capacity_bytes,
                                   const std::string& source) {
  const auto& names = replay_policies();
  if (std::find(names.begin(), names.end(), policy) == names.end()) {
    throw std::invalid_argument("unknown replay policy '" + policy + "'; expected one of " + replay_policy_list());
  }
  if (capacity_bytes == 0) {
    throw std::invalid_argument("replay capacity is 0 bytes; expected a device size such as 40GiB");
  }
  const std::size_t lower_bound = peak_live_bytes(trace, source);
  ReplayReport report =
      policy == "planned" ? replay_planned(trace, capacity_bytes) : replay_on_allocator(trace, policy, capacity_bytes);
  report.policy = policy;
  report.capacity_bytes = capacity_bytes;
  report.events = trace.ops.size();
  report.peak_live_bytes = lower_bound;
  report.utilization = report.peak_reserved_bytes == 0
                           ? 0.0
                           : static_cast<double>(report.peak_allocated_bytes) / report.peak_reserved_bytes;
  return report;
}

ReplayReport replay_trace(const std::vector<TraceOp>& ops, const std::string& policy, std::size_t capacity_bytes,
                          const std::string& source) {
  return replay_interned_trace(intern_trace(ops), policy, capacity_bytes, source);
}

ReplayReport replay_trace_file(const std::string& path, const std::string& policy, std::size_t capacity_bytes) {
  return replay_interned_trace(intern_trace(read_trace_file(path)), policy, capacity_bytes, path);
}

std::string ReplayReport::to_json() const {
  auto optional = [](const std::optional<std::size_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  const nlohmann::json j = {{"policy", policy},
                            {"capacity_bytes", capacity_bytes},
                            {"events", events},
                            {"num_allocs", num_allocs},
                            {"num_frees", num_frees},
                            {"peak_live_bytes", peak_live_bytes},
                            {"peak_allocated_bytes", peak_allocated_bytes},
                            {"peak_reserved_bytes", peak_reserved_bytes},
                            {"utilization", utilization},
                            {"fragmentation", fragmentation},
                            {"num_ooms", num_ooms},
                            {"first_oom_event", optional(first_oom_event)},
                            {"first_oom_line", optional(first_oom_line)},
                            {"num_alloc_retries", num_alloc_retries}};
  return j.dump();
}

std::string ReplayReport::to_text() const {
  std::ostringstream out;
  char ratio[64];
  out << "policy " << policy << " on a simulated device of " << format_byte_size(capacity_bytes) << ": " << events
      << " events (" << num_allocs << " allocs, " << num_frees << " frees)\n";
  out << "  peak live (lower bound)  " << format_byte_size(peak_live_bytes) << '\n';
  out << "  peak allocated           " << format_byte_size(peak_allocated_bytes) << '\n';
  out << "  peak reserved            " << format_byte_size(peak_reserved_bytes) << '\n';
  std::snprintf(ratio, sizeof ratio, "%.4f", utilization);
  out << "  utilization              " << ratio << " (peak allocated / peak reserved)\n";
  std::snprintf(ratio, sizeof ratio, "%.4f", fragmentation);
  out << "  fragmentation            " << ratio << " (at peak reserved)\n";
  out << "  out-of-memory errors     " << num_ooms;
  if (first_oom_event) out << " (first at event " << *first_oom_event << ", line " << *first_oom_line << ")";
  out << "\n  alloc retries            " << num_alloc_retries << '\n';
  return out.str();
}

}  // namespace memtrain::memory
