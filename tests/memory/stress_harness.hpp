#pragma once
// The allocator stress/property harness (issue 3, "Quotas, isolation and a device pool"):
// several jobs as threads share one simulated device, each with its own CachingAllocator
// (optionally behind a QuotaResourceAdaptor on one SharedLedger), allocating and freeing
// heavy-tailed random sizes. After EVERY operation the job checks:
//   - no two live blocks overlap (all jobs' blocks, one address space; kept by the harness
//     from the Blocks it was handed, not from the allocator);
//   - the snapshot is well formed: segments disjoint, blocks tile each segment, reserved
//     bytes equal the sum of (non-stitched) segment sizes, allocated and active bytes equal
//     the sums over blocks in those states;
//   - every counter is non-negative, peak >= current, current == allocated - freed;
//   - the counters agree with the harness's own tally of the allocator's event log (alloc /
//     free / segment / oom events) and of what the job itself did;
//   - with quotas: the ledger charges exactly the job's reserved bytes, no job passes its
//     limit, the committed sum and the reservations stay within the capacity, and a job whose
//     request fits in what is left of its reservation never gets OutOfMemory.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "memory/caching_allocator.hpp"
#include "memory/out_of_memory.hpp"
#include "memory/quota_resource_adaptor.hpp"
#include "memory/quota_virtual_memory_resource.hpp"
#include "memory/shared_ledger.hpp"
#include "memory/simulated_resource.hpp"
#include "memory/simulated_virtual_memory_resource.hpp"
#include "memory/stream_registry.hpp"
#include "memory/tag_registry.hpp"

namespace memtrain::memory::stress {

inline constexpr std::size_t KiB = std::size_t{1} << 10;
inline constexpr std::size_t MiB = std::size_t{1} << 20;
inline constexpr std::size_t GiB = std::size_t{1} << 30;

struct JobConfig {
  std::size_t reservation = 0;
  std::size_t limit = kNoLimit;
};

struct StressConfig {
  std::string policy = "best_fit";
  std::size_t capacity_bytes = 8 * GiB;
  std::vector<JobConfig> jobs;  // one thread each
  int ops_per_job = 1000;
  std::size_t min_bytes = 256;
  std::size_t max_bytes = 1 * GiB;
  double pareto_alpha = 0.3;  // P(size > s) = (min/s)^alpha: heavy-tailed
  std::uint64_t seed = 1;
  bool quotas = true;         // jobs behind QuotaResourceAdaptor on one SharedLedger
  std::string ledger_device;  // unique ledger name (when quotas)
};

struct StressResult {
  std::vector<std::string> violations;  // empty when every check held
  std::size_t operations = 0;
  std::size_t allocations = 0;
  std::size_t ooms = 0;
  std::size_t max_live_blocks = 0;
};

// Heavy-tailed request sizes: Pareto(min_bytes, alpha) capped at max_bytes, with the low bits
// random so sizes are rarely aligned.
inline std::size_t draw_size(std::mt19937_64& rng, const StressConfig& c) {
  std::uniform_real_distribution<double> u(1e-12, 1.0);
  double s = static_cast<double>(c.min_bytes) / std::pow(u(rng), 1.0 / c.pareto_alpha);
  if (s >= static_cast<double>(c.max_bytes)) return c.max_bytes;
  auto bytes = static_cast<std::size_t>(s);
  return bytes - std::min<std::size_t>(bytes - c.min_bytes, rng() % 256);
}

// Live blocks of all jobs, by address, kept from what allocate() returned.
class LiveSet {
 public:
  // Returns an empty string, or what it overlaps.
  std::string insert(std::uintptr_t a, std::size_t n, int job) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto next = live_.lower_bound(a);
    if (next != live_.end() && next->first < a + n) return describe(a, n, job, next->first, next->second);
    if (next != live_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second.first > a) return describe(a, n, job, prev->first, prev->second);
    }
    live_.emplace(a, std::make_pair(n, job));
    return {};
  }
  void erase(std::uintptr_t a) {
    std::lock_guard<std::mutex> lock(mutex_);
    live_.erase(a);
  }

 private:
  static std::string describe(std::uintptr_t a, std::size_t n, int job, std::uintptr_t b,
                              const std::pair<std::size_t, int>& other) {
    std::ostringstream o;
    o << "job " << job << " got [" << std::hex << a << ", +" << std::dec << n << ") overlapping job " << other.second
      << "'s live [" << std::hex << b << ", +" << std::dec << other.first << ")";
    return o.str();
  }
  std::mutex mutex_;
  std::map<std::uintptr_t, std::pair<std::size_t, int>> live_;
};

