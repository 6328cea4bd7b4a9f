#pragma once
// The caching allocator: one engine, four policies (allocation_policy.hpp).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "memory/allocation_policy.hpp"
#include "memory/allocator.hpp"
#include "memory/allocator_options.hpp"
#include "memory/memory_resource.hpp"
#include "memory/segment_snapshot.hpp"
#include "memory/stats_recorder.hpp"
#include "memory/stream_registry.hpp"
#include "memory/trace_event.hpp"
#include "memory/virtual_memory_resource.hpp"

namespace memtrain::memory {

// Keeps freed blocks and hands them out again, so the upstream (cudaMalloc, a simulated device)
// is called rarely. Blocks are reused on the stream that freed them; a block used by another
// stream (record_stream) returns to the cache once that stream's event completes. What to round,
// which pool, how big a segment, when to split and what to try before failing is the policy's
// (options.policy): see the Note blocks in no_cache_policy.cpp, pytorch_policy.cpp,
// best_fit_policy.cpp and vmm_stitch_policy.cpp.
//
// Order of attempts (every caching policy): best fit on the request's stream; vmm_stitch:
// stitch the stream's free pages if they add up to the request; garbage collection past the
// threshold; best_fit/vmm_stitch: if a new segment would raise peak reserved memory, take over
// another stream's whole cached segment, else release cached segments (Note [Holding the
// peak]); a new segment from the upstream. Then one retry, counted in num_alloc_retries: wait
// for blocks pending on other streams, take over another stream's whole cached segment
// (best_fit, vmm_stitch), release every cached whole segment and ask again, vmm_stitch: stitch
// free pages plus fresh ones. Then OutOfMemory; the allocator is unchanged except for the
// released cache. Rounding overflow is reported as OutOfMemory, never wrapped.
//
// Thread-safe (one mutex). Addresses are 256-byte aligned.
class CachingAllocator final : public Allocator {
 public:
  // Throws std::invalid_argument for an unknown policy, options that would do nothing
  // (validate_options), and vmm_stitch or expandable_segments on an upstream that is not a
  // VirtualMemoryResource.
  CachingAllocator(std::shared_ptr<MemoryResource> upstream, AllocatorOptions options = {});
  ~CachingAllocator() override;
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  Block allocate(std::size_t bytes, StreamId stream = kDefaultStream, TagId tag = kUntagged) override;
  void deallocate(const Block& block) override;
  void record_stream(const Block& block, StreamId stream) override;

  MemoryStats stats() const override;
  // Allocated, reserved and releasable bytes now (memory_stats.hpp), without the per-tag copy
  // and free-list scans of stats().
  MemoryUsage usage() const;
  void reset_peak_stats() override;
  std::string memory_summary() const override;
  void empty_cache() override;
  // Releases cached segments with nothing allocated in them, oldest first, until at least
  // `goal` bytes are released or none is left (empty_cache with a goal). Returns the bytes
  // released. Thread-safe.
  std::size_t release_cached(std::size_t goal);
  // The most bytes allocated at once (in blocks, after rounding) since the previous call, and
  // starts a new window at what is allocated now: a caller that takes it around a phase of
  // work (a training step) learns that phase's working set without resetting the statistics
  // that memory_stats() reports.
  std::size_t take_window_peak_allocated();

  // Segments with their blocks, address order (PyTorch memory snapshot shape).
  std::vector<SegmentSnapshot> snapshot() const;
  // Every event from now on goes to `sink` (nullptr to stop). See trace_event.hpp.
  void set_event_sink(TraceEventSink sink);
  // Streams and events come from this registry (default: stream_registry()).
  void set_stream_registry(StreamRegistry* registry);

  const AllocatorOptions& options() const { return options_; }
  const MemoryResource& upstream() const { return *upstream_; }
  std::string_view policy_name() const { return policy_->name(); }
  // Most bytes this allocator may reserve: options.capacity or the upstream's (0 = unbounded).
  std::size_t capacity() const { return capacity_; }

 private:
  struct Segment;
  struct BlockNode;
  struct BlockOrder {
    using is_transparent = void;
    bool operator()(const BlockNode* a, const BlockNode* b) const;
  };
  using FreeIndex = std::set<BlockNode*, BlockOrder>;

  BlockNode* find_free(Pool pool, StreamId stream, std::size_t size);
  BlockNode* try_allocate(std::size_t rounded, Pool pool, StreamId stream, std::string* cause);
  BlockNode* new_segment(std::size_t bytes, std::size_t rounded, Pool pool, StreamId stream, bool allow_expand,
                         std::string* cause);
  BlockNode* grow_expandable(std::size_t rounded, Pool pool, StreamId stream, std::string* cause);
  BlockNode* stitch(std::size_t rounded, StreamId stream, bool allow_fresh, std::string* cause);
  BlockNode* reclaim_other_stream(std::size_t rounded, Pool pool, StreamId stream);
  BlockNode* carve(BlockNode* block, std::size_t rounded);
  void split(BlockNode* block, std::size_t size);
  void free_block(BlockNode* block);
  void unstitch(Segment* stitched);
  void process_events(bool wait);
  std::size_t release_cached_segments(std::size_t goal);
  std::size_t shrink_expandable(Segment* segment);
  void release_segment(Segment* segment);
  void erase_segment(Segment* segment);
  void collect_garbage(std::size_t incoming);
  void hold_peak(std::size_t incoming);
  bool raises_peak(std::size_t incoming) const;
  void insert_free(BlockNode* block);
  void erase_free(BlockNode* block);
  BlockNode* new_node();
  void recycle_node(BlockNode* node);
  std::size_t free_bytes_on(StreamId stream, Pool pool) const;
  std::size_t largest_free_block() const;
  std::size_t cached_free_bytes() const;
  [[noreturn]] void throw_oom(std::size_t bytes, std::size_t rounded, StreamId stream, TagId tag,
                              const std::string& cause);
  void emit(TraceEventKind kind, std::uint64_t bytes, std::uintptr_t address, StreamId stream, TagId tag,
            std::uint64_t id);

  std::shared_ptr<MemoryResource> upstream_;
  VirtualMemoryResource* vmm_ = nullptr;  // upstream_ when VMM segments are in use
  AllocatorOptions options_;
  std::unique_ptr<AllocationPolicy> policy_;
  std::size_t capacity_ = 0;
  // take_window_peak_allocated: bytes allocated now, and the most since the window began.
  std::size_t window_peak_allocated_ = 0;
  std::size_t window_peak_allocated_max_ = 0;
  StreamRegistry* streams_;

  mutable std::mutex mutex_;
  StatsRecorder stats_;
  FreeIndex free_[2];  // per Pool
  std::unordered_map<std::uintptr_t, BlockNode*> allocated_;
  std::vector<FreeIndex::node_type> spare_free_nodes_;
  std::vector<decltype(allocated_)::node_type> spare_allocated_nodes_;
  std::vector<std::unique_ptr<BlockNode>> nodes_;
  std::vector<BlockNode*> spare_nodes_;
  std::vector<std::unique_ptr<Segment>> segments_;
  // Note [Scanning for releasable segments]: false only while no segment can be released.
  bool may_release_segments_ = false;
  struct Pending {
    StreamEvent event;
    BlockNode* block;
  };
  std::vector<Pending> pending_;
  std::uint64_t next_allocation_id_ = 1;
  std::uint64_t next_segment_id_ = 1;
  TraceEventSink sink_;
};

}  // namespace memtrain::memory
