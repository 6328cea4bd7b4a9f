#pragma once
// The tensor-parallel group a model's layers split over (Megatron-LM, Shoeybi et al. 2019).
#include <cstdint>
#include <string>

#include "comms/communicator.hpp"

namespace memtrain::models {

// Note [Megatron's f and g]
// Shoeybi et al. 2019 (sec. 3, Figure 3) place two conjugate operators around each split block:
// f enters a column-parallel region (identity forward, all-reduce of the input gradient
// backward), g leaves a row-parallel one (all-reduce of the partial outputs forward, identity
// backward). The layers here are written as explicit forward and backward passes, so f and g
// are the all_reduce calls at those points, each named where it stands. A residual branch's
// gradient flows around the split block; it is counted on rank 0 only before the backward
// all-reduce of f, so that the sum adds it once (the other ranks contribute their shards'
// input gradients alone) without a second buffer.
// Note [Tensor-parallel collectives of 16-bit activations]
// With 16-bit storage every op already works on f32 views of its tensors, converted in a
// Workspace slot outside the allocator (Note [fp32 arithmetic on 16-bit storage]); the layers'
// all-reduces, gathers and reduce-scatters run on those views, so partial sums are added in f32
// and rounded to 16 bits once, as the gradient all-reduce's staging buffer does. Unlike that
// buffer the slots are not allocator memory: they grow during the first step and are reused
// after it (Workspace::reserved_bytes reports them), and a dry run (which converts nothing)
// allocates exactly what a compute run does:
// `tests/train/mpi/tensor_parallel_test.cpp` compares the two traces on every rank.
struct TensorParallel {
  comms::Communicator* group = nullptr;  // null: no tensor parallelism (a group of one)
  // Vocabulary padding under tensor parallelism (Megatron-LM's make_vocab_size_divisible_by):
  // the word table gets rows up to a multiple of this x size().
  int make_vocab_size_divisible_by = 128;
  // Sequence parallelism (Korthikanti et al. 2022, sec. 4.2.2): outside the split attention
  // and MLP, each rank keeps tokens [rank x T / tp, (rank + 1) x T / tp) of every sample
  // (Note [Sequence-parallel regions], sequence_parallel.hpp). Requires size() > 1.
  bool sequence_parallel = false;

  int size() const { return group != nullptr ? group->size() : 1; }
  int rank() const { return group != nullptr ? group->rank() : 0; }
  bool enabled() const { return size() > 1; }
  bool sp() const { return sequence_parallel && enabled(); }

  // In-place sum of x [n] over the group (f's backward, g's forward). No-op for one rank.
  void all_reduce(float* x, std::int64_t n) const {
    if (enabled()) group->allreduce_sum(x, n);
  }

  // The padded vocabulary: vocab_size itself without tensor parallelism (today's shapes, so
  // PyTorch fixtures hold), else the next multiple of make_vocab_size_divisible_by x size().
  std::int64_t padded_vocab_size(std::int64_t vocab_size) const {
    if (!enabled()) return vocab_size;
    const std::int64_t m = std::int64_t{make_vocab_size_divisible_by} * size();
    return (vocab_size + m - 1) / m * m;
  }
};

}  // namespace memtrain::models
