#pragma once
// A picture of an allocator's segments and blocks, in the shape of PyTorch's
// torch.cuda.memory._snapshot()["segments"] so the JSON export and PyTorch's memory visualizer
// can read it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "memory/types.hpp"

namespace memtrain::memory {

struct BlockSnapshot {
  std::uintptr_t address = 0;
  std::size_t size = 0;            // bytes of the block (after rounding/splitting)
  std::size_t requested_size = 0;  // bytes the caller asked for (0 when free)
  // PyTorch's states: "active_allocated" (in use), "active_pending_free" (freed by its owner,
  // still used by another stream), "inactive" (free, cached). Ours adds "stitched": free in
  // its own segment but lent, page by page, to a stitched block (vmm_stitch).
  std::string state;
  TagId tag = kUntagged;
  std::uint64_t allocation_id = 0;  // 0 when free
};

struct SegmentSnapshot {
  std::uintptr_t address = 0;
  std::size_t total_size = 0;      // bytes of memory behind the segment (mapped bytes)
  std::size_t allocated_size = 0;  // bytes in active_allocated blocks
  std::size_t active_size = 0;     // allocated + pending-free bytes
  std::size_t requested_size = 0;
  StreamId stream = kDefaultStream;
  std::string segment_type;           // "small" or "large" (the pool)
  bool is_expandable = false;         // grows in place (expandable_segments)
  bool is_stitched = false;           // a virtual range over pages of other segments (vmm_stitch):
                                      // no memory of its own, total_size counts toward no reserve
  std::vector<BlockSnapshot> blocks;  // address order, covering the segment
};

}  // namespace memtrain::memory
