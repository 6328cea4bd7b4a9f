#pragma once
// The memory tags of a training step, so that allocator statistics say what the bytes are for
// (design.md, "Stats per device and per tag").
#include "memory/types.hpp"

namespace memtrain::core {

struct Tags {
  memory::TagId parameter;        // weights used by forward and backward (compute dtype)
  memory::TagId master_weight;    // fp32 master copies of 16-bit weights (mixed precision)
  memory::TagId gradient;         // parameter gradients
  memory::TagId optimizer_state;  // AdamW moments
  memory::TagId activation;       // tensors saved by a forward pass for its backward pass
  memory::TagId temporary;        // scratch that dies inside one op or one layer's backward
  memory::TagId communication;    // gradient buckets, compression buffers
  memory::TagId checkpoint;       // checkpoint.async's staging copy of the state (async_checkpointer)
};

// The ids of the tags above, registered by these names ("parameter", "gradient", ...) in
// memory::tag_registry() on first use. Thread-safe (function-local static).
const Tags& tags();

}  // namespace memtrain::core