// What the event log says, tallied by the harness (the allocator's counters are checked
// against these, never the other way round).
struct EventTally {
  std::int64_t allocs = 0, frees = 0, ooms = 0;
  std::int64_t requested_alloc_bytes = 0, requested_free_bytes = 0;
  std::int64_t segment_allocs = 0, segment_frees = 0;
  std::int64_t segment_alloc_bytes = 0, segment_free_bytes = 0;
  std::map<TagId, std::int64_t> requested_per_tag;  // alloc - free bytes
  void add(const TraceEvent& e) {
    auto b = static_cast<std::int64_t>(e.bytes);
    switch (e.kind) {
      case TraceEventKind::alloc:
        ++allocs;
        requested_alloc_bytes += b;
        requested_per_tag[e.tag] += b;
        break;
      case TraceEventKind::free:
        ++frees;
        requested_free_bytes += b;
        requested_per_tag[e.tag] -= b;
        break;
      case TraceEventKind::segment_alloc:
        ++segment_allocs;
        segment_alloc_bytes += b;
        break;
      case TraceEventKind::segment_free:
        ++segment_frees;
        segment_free_bytes += b;
        break;
      case TraceEventKind::oom:
        ++ooms;
        break;
      default:
        break;
    }
  }
};

struct LiveBlock {
  Block block;
  std::size_t requested = 0;
};

class Job {
 public:
  Job(int index, const StressConfig& cfg, const JobConfig& jc, std::shared_ptr<MemoryResource> device,
      std::shared_ptr<SharedLedger> ledger, LiveSet& live)
      : index_(index), cfg_(cfg), jc_(jc), ledger_(std::move(ledger)), live_(live), rng_(cfg.seed * 7919 + index) {
    std::shared_ptr<MemoryResource> upstream = device;
    if (cfg.quotas) {
      JobShare share{"job" + std::to_string(index), jc.reservation, jc.limit};
      if (auto vmm = std::dynamic_pointer_cast<VirtualMemoryResource>(device)) {
        auto q = std::make_shared<QuotaVirtualMemoryResource>(vmm, ledger_, share);
        job_ = q->job();
        upstream = q;
      } else {
        auto q = std::make_shared<QuotaResourceAdaptor>(device, ledger_, share);
        job_ = q->job();
        upstream = q;
      }
      quota_ = upstream;
    }
    AllocatorOptions opt;
    opt.policy = cfg.policy;
    allocator_ = std::make_unique<CachingAllocator>(upstream, opt);
    allocator_->set_stream_registry(&streams_);
    allocator_->set_event_sink([this](const TraceEvent& e) { tally_.add(e); });
    stream_a_ = kDefaultStream;
    stream_b_ = streams_.create_stream();
    for (const char* t : {"stress.parameter", "stress.activation", "stress.temporary"})
      tags_.push_back(tag_registry().register_tag(t));
  }
  ~Job() {
    for (auto& lb : blocks_) {
      live_.erase(reinterpret_cast<std::uintptr_t>(lb.block.ptr));
      allocator_->deallocate(lb.block);
    }
    allocator_.reset();
  }

  // Runs the job; stops at the first violation (recorded in `out`).
  void run(StressResult& out) {
    for (int op = 0; op < cfg_.ops_per_job; ++op) {
      step(op);
      ++result_.operations;
      result_.max_live_blocks = std::max(result_.max_live_blocks, blocks_.size());
      if (!violation_.empty()) break;
      check(op);
      if (!violation_.empty()) break;
    }
    if (violation_.empty()) finish();
    out = result_;
    if (!violation_.empty()) out.violations.push_back("job " + std::to_string(index_) + ": " + violation_);
  }

