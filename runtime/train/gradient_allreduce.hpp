#pragma once
// The data-parallel gradient sum of a step, for f32 and 16-bit gradients.
#include <cstdint>
#include <vector>

#include "comms/communicator.hpp"
#include "models/parameter.hpp"
#include "runtime/core/context.hpp"
#include "runtime/core/tensor.hpp"

namespace memtrain::train {

// Sums every parameter's gradient over the ranks of `comm` (every rank gets the sum).
// f32 gradients are reduced in place. 16-bit gradients go through an f32 staging buffer of
// kStagingElements floats (tag communication): converted in, summed in f32, rounded back to
// nearest even, so the sum of N ranks is rounded once rather than at every hop.
//
// Note [Communication buffers are allocated up front]
// The staging buffer is allocated by the constructor, before the first step, and kept: a
// buffer allocated inside the step by a communication path would make the allocation trace
// depend on when communication happens, and the dry run (which does not communicate) must
// reproduce the compute run's trace event for event (issue 4). With one rank or only f32
// gradients there is nothing to stage and nothing is allocated.
class GradientAllReduce {
 public:
  static constexpr std::int64_t kStagingElements = std::int64_t{1} << 20;  // 4 MiB of f32

  GradientAllReduce(const std::vector<models::Parameter>& params, core::Context& ctx,
                    comms::Communicator& comm);

  // Sums the gradients of `params` (the same list, order and shapes as at construction) over
  // the ranks. No-op with one rank, and in a dry run (no memory may be touched).
  void sum(std::vector<models::Parameter>& params);

  // Bytes of the staging buffer (0 when none is needed).
  std::size_t staging_bytes() const { return staging_.defined() ? staging_.nbytes() : 0; }

 private:
  comms::Communicator& comm_;
  bool dry_run_;
  core::Tensor staging_;  // [min(kStagingElements, largest 16-bit gradient)] f32
};

}  // namespace memtrain::train
