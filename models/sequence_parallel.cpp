#include "models/sequence_parallel.hpp"

#include <cstring>

#include "runtime/core/workspace.hpp"

namespace memtrain::models {
namespace {

// Copies between [B, T, C] and rank blocks [tp, B, T/tp, C]: block r holds tokens
// [r T/tp, (r + 1) T/tp) of every sample. to_blocks: full -> blocks; else blocks -> full.
void permute(float* blocks, float* full, int tp, int B, int T, int C, bool to_blocks) {
  const int Tl = T / tp;
  const std::size_t row = sizeof(float) * static_cast<std::size_t>(Tl) * C;
  for (int r = 0; r < tp; ++r) {
    for (int b = 0; b < B; ++b) {
      float* blk = blocks + ((static_cast<std::int64_t>(r) * B + b) * Tl) * C;
      float* f = full + (static_cast<std::int64_t>(b) * T + std::int64_t{r} * Tl) * C;
      if (to_blocks) {
        std::memcpy(blk, f, row);
      } else {
        std::memcpy(f, blk, row);
      }
    }
  }
}

}  // namespace

void gather_sequence(const PassState& s, const TensorParallel& tp, const float* shard, float* full, int C) {
  if (!s.compute()) return;
  const std::int64_t n = std::int64_t{s.B} * sequence_shard_length(tp, s.T) * C;
  core::Workspace::Lease staging(s.ctx.workspace(), static_cast<std::size_t>(n * tp.size()));
  tp.group->allgather(shard, staging.data(), n);
  permute(staging.data(), full, tp.size(), s.B, s.T, C, /*to_blocks=*/false);
}

void reduce_scatter_sequence(const PassState& s, const TensorParallel& tp, const float* full, float* shard, int C) {
  if (!s.compute()) return;
  const std::int64_t n = std::int64_t{s.B} * sequence_shard_length(tp, s.T) * C;
  core::Workspace::Lease staging(s.ctx.workspace(), static_cast<std::size_t>(n * tp.size()));
  permute(staging.data(), const_cast<float*>(full), tp.size(), s.B, s.T, C, /*to_blocks=*/true);
  tp.group->reduce_scatter_sum(staging.data(), shard, n);
}

}  // namespace memtrain::models