 private:
  // Frees everything, lets every stream finish and empties the cache: the job must then hold
  // nothing, in the allocator and in the ledger.
  void finish() {
    for (auto& lb : blocks_) {
      live_.erase(reinterpret_cast<std::uintptr_t>(lb.block.ptr));
      allocator_->deallocate(lb.block);
    }
    blocks_.clear();
    streams_.complete(stream_a_);
    streams_.complete(stream_b_);
    allocator_->empty_cache();
    const MemoryStats s = allocator_->stats();
    if (s.allocated_bytes.current != 0 || s.active_bytes.current != 0 || s.reserved_bytes.current != 0)
      fail("after freeing everything and empty_cache: allocated " + std::to_string(s.allocated_bytes.current) +
           ", active " + std::to_string(s.active_bytes.current) + ", reserved " +
           std::to_string(s.reserved_bytes.current) + " bytes; expected 0");
    if (cfg_.quotas && ledger_->entry(job_).in_use_bytes != 0) fail("ledger still charges the job");
  }

  void fail(const std::string& what) {
    if (violation_.empty()) violation_ = what;
  }

  void step(int op) {
    const std::uint64_t r = rng_() % 1000;
    if (r < 5) {
      allocator_->empty_cache();
      return;
    }
    if (r < 15) {  // the side stream finishes its work: pending blocks become reusable
      streams_.complete(stream_b_);
      return;
    }
    if (!blocks_.empty() && r < 15 + 440) {
      std::size_t i = rng_() % blocks_.size();
      LiveBlock lb = blocks_[i];
      blocks_[i] = blocks_.back();
      blocks_.pop_back();
      if (rng_() % 8 == 0) {
        StreamId other = lb.block.stream == stream_a_ ? stream_b_ : stream_a_;
        allocator_->record_stream(lb.block, other);
        streams_.record_event(other);
      }
      live_.erase(reinterpret_cast<std::uintptr_t>(lb.block.ptr));
      allocator_->deallocate(lb.block);
      ++frees_;
      requested_live_ -= static_cast<std::int64_t>(lb.requested);
      return;
    }
    const std::size_t bytes = draw_size(rng_, cfg_);
    const StreamId stream = rng_() % 4 == 0 ? stream_b_ : stream_a_;
    const TagId tag = tags_[rng_() % tags_.size()];
    const std::size_t reserved_before = static_cast<std::size_t>(allocator_->stats().reserved_bytes.current);
    try {
      Block b = allocator_->allocate(bytes, stream, tag);
      ++result_.allocations;
      if (b.ptr == nullptr || b.size < bytes)
        fail("allocate(" + std::to_string(bytes) + ") gave a block of " + std::to_string(b.size) + " bytes at " +
             std::to_string(reinterpret_cast<std::uintptr_t>(b.ptr)));
      if (reinterpret_cast<std::uintptr_t>(b.ptr) % 256 != 0) fail("block not 256-byte aligned");
      std::string overlap = live_.insert(reinterpret_cast<std::uintptr_t>(b.ptr), bytes, index_);
      if (!overlap.empty()) fail(overlap);
      blocks_.push_back({b, bytes});
      ++allocs_;
      requested_live_ += static_cast<std::int64_t>(bytes);
    } catch (const OutOfMemory& e) {
      ++result_.ooms;
      ++ooms_seen_;
      if (cfg_.quotas) {
        // A request that fits in what is left of the job's reservation must succeed. The bound
        // allows for rounding to a 2 MiB page and for a 20 MiB segment of the mid-size pool.
        auto after = static_cast<std::size_t>(allocator_->stats().reserved_bytes.current);
        std::size_t need = (bytes + 2 * MiB - 1) / (2 * MiB) * (2 * MiB) + 20 * MiB;
        if (after + need <= jc_.reservation) {
          fail("op " + std::to_string(op) + ": OutOfMemory for " + std::to_string(bytes) + " bytes with " +
               std::to_string(after) + " reserved (before: " + std::to_string(reserved_before) +
               ") inside a reservation of " + std::to_string(jc_.reservation) + ": " + e.what());
        }
      }
      // Make room, as a training job that shrinks its batch would.
      if (!blocks_.empty()) {
        std::size_t i = rng_() % blocks_.size();
        LiveBlock lb = blocks_[i];
        blocks_[i] = blocks_.back();
        blocks_.pop_back();
        live_.erase(reinterpret_cast<std::uintptr_t>(lb.block.ptr));
        allocator_->deallocate(lb.block);
        ++frees_;
        requested_live_ -= static_cast<std::int64_t>(lb.requested);
      }
    }
  }

