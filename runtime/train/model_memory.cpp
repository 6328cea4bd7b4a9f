#include "runtime/train/model_memory.hpp"

#include <unistd.h>

#include <array>
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

// The first number in `file`, or 0 when it is missing or says "max" (no limit).
std::size_t read_limit(const std::string& file) {
  std::ifstream in(file);
  std::string text;
  if (!(in >> text) || text == "max") return 0;
  try {
    return static_cast<std::size_t>(std::stoull(text));
  } catch (const std::exception&) {
    return 0;
  }
}

// This process's cgroup memory limit, or 0 when none is set or readable: memory.max (cgroup
// v2, the "0::PATH" line of /proc/self/cgroup) or memory.limit_in_bytes (v1, the "memory"
// controller's line; "unlimited" reads as a number near 2^63, which the caller's min with
// the physical memory absorbs). Inside a cgroup namespace the path is "/", hence the mount's
// own file as the fallback.
std::size_t cgroup_memory_max() {
  std::ifstream cgroup("/proc/self/cgroup");
  for (std::string line; std::getline(cgroup, line);) {
    const auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1), path = line.substr(second + 1);
    std::size_t limit = 0;
    if (controllers.empty()) {
      limit = read_limit("/sys/fs/cgroup" + path + "/memory.max");
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      limit = read_limit("/sys/fs/cgroup/memory" + path + "/memory.limit_in_bytes");
      if (limit == 0) limit = read_limit("/sys/fs/cgroup/memory/memory.limit_in_bytes");
    }
    if (limit != 0) return limit;
  }
  return 0;
}

// The host's ledger: memory.capacity when given (Note [A reservation needs a capacity] in
// config_validate.cpp), otherwise what this process's cgroup and the machine allow.
std::shared_ptr<memory::SharedLedger> open_ledger(const MemoryConfig& config, const std::string& name,
                                                  std::size_t default_capacity) {
  const std::size_t capacity = config.capacity != 0 ? config.capacity : default_capacity;
  try {
    return std::make_shared<memory::SharedLedger>(name, capacity);
  } catch (const std::invalid_argument& e) {
    throw ConfigError("memory.capacity = " + std::to_string(config.capacity) + ": " + e.what() +
                      "; expected the memory.capacity of the other memtrain jobs with a memory.limit or "
                      "memory.reservation on this host (0 = physical memory), or remove /dev/shm" +
                      memory::SharedLedger::shm_name(name) + " when none runs");
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

bool joins_ledger(const MemoryConfig& config) {
  // A job with a capacity, a limit or a reservation takes its memory through the shared
  // ledger, so that memtrain processes on one device keep within their shares and see each
  // other (`memtrain top`). Jobs with none of them do not join it: they would otherwise all have
  // to agree on one ledger capacity.
  return config.capacity != 0 || config.limit != 0 || config.reservation != 0;
}

std::shared_ptr<memory::MemoryResource> on_ledger(std::shared_ptr<memory::MemoryResource> upstream,
                                                  const MemoryConfig& config, const LedgerJob& job,
                                                  const std::string& ledger_name, std::size_t default_capacity) {
  if (!joins_ledger(config)) return upstream;
  std::shared_ptr<memory::SharedLedger> ledger = open_ledger(config, ledger_name, default_capacity);
  if (auto vmm = std::dynamic_pointer_cast<memory::VirtualMemoryResource>(upstream)) {
    return join(
        [&] { return std::make_shared<memory::QuotaVirtualMemoryResource>(vmm, ledger, job_share(config, job)); });
  }
  return join([&] { return std::make_shared<memory::QuotaResourceAdaptor>(upstream, ledger, job_share(config, job)); });
}

std::string gpu_ledger_name(const MemoryConfig& config, const std::array<unsigned char, 16>& uuid) {
  std::string hex = "gpu-";
  static const char* digits = "0123456789abcdef";
  for (std::size_t i = 0; i < uuid.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) hex += '-';  // nvidia-smi's GPU-xxxxxxxx-xxxx-... grouping
    hex += digits[uuid[i] >> 4];
    hex += digits[uuid[i] & 15];
  }
  return config.ledger == "cpu" ? hex : config.ledger + "-" + hex;
}

std::shared_ptr<memory::CachingAllocator> make_model_allocator(const MemoryConfig& config, const LedgerJob& job) {
  const memory::AllocatorOptions options = allocator_options(config);
  // vmm_stitch and expandable segments map pages into reserved address ranges: on the host that
  // is memfd + mmap (HostVirtualMemoryResource); every other policy takes plain aligned memory.
  std::shared_ptr<memory::MemoryResource> host;
  if (memory::needs_virtual_memory(options)) {
    host = std::make_shared<memory::HostVirtualMemoryResource>();
  } else {
    host = std::make_shared<memory::HostResource>(256, config.host_huge_pages);
  }
  std::shared_ptr<memory::MemoryResource> upstream =
      joins_ledger(config) ? on_ledger(host, config, job, config.ledger, host_ledger_capacity()) : host;
  try {
    return std::make_shared<memory::CachingAllocator>(std::move(upstream), options);
  } catch (const std::invalid_argument& e) {
    throw ConfigError("memory.policy = " + config.policy + ": " + e.what());
  }
}

#if MEMTRAIN_HAVE_CUDA
std::shared_ptr<memory::CachingAllocator> make_cuda_model_allocator(core::CudaDevice& device,
                                                                    const MemoryConfig& config, const LedgerJob& job) {
  // Note [One ledger per GPU]: keyed by the GPU's UUID, since CUDA_VISIBLE_DEVICES renumbers
  // ordinals (cuda:0 of one job can be cuda:1 of another on the same GPU); its capacity is
  // memory.capacity or the GPU's total memory.
  const auto wrap = [&](std::shared_ptr<memory::MemoryResource> gpu) {
    return on_ledger(std::move(gpu), config, job, gpu_ledger_name(config, device.uuid()), gpu->capacity_bytes());
  };
  try {
    return device.make_allocator(allocator_options(config), wrap);
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
