#include "runtime/config/onebit_settings.hpp"

#include "runtime/config/component_registry.hpp"
#include "runtime/config/config_validate.hpp"

namespace memtrain::train {

comms::OneBitOptions onebit_options(const Config& config) {
  const auto& k = config.compression;
  return {k.block_size, k.scale == "rms" ? comms::OneBitScale::rms : comms::OneBitScale::mean_abs};
}

CompressorEntry onebit_compressor_entry() {
  ComponentSettings s;
  s.name = "onebit";
  s.title = "1-bit";
  s.keys = {"compression.block_size", "compression.scale"};
  s.per_rank_state = true;  // worker and server errors
  // Note [1-bit sums in two stages]: a block is whole 16-bit words of signs. Checked whatever
  // is selected: 1-bit Adam reads the key too.
  s.check_values = [](const Config& c) {
    if (c.compression.block_size % 16 != 0) {
      fail_key(c, "compression.block_size", "is not a whole number of 16-bit words of signs",
               "0 (one scale per chunk) or a multiple of 16, such as 256");
    }
  };
  return {std::move(s), [](const Config& c) { return comms::onebit_factory(onebit_options(c)); }};
}

}  // namespace memtrain::train