  static void check_counter(const char* name, const StatCounter& c, std::string& why) {
    if (!why.empty()) return;
    if (c.current < 0 || c.peak < 0 || c.allocated < 0 || c.freed < 0 || c.peak < c.current ||
        c.current != c.allocated - c.freed) {
      why = std::string(name) + " inconsistent: current " + std::to_string(c.current) + " peak " +
            std::to_string(c.peak) + " allocated " + std::to_string(c.allocated) + " freed " + std::to_string(c.freed);
    }
  }

  void check(int op) {
    const MemoryStats s = allocator_->stats();
    const std::vector<SegmentSnapshot> segs = allocator_->snapshot();
    std::string why;
    check_counter("allocated_bytes", s.allocated_bytes, why);
    check_counter("reserved_bytes", s.reserved_bytes, why);
    check_counter("active_bytes", s.active_bytes, why);
    check_counter("inactive_split_bytes", s.inactive_split_bytes, why);
    check_counter("requested_bytes", s.requested_bytes, why);
    for (const auto& [tag, ts] : s.per_tag) {
      check_counter("per-tag allocated_bytes", ts.allocated_bytes, why);
      check_counter("per-tag active_bytes", ts.active_bytes, why);
      check_counter("per-tag requested_bytes", ts.requested_bytes, why);
    }
    if (s.num_alloc_retries < 0 || s.num_ooms < 0 || s.num_device_alloc < 0 || s.num_device_free < 0)
      why += "; a count is negative";

    // The snapshot, independently summed.
    std::int64_t seg_total = 0, allocated = 0, active = 0, requested = 0, live_blocks = 0;
    std::uintptr_t prev_end = 0;
    std::vector<std::pair<std::uintptr_t, std::uintptr_t>> ranges;
    for (const auto& seg : segs) {
      if (!seg.is_stitched) seg_total += static_cast<std::int64_t>(seg.total_size);
      ranges.push_back({seg.address, seg.address + seg.total_size});
      std::uintptr_t cursor = seg.address;
      std::size_t covered = 0;
      for (const auto& b : seg.blocks) {
        if (!seg.is_stitched && b.address != cursor)
          why += "; blocks do not tile segment " + std::to_string(seg.address);
        cursor = b.address + b.size;
        covered += b.size;
        if (b.state == "active_allocated") {
          allocated += static_cast<std::int64_t>(b.size);
          active += static_cast<std::int64_t>(b.size);
          requested += static_cast<std::int64_t>(b.requested_size);
          ++live_blocks;
        } else if (b.state == "active_pending_free") {
          active += static_cast<std::int64_t>(b.size);
        }
      }
      if (!seg.is_stitched && covered != seg.total_size)
        why +=
            "; blocks cover " + std::to_string(covered) + " of a " + std::to_string(seg.total_size) + "-byte segment";
    }
    (void)prev_end;
    std::sort(ranges.begin(), ranges.end());
    for (std::size_t i = 1; i < ranges.size(); ++i)
      if (ranges[i].first < ranges[i - 1].second) why += "; two segments overlap";

    auto eq = [&](const char* what, std::int64_t stat, std::int64_t reference) {
      if (stat != reference)
        why += std::string("; ") + what + " " + std::to_string(stat) + " != " + std::to_string(reference);
    };
    eq("reserved_bytes vs sum of segment sizes", s.reserved_bytes.current, seg_total);
    eq("allocated_bytes vs allocated blocks", s.allocated_bytes.current, allocated);
    eq("active_bytes vs active blocks", s.active_bytes.current, active);
    eq("requested_bytes vs blocks' requested sizes", s.requested_bytes.current, requested);
    eq("live blocks in snapshot vs held by the job", live_blocks, static_cast<std::int64_t>(blocks_.size()));
    // The event log.
    eq("alloc events vs allocations made", tally_.allocs, allocs_);
    eq("free events vs deallocations made", tally_.frees, frees_);
    eq("oom events vs OutOfMemory caught", tally_.ooms, ooms_seen_);
    eq("num_ooms vs oom events", s.num_ooms, tally_.ooms);
    eq("requested_bytes.allocated vs alloc events", s.requested_bytes.allocated, tally_.requested_alloc_bytes);
    eq("requested_bytes.freed vs free events", s.requested_bytes.freed, tally_.requested_free_bytes);
    eq("requested_bytes vs live requested (job's own count)", s.requested_bytes.current, requested_live_);
    eq("num_device_alloc vs segment_alloc events", s.num_device_alloc, tally_.segment_allocs);
    eq("num_device_free vs segment_free events", s.num_device_free, tally_.segment_frees);
    eq("reserved_bytes vs segment events", s.reserved_bytes.current,
       tally_.segment_alloc_bytes - tally_.segment_free_bytes);
    for (const auto& [tag, bytes] : tally_.requested_per_tag) {
      auto it = s.per_tag.find(tag);
      eq("per-tag requested_bytes vs events", it == s.per_tag.end() ? 0 : it->second.requested_bytes.current, bytes);
    }
    if (cfg_.quotas) {
      LedgerEntry me = ledger_->entry(job_);
      eq("ledger charge vs reserved_bytes", static_cast<std::int64_t>(me.in_use_bytes), s.reserved_bytes.current);
      if (me.in_use_bytes > jc_.limit) why += "; job past its limit";
      LedgerSnapshot ls = ledger_->snapshot();
      if (ls.committed_bytes > ls.capacity_bytes) why += "; ledger committed past capacity";
      if (ls.reserved_bytes > ls.capacity_bytes) why += "; reservations past capacity";
    }
    if (!why.empty()) fail("after op " + std::to_string(op) + ": " + why);
  }

