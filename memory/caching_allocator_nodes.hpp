#pragma once
// Private to the CachingAllocator implementation (caching_allocator*.cpp): the block and
// segment records behind its free index, shared by the core file and the virtual-memory file.
#include <chrono>
#include <cstdint>
#include <set>
#include <vector>

#include "memory/caching_allocator.hpp"

namespace memtrain::memory {

enum class BlockState : unsigned char { free, allocated, pending, stitched };

struct CachingAllocator::BlockNode {
  std::uintptr_t address = 0;
  std::size_t size = 0;
  std::size_t requested = 0;
  StreamId stream = kDefaultStream;
  TagId tag = kUntagged;
  Pool pool = Pool::large;
  BlockState state = BlockState::free;
  bool counted_split = false;                                // counted in inactive_split_bytes while free
  std::set<BlockNode*, BlockOrder>::iterator free_position;  // valid while free and indexed
  Segment* segment = nullptr;
  BlockNode* prev = nullptr;  // address neighbours inside the segment
  BlockNode* next = nullptr;
  std::uint64_t allocation_id = 0;
  std::uint32_t pending_events = 0;
  std::vector<StreamId> stream_uses;  // record_stream; empty on the common path
};

enum class SegmentKind : unsigned char {
  plain,       // one upstream allocation
  mapped,      // a reserved range with one physical chunk per page
  expandable,  // like mapped, growing in place at its end
  stitched,    // a range mapping pages of free blocks of other segments (vmm_stitch)
};

struct CachingAllocator::Segment {
  std::uintptr_t base = 0;
  std::size_t size = 0;         // bytes with memory behind them (mapped)
  std::size_t reserved_va = 0;  // bytes of address space (mapped/expandable/stitched)
  StreamId stream = kDefaultStream;
  Pool pool = Pool::large;
  SegmentKind kind = SegmentKind::plain;
  std::uint64_t id = 0;
  BlockNode* head = nullptr;
  std::vector<PhysicalHandle> pages;  // mapped, expandable: one chunk per page
  std::vector<BlockNode*> members;    // stitched: the source blocks, in mapping order
};

inline bool CachingAllocator::BlockOrder::operator()(const BlockNode* a, const BlockNode* b) const {
  if (a->stream != b->stream) return a->stream < b->stream;
  if (a->size != b->size) return a->size < b->size;
  return a->address < b->address;
}

namespace allocator_detail {

inline constexpr std::size_t kAlignment = 256;

inline std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

}  // namespace allocator_detail

}  // namespace memtrain::memory
