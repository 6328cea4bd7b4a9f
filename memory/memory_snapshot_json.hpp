#pragma once
#include <nlohmann/json.hpp>
#include <vector>

#include "memory/segment_snapshot.hpp"
#include "memory/trace_event.hpp"

namespace memtrain::memory {

// An allocator's state and history in the shape of PyTorch's torch.cuda.memory._snapshot()
// (documented in "Understanding CUDA Memory Usage", pytorch.org/docs/stable/torch_cuda_memory):
//   {"segments": [{"device", "address", "total_size", "allocated_size", "active_size",
//                  "requested_size", "stream", "segment_type", "segment_pool_id",
//                  "is_expandable", "frames": [],
//                  "blocks": [{"address", "size", "requested_size", "state", "frames": []}]}],
//    "device_traces": [[{"action", "addr", "size", "stream", "time_us", "frames": []}]]}
// Block states are PyTorch's ("active_allocated", "active_pending_free", "inactive") plus ours
// ("stitched"). Trace actions: alloc, free_requested + free_completed (for one free),
// segment_alloc, segment_free, segment_map, segment_unmap, oom. Additions PyTorch does not
// have: "tag" (the registered name) on blocks and trace entries, "allocation_id" on trace
// entries, "is_stitched" on segments. time_us counts from the first event. All device
// traces go to device `device`.
nlohmann::json memory_snapshot_json(const std::vector<SegmentSnapshot>& segments, const std::vector<TraceEvent>& events,
                                    int device = 0);

}  // namespace memtrain::memory
