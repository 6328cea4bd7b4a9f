#pragma once
// The denominator of the optimizer's bandwidth fraction in `train --profile-ops` (issue 15):
// how many bytes per second this process can move through memory with memcpy on its own
// threads, measured in the same run as the step, so a loaded machine lowers both alike.
#include <cstdint>

namespace memtrain::train {

// Bytes read plus bytes written per second of std::memcpy from one buffer of `buffer_bytes` to
// another (each thread of kernels::num_threads() copies its contiguous slice, as the
// elementwise kernels split their loops): the best of `repeats` timed copies after one untimed
// copy that faults the pages in. A copy of b bytes counts 2 b (the traffic AdamW's GB/s counts
// too: every value read and every value written once). `buffer_bytes` should be well above the
// last-level cache (the default, 256 MiB, is). Allocates and frees 2 * buffer_bytes of host
// memory outside any memtrain allocator. Throws std::invalid_argument if buffer_bytes < 1 or
// repeats < 1.
double measure_memcpy_bandwidth(std::int64_t buffer_bytes = std::int64_t{256} << 20, int repeats = 3);

}  // namespace memtrain::train
