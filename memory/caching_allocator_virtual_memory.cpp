// CachingAllocator on a virtual-memory upstream: expandable segments that grow and shrink in
// place, and stitching free blocks of several segments into one range (vmm_stitch).
#include <algorithm>
#include <string>
#include <vector>

#include "memory/byte_size.hpp"
#include "memory/caching_allocator.hpp"
#include "memory/caching_allocator_nodes.hpp"

namespace memtrain::memory {

using allocator_detail::kAlignment;
using allocator_detail::now_ns;

// Note [Expandable segments]
// With expandable_segments each (stream, pool) has one segment: a virtual range as large as
// the capacity, of which only a prefix is mapped. When no cached block fits, the prefix grows
// by the missing pages (fewer if the segment ends in a free block, which the new pages extend),
// so a growing batch size reuses the space of the previous, smaller one instead of stranding it
// in a segment of the old size (PyTorch's Note [Expandable Segments]). Releasing unmaps free
// pages at the end of the mapped prefix.
CachingAllocator::BlockNode* CachingAllocator::grow_expandable(std::size_t rounded, Pool pool, StreamId stream,
                                                               std::string* cause) {
  const std::size_t page = vmm_->granularity();
  Segment* segment = nullptr;
  for (auto& s : segments_) {
    if (s->kind == SegmentKind::expandable && s->stream == stream && s->pool == pool) {
      segment = s.get();
      break;
    }
  }
  if (segment == nullptr) {
    std::size_t va = capacity_ != 0 ? capacity_ : (std::size_t{1} << 40);
    va = round_up_checked(std::max(va, rounded), page);
    auto s = std::make_unique<Segment>();
    try {
      const VirtualRange range = vmm_->reserve(va);
      s->base = range.address;
      s->reserved_va = range.bytes;
    } catch (const std::exception& e) {
      *cause = e.what();
      return nullptr;
    }
    s->kind = SegmentKind::expandable;
    may_release_segments_ = true;  // Note [Scanning for releasable segments]
    s->stream = stream;
    s->pool = pool;
    s->id = next_segment_id_++;
    segment = s.get();
    segments_.push_back(std::move(s));
  }
  BlockNode* tail = segment->head;
  while (tail != nullptr && tail->next != nullptr) tail = tail->next;
  const std::size_t tail_free = (tail != nullptr && tail->state == BlockState::free) ? tail->size : 0;
  if (tail_free >= rounded) {  // large enough, only refused by max_split_size: use it
    erase_free(tail);
    return tail;
  }
  const std::size_t grow = round_up_checked(rounded - std::min(rounded, tail_free), page);
  const std::size_t reserved = static_cast<std::size_t>(stats_.reserved().current);
  if (grow == 0 || grow > segment->reserved_va - segment->size ||
      (capacity_ != 0 && grow > capacity_ - std::min(reserved, capacity_))) {
    *cause = "growing the expandable segment by " + format_byte_size(grow) + " would exceed the capacity";
    return nullptr;
  }
  const std::size_t first_page = segment->pages.size();
  segment->pages.resize(first_page + grow / page);
  try {
    map_fresh_pages(*vmm_, VirtualRange{segment->base + segment->size, grow}, segment->pages.data() + first_page);
  } catch (const std::exception& e) {
    segment->pages.resize(first_page);
    *cause = e.what();
    return nullptr;
  }
  const std::uintptr_t grown_at = segment->base + segment->size;
  segment->size += grow;
  stats_.segment_reserved(grow);
  if (sink_) emit(TraceEventKind::segment_map, grow, grown_at, stream, kUntagged, segment->id);
  if (tail_free != 0) {
    erase_free(tail);
    tail->size += grow;
    return tail;
  }
  BlockNode* block = new_node();
  block->address = grown_at;
  block->size = grow;
  block->stream = stream;
  block->pool = pool;
  block->segment = segment;
  block->state = BlockState::free;
  block->prev = tail;
  if (tail != nullptr) {
    tail->next = block;
  } else {
    segment->head = block;
  }
  return block;
}

CachingAllocator::BlockNode* CachingAllocator::stitch(std::size_t rounded, StreamId stream, bool allow_fresh,
                                                      std::string* cause) {
  const std::size_t page = vmm_->granularity();
  // Largest free page-aligned blocks first: fewest mappings for the bytes.
  std::vector<BlockNode*> members;
  std::size_t total = 0;
  {
    BlockNode probe;  // after every block of this stream
    probe.stream = stream;
    probe.size = SIZE_MAX;
    probe.address = UINTPTR_MAX;
    FreeIndex& index = free_[static_cast<int>(Pool::large)];
    auto it = index.upper_bound(&probe);
    while (total < rounded && it != index.begin()) {
      --it;
      BlockNode* b = *it;
      if (b->stream != stream) break;
      if (b->address % page != 0 || b->size % page != 0 || b->segment->kind == SegmentKind::plain ||
          b->segment->kind == SegmentKind::stitched) {
        continue;
      }
      members.push_back(b);
      total += b->size;
    }
  }
  if (total < rounded && !allow_fresh) return nullptr;
  for (BlockNode* b : members) erase_free(b);
  BlockNode* fresh = nullptr;
  if (total < rounded) {
    fresh = new_segment(rounded - total, rounded - total, Pool::large, stream, false, cause);
    if (fresh == nullptr) {
      for (BlockNode* b : members) free_block(b);
      return nullptr;
    }
    members.push_back(fresh);
    total += fresh->size;
  }
  if (members.size() < 2) {
    // One block is enough after all (only possible with fresh pages): no stitching needed.
    return members.empty() ? nullptr : carve(members.front(), rounded);
  }
  // The last member gives only what is still missing; its rest stays free in its segment.
  const std::size_t excess = total - rounded;
  if (excess > 0) {
    BlockNode* last = members.back();
    split(last, last->size - excess);
    total = rounded;
  }
  VirtualRange range;
  try {
    range = vmm_->reserve(rounded);
  } catch (const std::exception& e) {
    *cause = e.what();
    for (BlockNode* b : members) free_block(b);
    return nullptr;
  }
  std::size_t offset = 0;
  std::size_t mapped_members = 0;
  try {
    for (BlockNode* b : members) {
      const Segment* s = b->segment;
      map_existing_pages(*vmm_, range.address + offset, s->pages.data() + (b->address - s->base) / page,
                         b->size / page);
      offset += b->size;
      ++mapped_members;
    }
  } catch (const std::exception& e) {
    *cause = e.what();
    offset = 0;
    for (std::size_t i = 0; i < mapped_members; ++i) {
      vmm_->unmap(range.address + offset, members[i]->size);
      offset += members[i]->size;
    }
    vmm_->release(range);
    for (BlockNode* b : members) free_block(b);
    return nullptr;
  }
  for (BlockNode* b : members) b->state = BlockState::stitched;
  auto segment = std::make_unique<Segment>();
  segment->base = range.address;
  segment->size = rounded;
  segment->reserved_va = rounded;
  segment->stream = stream;
  segment->pool = Pool::large;
  segment->kind = SegmentKind::stitched;
  segment->id = next_segment_id_++;
  segment->members = std::move(members);
  BlockNode* block = new_node();
  block->address = range.address;
  block->size = rounded;
  block->stream = stream;
  block->pool = Pool::large;
  block->segment = segment.get();
  segment->head = block;
  if (sink_) emit(TraceEventKind::segment_map, rounded, range.address, stream, kUntagged, segment->id);
  segments_.push_back(std::move(segment));
  return block;
}

void CachingAllocator::unstitch(Segment* stitched) {
  std::size_t offset = 0;
  for (BlockNode* member : stitched->members) {
    vmm_->unmap(stitched->base + offset, member->size);
    offset += member->size;
  }
  vmm_->release(VirtualRange{stitched->base, stitched->reserved_va});
  if (sink_) {
    emit(TraceEventKind::segment_unmap, stitched->size, stitched->base, stitched->stream, kUntagged, stitched->id);
  }
  std::vector<BlockNode*> members = std::move(stitched->members);
  recycle_node(stitched->head);
  erase_segment(stitched);
  for (BlockNode* member : members) free_block(member);
}
std::size_t CachingAllocator::shrink_expandable(Segment* s) {
  BlockNode* tail = s->head;
  while (tail != nullptr && tail->next != nullptr) tail = tail->next;
  if (tail == nullptr || tail->state != BlockState::free) return 0;
  const std::size_t page = vmm_->granularity();
  const std::size_t keep = round_up_checked(tail->address - s->base, page);
  if (keep >= s->size) return 0;
  const std::size_t drop = s->size - keep;
  for (std::size_t p = keep / page; p < s->pages.size(); ++p) {
    vmm_->unmap(s->base + p * page, page);
    vmm_->release_physical(s->pages[p]);
  }
  s->pages.resize(keep / page);
  erase_free(tail);
  if (tail->address - s->base == keep) {
    if (tail->prev) tail->prev->next = nullptr;
    if (s->head == tail) s->head = nullptr;
    recycle_node(tail);
  } else {
    tail->size -= drop;
    insert_free(tail);
  }
  s->size = keep;
  stats_.segment_released(drop);
  if (sink_) emit(TraceEventKind::segment_unmap, drop, s->base + keep, s->stream, kUntagged, s->id);
  return drop;
}

}  // namespace memtrain::memory
