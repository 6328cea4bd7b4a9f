#include "runtime/cli/device_check.hpp"

#include "runtime/core/errors.hpp"

#if MEMTRAIN_HAVE_CUDA
#include "memory/cuda_resource.hpp"
#endif

namespace memtrain::cli {

void require_usable_device(const std::string& device) {
  if (device == "cpu") return;
  const int index = device == "cuda" ? 0 : std::stoi(device.substr(5));  // validated by the loader
#if MEMTRAIN_HAVE_CUDA
  const int count = memory::cuda_device_count();
  if (count == 0) throw ConfigError("no CUDA device: " + memory::cuda_unavailable_reason());
  if (index >= count) {
    throw ConfigError("no CUDA device: device = " + device + " but " + std::to_string(count) + " CUDA device" +
                      (count == 1 ? " is" : "s are") + " visible (CUDA_VISIBLE_DEVICES)");
  }
#else
  (void)index;
  throw ConfigError(
      "no CUDA device: this memtrain was built without CUDA (MEMTRAIN_CUDA=OFF or "
      "nvcc not found at configure time)");
#endif
}

}  // namespace memtrain::cli
