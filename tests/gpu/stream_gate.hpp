#pragma once
// A stream held busy until the test lets it go: a kernel spins on a flag in mapped host memory.
// Cross-stream tests need "the other stream has not finished yet" to hold for certain, not for
// as long as a timed sleep happens to last on a loaded machine.
#include <cuda_runtime_api.h>

namespace memtrain::gpu_testing {

class StreamGate {
 public:
  StreamGate();  // throws memory::CudaError
  ~StreamGate();
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;
  // Queues on `stream` a kernel that returns only once open() has been called.
  void close_on(cudaStream_t stream);
  void open();

 private:
  volatile int* flag_ = nullptr;  // mapped pinned host memory
  int* device_flag_ = nullptr;
};

}  // namespace memtrain::gpu_testing
