#include "runtime/train/model_memory.hpp"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>

#include "memory/byte_size.hpp"
#include "memory/host_resource.hpp"
#include "memory/host_virtual_memory_resource.hpp"
#include "memory/quota_resource_adaptor.hpp"
#include "memory/quota_virtual_memory_resource.hpp"
#include "memory/shared_ledger.hpp"
#include "memory/simulated_resource.hpp"
#include "memory/simulated_virtual_memory_resource.hpp"
#include "runtime/config/config_alloc_conf.hpp"
#include "runtime/core/errors.hpp"

namespace memtrain::train {
namespace {

std::size_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) {
    throw RuntimeError(
        "memory.limit: cannot read the host's physical memory size (sysconf); set "
        "memory.capacity to size the shared ledger");
  }
  return static_cast<std::size_t>(pages) * static_cast<std::size_t>(page);
}

// memory.max of this process's cgroup (v2), or 0 when none is set ("max") or readable.
std::size_t cgroup_memory_max() {
  std::ifstream cgroup("/proc/self/cgroup");
  for (std::string line; std::getline(cgroup, line);) {
    if (line.rfind("0::", 0) != 0) continue;  // the v2 hierarchy's line
    std::ifstream max_file("/sys/fs/cgroup" + line.substr(3) + "/memory.max");
    std::string text;
    if (!(max_file >> text) || text == "max") return 0;
    try {
      return static_cast<std::size_t>(std::stoull(text));
    } catch (const std::exception&) {
      return 0;
    }
  }
  return 0;
}

// The host's ledger: memory.capacity when given (Note [A reservation needs a capacity] in
// config_validate.cpp), otherwise what this process's cgroup and the machine allow.
std::shared_ptr<memory::SharedLedger> open_ledger(const MemoryConfig& config) {
  const std::size_t capacity = config.capacity != 0 ? config.capacity : host_ledger_capacity();
  try {
    return std::make_shared<memory::SharedLedger>(config.ledger, capacity);
  } catch (const std::invalid_argument& e) {
    throw ConfigError("memory.capacity = " + std::to_string(config.capacity) + ": " + e.what() +
                      "; expected the memory.capacity of the other memtrain jobs with a memory.limit or "
                      "memory.reservation on this host (0 = physical memory), or remove /dev/shm" +
                      memory::SharedLedger::shm_name(config.ledger) + " when none runs");
  } catch (const std::runtime_error& e) {
    throw RuntimeError(std::string("memory.limit/memory.reservation: ") + e.what());
  }
}

memory::JobShare job_share(const MemoryConfig& config, const LedgerJob& job) {
  memory::JobShare share;
  share.name = !job.name.empty() ? job.name : "memtrain pid " + std::to_string(::getpid());
  share.key = job.key;
  share.release_wait = std::chrono::seconds(config.release_timeout);
  share.reservation = config.reservation;
  share.limit = config.limit != 0 ? config.limit : memory::kNoLimit;
  return share;
}

// Joining throws std::invalid_argument (limit below reservation: validate_config rejects it
// first) or std::runtime_error (the reservation does not fit beside the other jobs': a state
// of the host, not of this config).
template <class Make>
auto join(Make make) {
  try {
    return make();
  } catch (const std::invalid_argument& e) {
    throw ConfigError(std::string("memory.reservation: ") + e.what());
  } catch (const std::runtime_error& e) {
    throw RuntimeError(std::string("memory.reservation: ") + e.what());
  }
}

}  // namespace

std::size_t host_ledger_capacity() {
  const std::size_t physical = physical_memory_bytes();
  const std::size_t cgroup = cgroup_memory_max();
  return cgroup != 0 ? std::min(cgroup, physical) : physical;
}

LedgerMembership ledger_membership(const memory::CachingAllocator& allocator) {
  if (const auto* q = dynamic_cast<const memory::QuotaResourceAdaptor*>(&allocator.upstream())) {
    return {q->ledger(), q->job()};
  }
  if (const auto* q = dynamic_cast<const memory::QuotaVirtualMemoryResource*>(&allocator.upstream())) {
    return {q->ledger(), q->job()};
  }
  return {};
}

std::shared_ptr<memory::CachingAllocator> make_model_allocator(const MemoryConfig& config, const LedgerJob& job) {
  const memory::AllocatorOptions options = allocator_options(config);
  // vmm_stitch and expandable segments map pages into reserved address ranges: on the host that
  // is memfd + mmap (HostVirtualMemoryResource); every other policy takes plain aligned memory.
  const bool needs_vmm = memory::needs_virtual_memory(options);
  // A job with a capacity, a limit or a reservation takes its memory through the host's shared
  // ledger, so that memtrain processes on one host keep within their shares and see each other
  // (`memtrain top`). Jobs with none of them do not join it: they would otherwise all have to
  // agree on one ledger capacity.
  const bool quota = config.capacity != 0 || config.limit != 0 || config.reservation != 0;
  std::shared_ptr<memory::SharedLedger> ledger = quota ? open_ledger(config) : nullptr;
  try {
    std::shared_ptr<memory::MemoryResource> upstream;
    if (needs_vmm) {
      auto host = std::make_shared<memory::HostVirtualMemoryResource>();
      if (quota) {
        upstream = join(
            [&] { return std::make_shared<memory::QuotaVirtualMemoryResource>(host, ledger, job_share(config, job)); });
      } else {
        upstream = host;
      }
    } else {
      auto host = std::make_shared<memory::HostResource>(256, config.host_huge_pages);
      if (quota) {
        upstream =
            join([&] { return std::make_shared<memory::QuotaResourceAdaptor>(host, ledger, job_share(config, job)); });
      } else {
        upstream = host;
      }
    }
    return std::make_shared<memory::CachingAllocator>(std::move(upstream), options);
  } catch (const std::invalid_argument& e) {
    throw ConfigError("memory.policy = " + config.policy + ": " + e.what());
  }
}

#if MEMTRAIN_HAVE_CUDA
std::shared_ptr<memory::CachingAllocator> make_cuda_model_allocator(core::CudaDevice& device,
                                                                    const MemoryConfig& config) {
  try {
    return device.make_allocator(allocator_options(config));
  } catch (const std::invalid_argument& e) {
    throw ConfigError("memory.policy = " + config.policy + ": " + e.what());
  }
}
#endif

std::shared_ptr<memory::CachingAllocator> make_dry_run_allocator(const MemoryConfig& config, std::size_t capacity_bytes,
                                                                 const std::string& device_name) {
  memory::AllocatorOptions options = allocator_options(config);
  if (config.limit != 0 && (options.capacity == 0 || config.limit < options.capacity)) {
    options.capacity = config.limit;
  }
  std::shared_ptr<memory::MemoryResource> upstream;
  if (memory::needs_virtual_memory(options)) {
    upstream = std::make_shared<memory::SimulatedVirtualMemoryResource>(capacity_bytes, device_name);
  } else {
    upstream = std::make_shared<memory::SimulatedResource>(capacity_bytes, device_name);
  }
  try {
    return std::make_shared<memory::CachingAllocator>(std::move(upstream), options);
  } catch (const std::invalid_argument& e) {
    throw ConfigError("memory.policy = " + config.policy + ": " + e.what());
  }
}

std::string memory_limit_context(const MemoryConfig& config) {
  if (config.limit == 0) return {};
  return " This job's memory.limit is " + std::to_string(config.limit) + " bytes (" +
         memory::format_byte_size(config.limit) + ").";
}

}  // namespace memtrain::train
