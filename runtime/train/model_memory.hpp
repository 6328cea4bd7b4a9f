#pragma once
// The allocator behind every tensor of a training run (design.md, "Memory subsystem").
#include <array>
#include <cstddef>
#include <memory>
#include <string>

#include "memory/caching_allocator.hpp"
#include "memory/shared_ledger.hpp"
#include "runtime/config/config.hpp"
#include "runtime/core/cuda_device.hpp"

namespace memtrain::train {

// Who a process is on its ledger (Note [A job is its run directory], shared_ledger.hpp): the
// job's key (its run directory, absolute) and the name `memtrain top` shows. Empty key: the
// process is a job of its own (named by its pid).
struct LedgerJob {
  std::string key;
  std::string name;
};

// A process's entry in its ledger, for a memory::LedgerAgent: null ledger when the allocator
// is on none.
struct LedgerMembership {
  std::shared_ptr<memory::SharedLedger> ledger;
  memory::JobId job;
};
// The membership of an allocator built by make_model_allocator (its quota upstream's).
LedgerMembership ledger_membership(const memory::CachingAllocator& allocator);

// The capacity of the host's ledger when memory.capacity is 0: the cgroup's memory.max where
// this process's cgroup (v2, /proc/self/cgroup) sets one below the physical memory, otherwise
// the physical memory (sysconf). Bytes. Throws RuntimeError when neither can be read.
std::size_t host_ledger_capacity();

// Whether a job with these memory.* keys joins a shared ledger: memory.capacity, limit or
// reservation set.
bool joins_ledger(const MemoryConfig& config);

// `upstream` charged to `job`'s share in the shared ledger `ledger_name` (created with
// memory.capacity, or `default_capacity` when that is 0) when joins_ledger(config): a
// memory::QuotaVirtualMemoryResource over a virtual-memory upstream, a
// memory::QuotaResourceAdaptor over any other; `upstream` itself otherwise. The same stack for
// the host and for a GPU, so the GPU side is tested over a simulated device. Throws as
// make_model_allocator does for the ledger.
std::shared_ptr<memory::MemoryResource> on_ledger(std::shared_ptr<memory::MemoryResource> upstream,
                                                  const MemoryConfig& config, const LedgerJob& job,
                                                  const std::string& ledger_name, std::size_t default_capacity);

// The ledger of a GPU (Note [One ledger per GPU]): "gpu-" and the UUID's 16 bytes in hex grouped
// 8-4-4-4-12 as nvidia-smi prints them, prefixed by memory.ledger and '-' when it is not the
// default "cpu".
std::string gpu_ledger_name(const MemoryConfig& config, const std::array<unsigned char, 16>& uuid);

// A memory::CachingAllocator over memory::HostResource (HostVirtualMemoryResource for
// vmm_stitch and expandable_segments) with the memory.* options (policy,
// max_split_size, garbage_collection_threshold, expandable_segments, capacity).
// With memory.capacity, memory.limit or memory.reservation, the upstream is a
// memory::QuotaResourceAdaptor (QuotaVirtualMemoryResource for the virtual-memory policies)
// charging `job`'s share in the host's memory::SharedLedger memory.ledger, whose capacity is
// memory.capacity or, when 0, host_ledger_capacity(): the allocator then throws
// memtrain::OutOfMemory when the job would pass its limit or take what another job reserved
// (after asking the others for their cached memory for up to memory.release_timeout seconds).
// Throws ConfigError naming memory.policy when the allocator refuses the options (an unknown
// policy, options that would do nothing, a virtual-memory policy on a host without one), or
// naming memory.capacity when the host's ledger exists with another capacity; RuntimeError
// when the reservation does not fit beside the other jobs' or the ledger cannot be opened.
std::shared_ptr<memory::CachingAllocator> make_model_allocator(const MemoryConfig& config, const LedgerJob& job = {});

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
// capacity); with memory.capacity, limit or reservation it joins the GPU's ledger
// (gpu_ledger_name, on_ledger), whose capacity is memory.capacity or the GPU's total memory.
// Throws ConfigError naming memory.policy as make_model_allocator does.
std::shared_ptr<memory::CachingAllocator> make_cuda_model_allocator(core::CudaDevice& device,
                                                                    const MemoryConfig& config,
                                                                    const LedgerJob& job = {});
#endif

// " This job's memory.limit is <bytes> bytes (<size>)." when memory.limit is set, else "":
// appended to an OutOfMemory message so that it names the key the user can change.
std::string memory_limit_context(const MemoryConfig& config);

}  // namespace memtrain::train
