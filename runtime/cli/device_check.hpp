#pragma once
// Whether the device a config names can run a compute (not dry-run) training job here.
#include <string>

namespace memtrain::cli {

// Returns for "cpu", and for "cuda" / "cuda:N" when that GPU is usable. Otherwise throws
// ConfigError (exit 2) "no CUDA device: <reason>": this build has no CUDA, cudaGetDeviceCount
// fails (no driver: cudaErrorInsufficientDriver) or device N does not exist. What a GPU run
// trains is validate_cuda_support's check (runtime/config/config_validate.hpp). A dry run never
// calls this: it simulates the device.
void require_usable_device(const std::string& device);

}  // namespace memtrain::cli
