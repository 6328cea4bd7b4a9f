#include "runtime/config/device_target.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <stdexcept>
#include <utility>

#include "memory/byte_size.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/printable.hpp"

namespace memtrain::train {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

struct KnownTarget {
  const char* name;
  std::size_t capacity_mib;  // nvidia-smi memory.total
  std::size_t context_mib;   // Note [Target capacities and what is not the allocator's]
  std::size_t cublas_mib;
  std::size_t nccl_mib;  // with world_size > 1
};

constexpr std::array<KnownTarget, 4> kTargets{{
    {"a100-40gb", 40960, 512, 4, 128},
    {"a100-80gb", 81920, 512, 4, 128},
    {"h100-80gb", 81559, 640, 32, 256},
    {"h200-141gb", 143771, 640, 32, 256},
}};

}  // namespace

std::string DeviceTarget::describe() const { return name + " (" + memory::format_byte_size(capacity_bytes) + ")"; }

DeviceTarget DeviceTarget::for_world_size(int world_size) const {
  DeviceTarget t = *this;
  t.non_allocator.nccl_buffers = world_size > 1 ? nccl_bytes_when_distributed : 0;
  return t;
}

DeviceTarget DeviceTarget::limited_by(const MemoryConfig& memory) const {
  DeviceTarget t = *this;
  t.allocator_limit = 0;
  t.allocator_limit_key.clear();
  for (const auto& [bytes, key] :
       {std::pair{memory.limit, "memory.limit"}, std::pair{memory.capacity, "memory.capacity"}}) {
    if (bytes != 0 && (t.allocator_limit == 0 || bytes < t.allocator_limit)) {
      t.allocator_limit = bytes;
      t.allocator_limit_key = key;
    }
  }
  return t;
}

void DeviceTarget::override_non_allocator(std::size_t bytes, const std::string& option) {
  if (bytes >= capacity_bytes) {
    throw ConfigError(option + " " + memory::format_byte_size(bytes) + " is not smaller than the target's " +
                      memory::format_byte_size(capacity_bytes) + " (" + name +
                      "); expected a size below the device's capacity, leaving room for the allocator");
  }
  non_allocator.override_total = bytes;
}

std::optional<DeviceTarget> device_target_for_gpu(const std::string& gpu_name, std::size_t total_bytes) {
  const KnownTarget* best = nullptr;
  std::size_t best_distance = 0;
  for (const auto& k : kTargets) {
    // The family is the name's prefix up to the dash, upper-cased: "a100" -> "A100".
    std::string family(k.name, std::string(k.name).find('-'));
    for (auto& ch : family) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    if (gpu_name.find(family) == std::string::npos) continue;
    const std::size_t capacity = k.capacity_mib << 20;
    const std::size_t distance = capacity > total_bytes ? capacity - total_bytes : total_bytes - capacity;
    if (best == nullptr || distance < best_distance) {
      best = &k;
      best_distance = distance;
    }
  }
  if (best == nullptr) return std::nullopt;
  return parse_device_target(best->name);
}

NonAllocatorBytes training_non_allocator_bytes(const std::string& gpu_name, std::size_t total_bytes, int world_size,
                                               std::size_t fixed_workspace_bytes) {
  NonAllocatorBytes n;
  if (const auto board = device_target_for_gpu(gpu_name, total_bytes)) {
    n = board->for_world_size(world_size).non_allocator;
  } else {
    // A GPU of no known family: the largest estimate of every known board.
    for (const auto& k : kTargets) {
      n.cuda_context = std::max(n.cuda_context, k.context_mib * kMiB);
      if (world_size > 1) n.nccl_buffers = std::max(n.nccl_buffers, k.nccl_mib * kMiB);
    }
  }
  n.cublas_workspace = fixed_workspace_bytes;
  return n;
}

std::string device_target_names() {
  std::string s;
  for (const auto& t : kTargets) s += std::string(t.name) + ", ";
  return s.substr(0, s.size() - 2) + " or a size such as 24GiB";
}

DeviceTarget parse_device_target(const std::string& text, int world_size, const std::string& option) {
  DeviceTarget target;
  target.name = text;
  for (const auto& t : kTargets) {
    if (text != t.name) continue;
    target.capacity_bytes = t.capacity_mib * kMiB;
    target.non_allocator.cuda_context = t.context_mib * kMiB;
    target.non_allocator.cublas_workspace = t.cublas_mib * kMiB;
    target.nccl_bytes_when_distributed = t.nccl_mib * kMiB;
    return target.for_world_size(world_size);
  }
  try {
    target.capacity_bytes = memory::parse_byte_size(text);
  } catch (const std::invalid_argument& e) {
    // A leading digit means a size was meant: its own reason ("does not fit in 64 bits") says
    // more than "unknown target".
    if (!text.empty() && text.front() >= '0' && text.front() <= '9') {
      throw ConfigError(option + " " + printable(text) + ": not a usable size: " + printable(e.what()));
    }
    throw ConfigError(option + " " + printable(text) + ": unknown target; expected " + device_target_names());
  }
  if (target.capacity_bytes == 0) {
    throw ConfigError(option + " " + printable(text) + ": zero bytes; expected " + device_target_names());
  }
  // Plans simulate at most 1 PiB (plan_step's unlimited device), and byte counts from 2^63 up
  // wrapped negative in the report ("needs 2.00 MiB of 0 B").
  constexpr std::size_t kMaxTargetBytes = std::size_t{1} << 50;
  if (target.capacity_bytes > kMaxTargetBytes) {
    throw ConfigError(option + " " + printable(text) + ": above 1 PiB, the largest device a plan simulates; expected " +
                      device_target_names());
  }
  return target;
}

}  // namespace memtrain::train
