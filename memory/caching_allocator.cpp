#include "memory/caching_allocator.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include "memory/allocation_policy_registry.hpp"
#include "memory/byte_size.hpp"
#include "memory/memory_summary.hpp"
#include "memory/caching_allocator_nodes.hpp"
#include "memory/out_of_memory.hpp"

namespace memtrain::memory {

using allocator_detail::kAlignment;
using allocator_detail::now_ns;

CachingAllocator::CachingAllocator(std::shared_ptr<MemoryResource> upstream, AllocatorOptions options)
    : upstream_(std::move(upstream)), options_(std::move(options)), streams_(&stream_registry()) {
  if (!upstream_) throw std::invalid_argument("CachingAllocator: upstream resource is null");
  validate_options(options_, upstream_->capacity_bytes());
  auto* vmm = dynamic_cast<VirtualMemoryResource*>(upstream_.get());
  const bool needs_vmm = needs_virtual_memory(options_);
  if (needs_vmm && vmm == nullptr) {
    throw std::invalid_argument(
        (policy_registration(options_.policy).maps_pages ? "policy " + options_.policy : "expandable_segments") +
        " needs a virtual-memory upstream (CUDA VMM, host memfd VMM or simulated VMM); '" + upstream_->name() +
        "' cannot map pages");
  }
  if (needs_vmm) vmm_ = vmm;
  policy_ = make_policy(options_, vmm_ ? vmm_->granularity() : 0);
  capacity_ = options_.capacity != 0 ? options_.capacity : upstream_->capacity_bytes();
  if (options_.capacity != 0 && upstream_->capacity_bytes() != 0) {
    capacity_ = std::min(options_.capacity, upstream_->capacity_bytes());
  }
  allocated_.reserve(4096);
}

CachingAllocator::~CachingAllocator() {
  // Stitched ranges first: they map pages that belong to other segments.
  for (auto& s : segments_) {
    if (s->kind == SegmentKind::stitched) {
      try {
        for (std::size_t i = 0, off = 0; i < s->members.size(); ++i) {
          vmm_->unmap(s->base + off, s->members[i]->size);
          off += s->members[i]->size;
        }
        vmm_->release(VirtualRange{s->base, s->reserved_va});
      } catch (...) {}
    }
  }
  for (auto& s : segments_) {
    if (s->kind == SegmentKind::stitched) continue;
    try {
      if (s->kind == SegmentKind::plain) {
        upstream_->deallocate(reinterpret_cast<void*>(s->base), s->size, kAlignment, s->stream);
      } else {
        const std::size_t page = vmm_->granularity();
        for (std::size_t i = 0; i < s->pages.size(); ++i) {
          vmm_->unmap(s->base + i * page, page);
          vmm_->release_physical(s->pages[i]);
        }
        vmm_->release(VirtualRange{s->base, s->reserved_va});
      }
    } catch (...) {
      // A destructor must not throw; the upstream is going away with us in the usual case.
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The hot path.

Block CachingAllocator::allocate(std::size_t bytes, StreamId stream, TagId tag) {
  if (bytes == 0) return Block{nullptr, 0, stream, tag};
  std::lock_guard lock(mutex_);
  if (!pending_.empty()) process_events(/*wait=*/false);
  const std::size_t rounded = policy_->round_size(bytes);
  std::string cause;
  BlockNode* block = nullptr;
  const bool too_large = rounded == 0 || rounded > kLargestAllocatorBytes;
  if (!too_large) block = try_allocate(rounded, policy_->pool_for(rounded), stream, &cause);
  if (block == nullptr) {
    if (too_large) cause = "the request is larger than 4 EiB, the most any allocator here counts";
    throw_oom(bytes, rounded, stream, tag, cause);
  }
  block->state = BlockState::allocated;
  block->requested = bytes;
  block->tag = tag;
  block->allocation_id = next_allocation_id_++;
  if (!spare_allocated_nodes_.empty()) {
    auto node = std::move(spare_allocated_nodes_.back());
    spare_allocated_nodes_.pop_back();
    node.key() = block->address;
    node.mapped() = block;
    allocated_.insert(std::move(node));
  } else {
    allocated_.emplace(block->address, block);
  }
  stats_.block_allocated(block->size, bytes, tag);
  window_peak_allocated_ += block->size;
  window_peak_allocated_max_ = std::max(window_peak_allocated_max_, window_peak_allocated_);
  if (stats_.at_peak_reserved()) {
    stats_.record_fragmentation_at_peak(fragmentation(largest_free_block(), cached_free_bytes()));
  }
  if (sink_) emit(TraceEventKind::alloc, bytes, block->address, stream, tag, block->allocation_id);
  return Block{reinterpret_cast<void*>(block->address), bytes, stream, tag};
}

void CachingAllocator::deallocate(const Block& b) {
  if (b.ptr == nullptr) return;
  std::lock_guard lock(mutex_);
  auto it = allocated_.find(reinterpret_cast<std::uintptr_t>(b.ptr));
  if (it == allocated_.end()) {
    throw std::invalid_argument(
        "CachingAllocator::deallocate: pointer was not allocated by this "
        "allocator or was freed already");
  }
  BlockNode* block = it->second;
  spare_allocated_nodes_.push_back(allocated_.extract(it));
  stats_.block_freed(block->size, block->requested, block->tag);
  window_peak_allocated_ -= std::min(window_peak_allocated_, block->size);
  if (sink_) {
    emit(TraceEventKind::free, block->requested, block->address, block->stream, block->tag, block->allocation_id);
  }
  if (!block->stream_uses.empty()) {
    // Note [Blocks used by other streams]
    // The caller is done with the block, but work queued on the streams recorded with
    // record_stream may still read it. One event per such stream marks that work; the block
    // stays active (not reusable) until all of them complete (PyTorch's insert_events).
    block->state = BlockState::pending;
    for (StreamId s : block->stream_uses) {
      pending_.push_back(Pending{streams_->record_event(s), block});
      ++block->pending_events;
    }
    block->stream_uses.clear();
    return;
  }
  stats_.block_inactive(block->size, block->tag);
  free_block(block);
}

void CachingAllocator::record_stream(const Block& b, StreamId stream) {
  if (b.ptr == nullptr) return;
  std::lock_guard lock(mutex_);
  auto it = allocated_.find(reinterpret_cast<std::uintptr_t>(b.ptr));
  if (it == allocated_.end()) {
    throw std::invalid_argument(
        "CachingAllocator::record_stream: pointer is not a live block of "
        "this allocator");
  }
  BlockNode* block = it->second;
  if (stream == block->stream) return;
  if (std::find(block->stream_uses.begin(), block->stream_uses.end(), stream) == block->stream_uses.end()) {
    block->stream_uses.push_back(stream);
  }
}

CachingAllocator::BlockNode* CachingAllocator::find_free(Pool pool, StreamId stream, std::size_t size) {
  BlockNode probe;
  probe.stream = stream;
  probe.size = size;
  FreeIndex& index = free_[static_cast<int>(pool)];
  auto it = index.lower_bound(&probe);
  if (it == index.end() || (*it)->stream != stream) return nullptr;
  BlockNode* block = *it;
  if (!policy_->may_serve(pool, block->size, size)) return nullptr;
  erase_free(block);
  return block;
}

CachingAllocator::BlockNode* CachingAllocator::carve(BlockNode* block, std::size_t rounded) {
  if (block->size > rounded && policy_->should_split(block->pool, block->size, rounded)) {
    split(block, rounded);
  }
  return block;
}

void CachingAllocator::split(BlockNode* block, std::size_t size) {
  BlockNode* rest = new_node();
  rest->address = block->address + size;
  rest->size = block->size - size;
  rest->stream = block->stream;
  rest->pool = block->pool;
  rest->segment = block->segment;
  rest->state = BlockState::free;
  rest->prev = block;
  rest->next = block->next;
  if (block->next) block->next->prev = rest;
  block->next = rest;
  block->size = size;
  insert_free(rest);
}

void CachingAllocator::insert_free(BlockNode* block) {
  block->state = BlockState::free;
  block->counted_split = block->prev != nullptr || block->next != nullptr;
  if (!block->counted_split) may_release_segments_ = true;  // a whole segment is free now
  if (block->counted_split) stats_.inactive_split_added(block->size);
  FreeIndex& index = free_[static_cast<int>(block->pool)];
  if (!spare_free_nodes_.empty()) {
    auto node = std::move(spare_free_nodes_.back());
    spare_free_nodes_.pop_back();
    node.value() = block;
    block->free_position = index.insert(std::move(node)).position;
  } else {
    block->free_position = index.insert(block).first;
  }
}

void CachingAllocator::erase_free(BlockNode* block) {
  if (block->counted_split) stats_.inactive_split_removed(block->size);
  block->counted_split = false;
  spare_free_nodes_.push_back(free_[static_cast<int>(block->pool)].extract(block->free_position));
}

CachingAllocator::BlockNode* CachingAllocator::new_node() {
  if (spare_nodes_.empty()) {
    nodes_.push_back(std::make_unique<BlockNode>());
    return nodes_.back().get();
  }
  BlockNode* node = spare_nodes_.back();
  spare_nodes_.pop_back();
  return node;
}

void CachingAllocator::recycle_node(BlockNode* node) {
  *node = BlockNode{};
  spare_nodes_.push_back(node);
}

void CachingAllocator::free_block(BlockNode* block) {
  Segment* segment = block->segment;
  if (segment->kind == SegmentKind::stitched) {
    unstitch(segment);
    return;
  }
  if (!policy_->caches()) {
    block->state = BlockState::free;
    release_segment(segment);
    return;
  }
  // Coalesce with free neighbours: the merged block is what best fit sees next.
  if (BlockNode* prev = block->prev; prev != nullptr && prev->state == BlockState::free) {
    erase_free(prev);
    prev->size += block->size;
    prev->next = block->next;
    if (block->next) block->next->prev = prev;
    recycle_node(block);
    block = prev;
  }
  if (BlockNode* next = block->next; next != nullptr && next->state == BlockState::free) {
    erase_free(next);
    block->size += next->size;
    block->next = next->next;
    if (next->next) next->next->prev = block;
    recycle_node(next);
  }
  block->requested = 0;
  block->allocation_id = 0;
  block->tag = kUntagged;
  insert_free(block);
}

// ---------------------------------------------------------------------------------------------
// The slow path: new segments, events, retries, stitching.

CachingAllocator::BlockNode* CachingAllocator::try_allocate(std::size_t rounded, Pool pool, StreamId stream,
                                                            std::string* cause) {
  if (!policy_->caches()) {
    if (BlockNode* b = new_segment(rounded, rounded, pool, stream, true, cause)) return b;
    if (pending_.empty()) return nullptr;
    stats_.alloc_retry();
    process_events(/*wait=*/true);
    return new_segment(rounded, rounded, pool, stream, true, cause);
  }
  if (BlockNode* b = find_free(pool, stream, rounded)) return carve(b, rounded);
  if (policy_->stitches() && pool == Pool::large && free_bytes_on(stream, pool) >= rounded) {
    if (BlockNode* b = stitch(rounded, stream, /*allow_fresh=*/false, cause)) return b;
  }
  const std::size_t segment_bytes = policy_->segment_size(rounded);
  if (segment_bytes == 0) {
    *cause = "the segment size cannot be rounded up without overflow";
    return nullptr;
  }
  collect_garbage(segment_bytes);
  // Expandable segments grow in place over their free end: nothing is stranded to release.
  if (policy_->holds_peak() && !options_.expandable_segments && raises_peak(segment_bytes)) {
    // Another stream's whole cached segment costs no device call; releasing does.
    if (policy_->reclaims_other_streams()) {
      if (BlockNode* b = reclaim_other_stream(rounded, pool, stream)) return carve(b, rounded);
    }
    hold_peak(segment_bytes);
  }
  if (BlockNode* b = new_segment(segment_bytes, rounded, pool, stream, true, cause)) {
    return carve(b, rounded);
  }

  // Note [Retry order before OutOfMemory]
  // One retry, cheapest first: (1) wait for blocks freed while other streams used them (on CPU
  // their owners may simply not have said so yet), (2) take over another stream's whole cached
  // segment (best_fit, vmm_stitch: no device round trip), (3) return every cached whole
  // segment to the upstream and ask again (PyTorch's release_cached_blocks), (4) vmm_stitch:
  // stitch the stream's free pages plus fresh ones. Every step leaves the cache consistent, so
  // an OutOfMemory after them leaves a usable allocator.
  stats_.alloc_retry();
  if (!pending_.empty()) {
    process_events(/*wait=*/true);
    if (BlockNode* b = find_free(pool, stream, rounded)) return carve(b, rounded);
  }
  if (policy_->reclaims_other_streams()) {
    if (BlockNode* b = reclaim_other_stream(rounded, pool, stream)) return carve(b, rounded);
  }
  if (release_cached_segments(SIZE_MAX) > 0) {
    if (BlockNode* b = find_free(pool, stream, rounded)) return carve(b, rounded);
    if (BlockNode* b = new_segment(segment_bytes, rounded, pool, stream, true, cause)) {
      return carve(b, rounded);
    }
  }
  if (policy_->stitches() && pool == Pool::large) {
    if (BlockNode* b = stitch(rounded, stream, /*allow_fresh=*/true, cause)) return b;
  }
  return nullptr;
}

CachingAllocator::BlockNode* CachingAllocator::new_segment(std::size_t bytes, std::size_t rounded, Pool pool,
                                                           StreamId stream, bool allow_expand, std::string* cause) {
  const std::size_t reserved = static_cast<std::size_t>(stats_.reserved().current);
  if (options_.expandable_segments && allow_expand) {
    return grow_expandable(rounded, pool, stream, cause);
  }
  if (capacity_ != 0 && bytes > capacity_ - std::min(reserved, capacity_)) {
    *cause = "a new " + format_byte_size(bytes) + " segment would exceed the capacity";
    return nullptr;
  }
  auto segment = std::make_unique<Segment>();
  segment->size = bytes;
  segment->reserved_va = bytes;
  segment->stream = stream;
  segment->pool = pool;
  segment->id = next_segment_id_++;
  if (vmm_ != nullptr) {
    segment->kind = SegmentKind::mapped;
    const std::size_t page = vmm_->granularity();
    const std::size_t size = round_up_checked(bytes, page);
    if (size == 0) {
      *cause = "the segment size cannot be rounded up to the page size";
      return nullptr;
    }
    segment->size = segment->reserved_va = size;
    VirtualRange range;
    try {
      range = vmm_->reserve(size);
    } catch (const std::exception& e) {
      *cause = e.what();
      return nullptr;
    }
    segment->pages.resize(size / page);
    try {
      map_fresh_pages(*vmm_, range, segment->pages.data());
    } catch (const std::exception& e) {
      *cause = e.what();
      vmm_->release(range);
      return nullptr;
    }
    segment->base = range.address;
  } else {
    try {
      segment->base = reinterpret_cast<std::uintptr_t>(upstream_->allocate(bytes, kAlignment, stream));
    } catch (const OutOfMemory& e) {
      *cause = e.what();
      return nullptr;
    }
  }
  BlockNode* block = new_node();
  block->address = segment->base;
  block->size = segment->size;
  block->stream = stream;
  block->pool = pool;
  block->segment = segment.get();
  block->state = BlockState::free;
  segment->head = block;
  stats_.segment_reserved(segment->size);
  if (sink_) {
    emit(TraceEventKind::segment_alloc, segment->size, segment->base, stream, kUntagged, segment->id);
    if (segment->kind == SegmentKind::mapped) {
      emit(TraceEventKind::segment_map, segment->size, segment->base, stream, kUntagged, segment->id);
    }
  }
  segments_.push_back(std::move(segment));
  return block;
}

std::size_t CachingAllocator::free_bytes_on(StreamId stream, Pool pool) const {
  std::size_t total = 0;
  BlockNode probe;
  probe.stream = stream;
  const FreeIndex& index = free_[static_cast<int>(pool)];
  for (auto it = index.lower_bound(&probe); it != index.end() && (*it)->stream == stream; ++it) {
    total += (*it)->size;
  }
  return total;
}

CachingAllocator::BlockNode* CachingAllocator::reclaim_other_stream(std::size_t rounded, Pool pool, StreamId stream) {
  // The smallest whole cached segment of another stream that fits.
  const FreeIndex& index = free_[static_cast<int>(pool)];
  // Ordered by stream first: when both ends are this stream, no other stream has free blocks.
  if (index.empty() || ((*index.begin())->stream == stream && (*index.rbegin())->stream == stream)) {
    return nullptr;
  }
  BlockNode* best = nullptr;
  for (BlockNode* b : index) {
    if (b->stream == stream || b->prev != nullptr || b->next != nullptr) continue;
    const SegmentKind kind = b->segment->kind;
    if (kind != SegmentKind::plain && kind != SegmentKind::mapped) continue;
    if (b->size < rounded || !policy_->may_serve(pool, b->size, rounded)) continue;
    if (best == nullptr || b->size < best->size) best = b;
  }
  if (best == nullptr) return nullptr;
  erase_free(best);
  // Work queued on the old stream may still touch the memory: wait for it first.
  streams_->synchronize(best->stream);
  best->stream = stream;
  best->segment->stream = stream;
  return best;
}

void CachingAllocator::process_events(bool wait) {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    Pending& p = pending_[i];
    if (wait) streams_->synchronize(p.event);
    if (wait || streams_->query(p.event)) {
      if (--p.block->pending_events == 0) {
        stats_.block_inactive(p.block->size, p.block->tag);
        free_block(p.block);
      }
    } else {
      pending_[kept++] = p;
    }
  }
  pending_.resize(kept);
}

// Note [Scanning for releasable segments]
// Releasing cached memory walks the segments oldest first, and best_fit's hold_peak asks for it
// each time a new segment would raise the peak: while a model is built, every parameter's
// segment does, with nothing free to release. The walk over all S segments each time made
// `memtrain plan` quadratic in the layer count (13.6 s at 192 layers of BERT-Large width, more
// than 50 s at 1024). Only a free block that spans its whole segment can be released (or an
// expandable segment shrunk), and a block becomes one only through insert_free; so a complete
// walk that leaves no such segment behind clears may_release_segments_, insert_free of a whole
// segment and a new expandable segment set it, and while it is clear there is nothing to walk.
std::size_t CachingAllocator::release_cached_segments(std::size_t goal) {
  std::size_t released = 0;
  if (!may_release_segments_) return 0;
  bool kept_releasable = false;  // an expandable segment, or a whole free one left for the goal
  // Oldest segments first (creation order): the ones the current phase of work uses least.
  std::size_t i = 0;
  for (; i < segments_.size() && released < goal;) {
    Segment* s = segments_[i].get();
    if (s->kind == SegmentKind::expandable) {
      kept_releasable = true;
      released += shrink_expandable(s);
      if (s->head == nullptr) {
        vmm_->release(VirtualRange{s->base, s->reserved_va});
        erase_segment(s);
        continue;
      }
      ++i;
      continue;
    }
    BlockNode* b = s->head;
    if (s->kind != SegmentKind::stitched && b->next == nullptr && b->state == BlockState::free) {
      erase_free(b);
      released += s->size;
      release_segment(s);
      continue;  // segments_[i] is now the next segment
    }
    ++i;
  }
  // Stopped at the goal: the segments after i were not looked at.
  if (i == segments_.size() && !kept_releasable) may_release_segments_ = false;
  return released;
}

void CachingAllocator::release_segment(Segment* s) {
  if (s->kind == SegmentKind::plain) {
    upstream_->deallocate(reinterpret_cast<void*>(s->base), s->size, kAlignment, s->stream);
  } else {
    const std::size_t page = vmm_->granularity();
    for (std::size_t p = 0; p < s->pages.size(); ++p) {
      vmm_->unmap(s->base + p * page, page);
      vmm_->release_physical(s->pages[p]);
    }
    vmm_->release(VirtualRange{s->base, s->reserved_va});
    if (sink_) emit(TraceEventKind::segment_unmap, s->size, s->base, s->stream, kUntagged, s->id);
  }
  stats_.segment_released(s->size);
  if (sink_) emit(TraceEventKind::segment_free, s->size, s->base, s->stream, kUntagged, s->id);
  recycle_node(s->head);
  erase_segment(s);
}

void CachingAllocator::erase_segment(Segment* s) {
  auto it =
      std::find_if(segments_.begin(), segments_.end(), [s](const std::unique_ptr<Segment>& p) { return p.get() == s; });
  segments_.erase(it);
}

// Note [Garbage collection threshold]
// As PyTorch's garbage_collection_threshold: when a new segment would take reserved memory past
// threshold x capacity, cached whole segments are released first (oldest first, only as many
// bytes as the overshoot), so a long run does not hold a cache it no longer uses until the
// device is full and every allocation pays for a failed attempt. Without the threshold the
// cache is released only when a request fails.
void CachingAllocator::collect_garbage(std::size_t incoming) {
  if (options_.garbage_collection_threshold <= 0.0 || capacity_ == 0) return;
  const auto limit = static_cast<std::size_t>(options_.garbage_collection_threshold * static_cast<double>(capacity_));
  const auto reserved = static_cast<std::size_t>(stats_.reserved().current);
  if (reserved + incoming <= limit) return;
  release_cached_segments(reserved + incoming - limit);
}

// Note [Holding the peak]: see best_fit_policy.cpp. Releasing only the overshoot keeps as much
// of the cache as the peak allows.
bool CachingAllocator::raises_peak(std::size_t incoming) const {
  const auto reserved = static_cast<std::size_t>(stats_.reserved().current);
  const auto peak = static_cast<std::size_t>(stats_.reserved().peak);
  return incoming > peak - reserved;
}

void CachingAllocator::hold_peak(std::size_t incoming) {
  const auto reserved = static_cast<std::size_t>(stats_.reserved().current);
  const auto peak = static_cast<std::size_t>(stats_.reserved().peak);
  if (incoming > peak - reserved) release_cached_segments(incoming - (peak - reserved));
}

// ---------------------------------------------------------------------------------------------
// Reporting.

std::size_t CachingAllocator::largest_free_block() const {
  std::size_t largest = 0;
  for (const FreeIndex& index : free_) {
    for (const BlockNode* b : index) largest = std::max(largest, b->size);
  }
  return largest;
}

std::size_t CachingAllocator::cached_free_bytes() const {
  std::size_t total = 0;
  for (const FreeIndex& index : free_) {
    for (const BlockNode* b : index) total += b->size;
  }
  return total;
}

void CachingAllocator::throw_oom(std::size_t bytes, std::size_t rounded, StreamId stream, TagId tag,
                                 const std::string& cause) {
  stats_.oom();
  if (sink_) emit(TraceEventKind::oom, bytes, 0, stream, tag, 0);
  const auto allocated = static_cast<std::size_t>(stats_.allocated().current);
  const auto reserved = static_cast<std::size_t>(stats_.reserved().current);
  const std::size_t unallocated = reserved - std::min(reserved, allocated);
  const std::size_t largest = largest_free_block();
  std::string msg = "out of memory on " + upstream_->name() + ": tried to allocate " + format_byte_size(bytes) + "; ";
  // Free is what this allocator could still reserve: its capacity less what it reserved, and
  // no more than a shared upstream (a quota over a ledger) leaves it after the other jobs.
  const std::size_t free_here =
      std::min(capacity_ - std::min(capacity_, reserved), capacity_ != 0 ? upstream_->available_bytes() : 0);
  if (capacity_ != 0) {
    msg += "capacity " + format_byte_size(capacity_) + ", " + format_byte_size(free_here) + " free; ";
  } else {
    msg += "capacity unbounded; ";
  }
  msg += format_byte_size(allocated) + " allocated, " + format_byte_size(unallocated) +
         " reserved but unallocated (largest free block " + format_byte_size(largest) + ").";
  // Note [Out-of-memory hints]
  // The hint names the one change that would have served this request, if there is one:
  // fragmented cached space that is enough in total is what vmm_stitch uses; a caching policy
  // that keeps cached segments past its peak (pytorch) reserves more than best_fit would;
  // otherwise the request is larger than everything that could be freed. The policy is asked
  // what it does, not what it is called.
  const std::size_t free_total = cached_free_bytes() + free_here;
  if (!policy_->stitches() && rounded != 0 && free_total >= rounded && unallocated > 0) {
    msg += " Policy vmm_stitch can use fragmented space.";
  } else if (policy_->caches() && !policy_->holds_peak() && rounded != 0 && largest < rounded && unallocated > 0) {
    msg += " Policy best_fit reserves less unused memory.";
  } else {
    msg += " Free tensors, reduce micro_batch_size or use a larger device.";
  }
  if (!cause.empty()) msg += " (" + cause + ")";
  throw OutOfMemory(msg, bytes);
}

void CachingAllocator::emit(TraceEventKind kind, std::uint64_t bytes, std::uintptr_t address, StreamId stream,
                            TagId tag, std::uint64_t id) {
  sink_(TraceEvent{kind, now_ns(), bytes, address, stream, tag, id});
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_.snapshot(largest_free_block(), cached_free_bytes());
}

MemoryUsage CachingAllocator::usage() const {
  std::lock_guard lock(mutex_);
  const auto reserved = static_cast<std::size_t>(stats_.reserved().current);
  const auto in_use = static_cast<std::size_t>(stats_.active().current + stats_.inactive_split().current);
  return {static_cast<std::size_t>(stats_.allocated().current), reserved, reserved - std::min(reserved, in_use)};
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard lock(mutex_);
  stats_.reset_peaks();
}

std::string CachingAllocator::memory_summary() const {
  const MemoryStats s = stats();
  return format_memory_summary(s, upstream_->name() + ", policy " + std::string(policy_->name()));
}

std::size_t CachingAllocator::release_cached(std::size_t goal) {
  std::lock_guard lock(mutex_);
  if (!pending_.empty()) process_events(/*wait=*/false);
  return release_cached_segments(goal);
}

std::size_t CachingAllocator::take_window_peak_allocated() {
  std::lock_guard lock(mutex_);
  const std::size_t peak = window_peak_allocated_max_;
  window_peak_allocated_max_ = window_peak_allocated_;
  return peak;
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(mutex_);
  if (!pending_.empty()) process_events(/*wait=*/false);
  release_cached_segments(SIZE_MAX);
}

void CachingAllocator::set_event_sink(TraceEventSink sink) {
  std::lock_guard lock(mutex_);
  sink_ = std::move(sink);
}

void CachingAllocator::set_stream_registry(StreamRegistry* registry) {
  std::lock_guard lock(mutex_);
  streams_ = registry != nullptr ? registry : &stream_registry();
}

std::vector<SegmentSnapshot> CachingAllocator::snapshot() const {
  std::lock_guard lock(mutex_);
  std::vector<SegmentSnapshot> out;
  out.reserve(segments_.size());
  for (const auto& s : segments_) {
    if (s->head == nullptr) continue;  // an expandable range with nothing mapped
    SegmentSnapshot seg;
    seg.address = s->base;
    seg.total_size = s->size;
    seg.stream = s->stream;
    seg.segment_type = s->pool == Pool::small ? "small" : "large";
    seg.is_expandable = s->kind == SegmentKind::expandable;
    seg.is_stitched = s->kind == SegmentKind::stitched;
    for (const BlockNode* b = s->head; b != nullptr; b = b->next) {
      BlockSnapshot blk;
      blk.address = b->address;
      blk.size = b->size;
      blk.tag = b->tag;
      switch (b->state) {
        case BlockState::allocated:
          blk.state = "active_allocated";
          blk.requested_size = b->requested;
          blk.allocation_id = b->allocation_id;
          seg.allocated_size += b->size;
          seg.active_size += b->size;
          seg.requested_size += b->requested;
          break;
        case BlockState::pending:
          blk.state = "active_pending_free";
          blk.requested_size = b->requested;
          blk.allocation_id = b->allocation_id;
          seg.active_size += b->size;
          break;
        case BlockState::free:
          blk.state = "inactive";
          break;
        case BlockState::stitched:
          blk.state = "stitched";
          break;
      }
      seg.blocks.push_back(blk);
    }
    out.push_back(std::move(seg));
  }
  std::sort(out.begin(), out.end(),
            [](const SegmentSnapshot& a, const SegmentSnapshot& b) { return a.address < b.address; });
  return out;
}

}  // namespace memtrain::memory
