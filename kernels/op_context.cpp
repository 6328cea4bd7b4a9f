#include "kernels/op_context.hpp"

namespace memtrain::kernels {

const char* device_name(Device device) { return device == Device::cuda ? "cuda" : "cpu"; }

}  // namespace memtrain::kernels
