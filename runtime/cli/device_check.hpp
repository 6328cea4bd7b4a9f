#pragma once
// Whether the device a config names can run a compute (not dry-run) training job here.
#include <string>

namespace memtrain::cli {

// Returns for "cpu". For "cuda" / "cuda:N" throws ConfigError (exit 2):
//   "no CUDA device: <reason>" when this build has no CUDA, cudaGetDeviceCount fails (no driver:
//   cudaErrorInsufficientDriver) or device N does not exist;
//   "device = cuda:N: ... not built yet" when the GPU exists: the CUDA kernels and the allocator
//   on device memory are built (tests/gpu), the models' dispatch to them is not (issue 14).
// A dry run never calls this: it simulates the device.
void require_usable_device(const std::string& device);

}  // namespace memtrain::cli
