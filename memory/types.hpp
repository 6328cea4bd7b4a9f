#pragma once
// Vocabulary types shared by everything in memory/: streams, tags and blocks.
#include <cstddef>
#include <cstdint>

namespace memtrain::memory {

// A stream is a logical queue of work. On CUDA it maps to a cudaStream_t; on CPU it is an id
// whose outstanding work completes when its owner says so (see stream_registry.hpp).
using StreamId = std::uint32_t;
inline constexpr StreamId kDefaultStream = 0;

// An opaque small id for "what this memory is for"; the caller registers its names
// (tag_registry.hpp). memory/ itself knows no model terms.
using TagId = std::uint16_t;
inline constexpr TagId kUntagged = 0;

// What an allocator hands out. `size` is the size the caller asked for (bytes); the allocator
// may have reserved more behind it (rounding, splitting policy).
struct Block {
  void* ptr = nullptr;
  std::size_t size = 0;
  StreamId stream = kDefaultStream;
  TagId tag = kUntagged;
};

}  // namespace memtrain::memory
