#pragma once
// The argument checks the GPU's attention kernels share (unfused and flash), with the CPU
// kernels' messages.
#include <stdexcept>
#include <string>

namespace memtrain::kernels::gpu {

// Throws std::invalid_argument naming `fn` if dropout_p is outside [0, 1) or NH does not divide C.
inline void check_attention_arguments(const char* fn, int C, int NH, float dropout_p) {
  if (!(dropout_p >= 0.0f && dropout_p < 1.0f)) {
    throw std::invalid_argument(std::string(fn) + ": dropout_p = " + std::to_string(dropout_p) +
                                "; expected a probability in [0, 1)");
  }
  if (NH <= 0 || C % NH != 0) {
    throw std::invalid_argument(std::string(fn) + ": num_attention_heads = " + std::to_string(NH) +
                                " does not divide hidden_size = " + std::to_string(C));
  }
}

}  // namespace memtrain::kernels::gpu
