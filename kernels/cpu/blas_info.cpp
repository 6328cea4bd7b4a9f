#include "kernels/cpu/blas_info.hpp"

#include <cblas.h>

#include <array>
#include <string_view>
#include <utility>

namespace memtrain::kernels {

std::string blas_core_name() {
  const char* name = openblas_get_corename();
  return name != nullptr ? std::string(name) : std::string();
}

int fp32_flops_per_cycle(const std::string& core_name) {
  static constexpr std::array<std::pair<std::string_view, int>, 15> kTable{{
      {"SkylakeX", 64},
      {"Cooperlake", 64},
      {"SapphireRapids", 64},
      {"Haswell", 32},
      {"Zen", 32},
      {"Sandybridge", 16},
      {"Prescott", 8},
      {"Core2", 8},
      {"Penryn", 8},
      {"Dunnington", 8},
      {"Nehalem", 8},
      {"Atom", 8},
      {"Opteron", 8},
      {"Opteron_SSE3", 8},
      {"Barcelona", 8},
  }};
  for (const auto& [name, flops] : kTable) {
    if (core_name == name) return flops;
  }
  return 0;
}

}  // namespace memtrain::kernels
