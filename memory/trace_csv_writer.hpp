#pragma once
#include <ostream>
#include <vector>

#include "memory/trace_event.hpp"

namespace memtrain::memory {

// Writes the alloc and free events as the replay CSV that parse_trace_csv reads (replay.hpp):
// header `op,id,bytes,stream,tag`; alloc rows carry the requested bytes and the tag's name;
// free rows leave bytes and tag empty. id is the allocation_id. A step event becomes the row
// `step,N,,,` (N steps completed; Note [Step boundaries in a trace], replay.hpp). Other events
// are skipped (replay recreates segments under its own policy). Throws std::invalid_argument for a tag
// name containing ',', '#' or a line break (it would not read back).
void write_trace_csv(std::ostream& out, const std::vector<TraceEvent>& events);

}  // namespace memtrain::memory
