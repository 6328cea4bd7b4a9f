#include "runtime/train/ecc_monitor.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <iostream>

namespace memtrain::train {
namespace {

// NVML's documented ABI (Note [ECC counts through NVML, loaded at run time]).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr int kCorrected = 0;    // NVML_MEMORY_ERROR_TYPE_CORRECTED
constexpr int kUncorrected = 1;  // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr int kVolatile = 0;     // NVML_VOLATILE_ECC

}  // namespace

struct Nvml::Api {
  nvmlReturn_t (*init)();
  nvmlReturn_t (*shutdown)();
  nvmlReturn_t (*device_count)(unsigned int*);
  nvmlReturn_t (*handle_by_index)(unsigned int, nvmlDevice_t*);
  nvmlReturn_t (*total_ecc_errors)(nvmlDevice_t, int, int, unsigned long long*);
  const char* (*error_string)(nvmlReturn_t);
};

std::string Nvml::default_library() {
  const char* env = std::getenv("MEMTRAIN_NVML_LIBRARY");
  return env && *env ? env : "libnvidia-ml.so.1";
}

Nvml::Nvml(const std::string& library) {
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    reason_ = why ? why : "cannot load " + library;
    return;
  }
  auto api = new Api{};
  auto sym = [&](const char* name) { return ::dlsym(handle, name); };
  api->init = reinterpret_cast<decltype(api->init)>(sym("nvmlInit_v2"));
  api->shutdown = reinterpret_cast<decltype(api->shutdown)>(sym("nvmlShutdown"));
  api->device_count = reinterpret_cast<decltype(api->device_count)>(sym("nvmlDeviceGetCount_v2"));
  api->handle_by_index = reinterpret_cast<decltype(api->handle_by_index)>(sym("nvmlDeviceGetHandleByIndex_v2"));
  api->total_ecc_errors = reinterpret_cast<decltype(api->total_ecc_errors)>(sym("nvmlDeviceGetTotalEccErrors"));
  api->error_string = reinterpret_cast<decltype(api->error_string)>(sym("nvmlErrorString"));
  if (!api->init || !api->shutdown || !api->device_count || !api->handle_by_index || !api->total_ecc_errors) {
    reason_ = library + " lacks an NVML entry point (nvmlInit_v2, nvmlDeviceGetTotalEccErrors, ...)";
  } else if (const nvmlReturn_t rc = api->init(); rc != kNvmlSuccess) {
    reason_ = "nvmlInit_v2: " + std::string(api->error_string ? api->error_string(rc) : "error " + std::to_string(rc));
  } else {
    unsigned int n = 0;
    if (api->device_count(&n) != kNvmlSuccess) n = 0;
    devices_ = static_cast<int>(n);
    handle_ = handle;
    api_ = api;
    return;
  }
  delete api;
  ::dlclose(handle);
}

Nvml::~Nvml() {
  if (!handle_) return;
  api_->shutdown();
  delete api_;
  ::dlclose(handle_);
}

std::optional<EccCounts> Nvml::read(int index) const {
  if (!handle_ || index < 0 || index >= devices_) return std::nullopt;
  nvmlDevice_t device = nullptr;
  if (api_->handle_by_index(static_cast<unsigned int>(index), &device) != kNvmlSuccess) return std::nullopt;
  unsigned long long corrected = 0, uncorrected = 0;
  // NVML_ERROR_NOT_SUPPORTED on a device without ECC (or with ECC off): nothing to watch.
  if (api_->total_ecc_errors(device, kCorrected, kVolatile, &corrected) != kNvmlSuccess) return std::nullopt;
  if (api_->total_ecc_errors(device, kUncorrected, kVolatile, &uncorrected) != kNvmlSuccess) return std::nullopt;
  return EccCounts{corrected, uncorrected};
}

EccMonitor::EccMonitor(const Nvml& nvml) : nvml_(nvml) {
  for (int d = 0; d < nvml.device_count(); ++d) last_.push_back(nvml.read(d));
}

int EccMonitor::monitored_devices() const {
  int n = 0;
  for (const auto& c : last_) n += c.has_value();
  return n;
}

std::string EccMonitor::check(comms::Communicator& world, std::int64_t step, std::int64_t since_step) {
  // Per world rank: [rose, device, before, after] of its first device whose count rose.
  const int n = world.size();
  std::vector<std::int64_t> slots(static_cast<std::size_t>(4 * n), 0);
  const auto mine = static_cast<std::size_t>(4 * world.rank());
  for (std::size_t d = 0; d < last_.size(); ++d) {
    if (!last_[d]) continue;
    const auto now = nvml_.read(static_cast<int>(d));
    if (!now) continue;
    if (now->corrected > last_[d]->corrected) {
      std::cerr << "memtrain: health: world rank " << world.rank() << ", GPU " << d << ": "
                << now->corrected - last_[d]->corrected << " corrected ECC errors since step " << since_step
                << " (corrected by the hardware; training continues)\n";
    }
    if (now->uncorrected > last_[d]->uncorrected && slots[mine] == 0) {
      slots[mine] = 1;
      slots[mine + 1] = static_cast<std::int64_t>(d);
      slots[mine + 2] = static_cast<std::int64_t>(last_[d]->uncorrected);
      slots[mine + 3] = static_cast<std::int64_t>(now->uncorrected);
    }
    last_[d] = now;
  }
  if (n > 1) world.allreduce_sum(slots.data(), static_cast<std::int64_t>(slots.size()));
  std::string ranks;
  for (int r = 0; r < n; ++r) {
    const auto* s = &slots[static_cast<std::size_t>(4 * r)];
    if (s[0] == 0) continue;
    if (!ranks.empty()) ranks += ", ";
    ranks += "world rank " + std::to_string(r) + " (GPU " + std::to_string(s[1]) + ": " + std::to_string(s[2]) +
             " -> " + std::to_string(s[3]) + ")";
  }
  if (ranks.empty()) return "";
  return "step " + std::to_string(step) + ": uncorrected ECC errors rose since step " + std::to_string(since_step) +
         " on " + ranks;
}

}  // namespace memtrain::train
