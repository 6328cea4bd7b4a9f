#pragma once
#include <stdexcept>

namespace memtrain::memory {

// CUDA is not usable (no driver, no device, a driver too old for the entry points we need) or
// a CUDA call failed for a reason other than a shortage of memory (that is memtrain::OutOfMemory).
// The message names the call, the CUDA error name and its description.
class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace memtrain::memory
