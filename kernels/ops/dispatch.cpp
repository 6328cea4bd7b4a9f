#include "kernels/ops/dispatch.hpp"

#include <stdexcept>
#include <string>

namespace memtrain::kernels::ops::detail {

bool on_cpu(const OpContext& kc, const char* op) {
  if (kc.device == Device::cpu) return true;
#if MEMTRAIN_HAVE_CUDA
  if (kc.cuda != nullptr) return false;
  throw std::runtime_error(std::string(op) +
                           ": device cuda but the op context has no CUDA kernel context "
                           "(stream, cuBLASLt handle, workspaces)");
#else
  throw std::runtime_error(std::string(op) + ": device cuda but this memtrain was built without CUDA");
#endif
}

bool on_cpu(Device device, const char* op) {
  if (device == Device::cpu) return true;
#if MEMTRAIN_HAVE_CUDA
  static_cast<void>(op);  // named only when refusing
  return false;
#else
  throw std::runtime_error(std::string(op) + ": device cuda but this memtrain was built without CUDA");
#endif
}

void require_cpu(const OpContext& kc, const char* op) {
  if (kc.device == Device::cpu) return;
  throw std::runtime_error(std::string(op) + " has no CUDA kernel yet (issue 14); it runs on the CPU only");
}

}  // namespace memtrain::kernels::ops::detail
