#pragma once
#include <string>
#include <string_view>

#include "memory/memory_stats.hpp"

namespace memtrain::memory {

// A readable table of `stats`, laid out like torch.cuda.memory_summary(): one row per counter
// (allocated, active, requested, reserved, non-releasable = inactive_split) with current, peak,
// total allocated and total freed, then one row per tag (names from tag_registry()), then the
// event counts, fragmentation and utilization. `title` names the device and policy.
std::string format_memory_summary(const MemoryStats& stats, std::string_view title);

}  // namespace memtrain::memory
