#pragma once
// The allocator behind every tensor of a training run (design.md, "Memory subsystem").
#include <memory>
#include <string>

#include "memory/caching_allocator.hpp"
#include "runtime/config/config.hpp"
#include "runtime/core/cuda_device.hpp"

namespace memtrain::train {

// A memory::CachingAllocator over memory::HostResource (HostVirtualMemoryResource for
// vmm_stitch and expandable_segments) with the memory.* options (policy,
// max_split_size, garbage_collection_threshold, expandable_segments, capacity).
// With memory.limit or memory.reservation, the upstream is a memory::QuotaResourceAdaptor
// (QuotaVirtualMemoryResource for the virtual-memory policies) charging this process's share
// in the host's memory::SharedLedger of device "cpu", whose capacity is memory.capacity or,
// when 0, the host's physical memory: the allocator then throws memtrain::OutOfMemory when the
// job would pass its limit or take what another job reserved.
// Throws ConfigError naming memory.policy when the allocator refuses the options (an unknown
// policy, options that would do nothing, a virtual-memory policy on a host without one), or
// naming memory.capacity when the host's ledger exists with another capacity; RuntimeError
// when the reservation does not fit beside the other jobs' or the ledger cannot be opened.
std::shared_ptr<memory::CachingAllocator> make_model_allocator(const MemoryConfig& config);

// The allocator of a dry run (`train --dry-run`, `plan`): the same CachingAllocator and
// memory.* options over a simulated device of `capacity_bytes` that hands out addresses only
// (memory::SimulatedResource; memory::SimulatedVirtualMemoryResource for vmm_stitch and
// expandable_segments), named `device_name` in out-of-memory messages. memory.limit and
// memory.reservation do not join the host's ledger (nothing is taken from the host); a
// memory.limit still caps what the allocator may reserve, as memory.capacity does.
// Throws ConfigError naming memory.policy as make_model_allocator does.
std::shared_ptr<memory::CachingAllocator> make_dry_run_allocator(const MemoryConfig& config, std::size_t capacity_bytes,
                                                                 const std::string& device_name);

#if MEMTRAIN_HAVE_CUDA
// A caching allocator over `device`'s GPU memory (core::CudaDevice::make_allocator) with the
// memory.* options (policy, max_split_size, garbage_collection_threshold, expandable_segments,
// capacity); memory.limit and memory.reservation are refused for GPU runs before this
// (validate_cuda_support). Throws ConfigError naming memory.policy as make_model_allocator does.
std::shared_ptr<memory::CachingAllocator> make_cuda_model_allocator(core::CudaDevice& device,
                                                                    const MemoryConfig& config);
#endif

// " This job's memory.limit is <bytes> bytes (<size>)." when memory.limit is set, else "":
// appended to an OutOfMemory message so that it names the key the user can change.
std::string memory_limit_context(const MemoryConfig& config);

}  // namespace memtrain::train
