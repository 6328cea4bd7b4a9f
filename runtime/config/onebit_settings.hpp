#pragma once
// 1-bit compression's settings (comms/onebit_compressor.hpp): compression.method onebit, and
// the keys 1-bit Adam's momentum compression reads too.
#include "comms/onebit_compressor.hpp"
#include "runtime/config/config.hpp"

namespace memtrain::train {

// compression.block_size and compression.scale, for the gradient compressor and 1-bit Adam.
comms::OneBitOptions onebit_options(const Config& config);

}  // namespace memtrain::train
