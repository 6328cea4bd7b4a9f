#pragma once
// How a flat buffer splits into per-rank blocks: ZeRO-1's optimizer-state shards and the block
// counts of the variable-size collectives (Communicator::reduce_scatter_sum_in_place,
// allgather_in_place).
#include <cstdint>
#include <vector>

namespace memtrain::comms {

// The blocks of n elements over `ranks` (>= 1) as ZeRO-1 shards a bucket: rank r owns
// [r * s, min(n, (r + 1) * s)) with s = ceil(n / ranks), so every rank but the last few holds
// s elements and the blocks need no padding. Throws memtrain::RuntimeError for n < 0 or
// ranks < 1.
std::vector<std::int64_t> shard_counts(std::int64_t n, int ranks);
// The first element of block `rank`: the sum of counts[0, rank).
std::int64_t shard_offset(const std::vector<std::int64_t>& counts, int rank);
// Throws memtrain::RuntimeError naming `what` unless counts has `size` entries in [0, INT_MAX].
void check_block_counts(const std::vector<std::int64_t>& counts, int size, const char* what);

}  // namespace memtrain::comms
