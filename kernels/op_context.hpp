#pragma once
// The op API's kernel context (design.md, "kernels/"): which device an op runs on and, on a GPU,
// the stream, cuBLASLt handle and workspaces it runs with. Models hand it to kernels/ops and
// never name a backend; the ops pick kernels/cpu or kernels/cuda by `device`.
#include <cstdint>

namespace memtrain::kernels {

namespace gpu {
struct KernelContext;  // kernels/cuda/kernel_context.hpp (needs the CUDA headers)
}

enum class Device : std::uint8_t { cpu, cuda };

// "cpu" or "cuda".
const char* device_name(Device device);

struct OpContext {
  Device device = Device::cpu;
  // The GPU's stream, BLAS handle and fixed workspaces when device == cuda (owned by whoever
  // built the context, and alive while ops run); null on the CPU.
  const gpu::KernelContext* cuda = nullptr;
};

}  // namespace memtrain::kernels