  int index_;
  const StressConfig& cfg_;
  JobConfig jc_;
  std::shared_ptr<SharedLedger> ledger_;
  std::shared_ptr<MemoryResource> quota_;  // the job's quota adaptor (plain or virtual memory)
  JobId job_;
  LiveSet& live_;
  StreamRegistry streams_;
  std::unique_ptr<CachingAllocator> allocator_;
  std::mt19937_64 rng_;
  StreamId stream_a_ = 0, stream_b_ = 0;
  std::vector<TagId> tags_;
  std::vector<LiveBlock> blocks_;
  EventTally tally_;
  std::int64_t allocs_ = 0, frees_ = 0, ooms_seen_ = 0, requested_live_ = 0;
  StressResult result_;
  std::string violation_;
};

// Runs every job on its own thread against one simulated device: SimulatedResource, or a
// SimulatedVirtualMemoryResource for vmm_stitch (which needs the page model; its quota adaptor
// is QuotaVirtualMemoryResource, charging physical pages).
inline StressResult run_stress(const StressConfig& cfg) {
  std::shared_ptr<MemoryResource> device;
  if (cfg.policy == "vmm_stitch") {
    device = std::make_shared<SimulatedVirtualMemoryResource>(cfg.capacity_bytes, "stress vmm");
  } else {
    device = std::make_shared<SimulatedResource>(cfg.capacity_bytes, "stress");
  }
  std::shared_ptr<SharedLedger> ledger;
  if (cfg.quotas) ledger = std::make_shared<SharedLedger>(cfg.ledger_device, cfg.capacity_bytes);
  LiveSet live;
  std::vector<std::unique_ptr<Job>> jobs;
  for (std::size_t j = 0; j < cfg.jobs.size(); ++j)
    jobs.push_back(std::make_unique<Job>(static_cast<int>(j), cfg, cfg.jobs[j], device, ledger, live));
  std::vector<StressResult> results(jobs.size());
  std::vector<std::thread> threads;
  for (std::size_t j = 0; j < jobs.size(); ++j) threads.emplace_back([&, j] { jobs[j]->run(results[j]); });
  for (auto& t : threads) t.join();
  jobs.clear();
  StressResult total;
  for (const auto& r : results) {
    total.violations.insert(total.violations.end(), r.violations.begin(), r.violations.end());
    total.operations += r.operations;
    total.allocations += r.allocations;
    total.ooms += r.ooms;
    total.max_live_blocks = std::max(total.max_live_blocks, r.max_live_blocks);
  }
  if (cfg.quotas && !ledger->snapshot().jobs.empty())
    total.violations.push_back("jobs are still in the ledger after they were destroyed");
  return total;
}

}  // namespace memtrain::memory::stress
