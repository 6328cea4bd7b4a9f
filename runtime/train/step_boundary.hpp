#pragma once
// What a running job may change between two optimizer steps: what costs memory, never what is
// computed (design.md, "Many jobs on one pool": elastic jobs).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "memory/memory_stats.hpp"
#include "models/model_options.hpp"
#include "models/parameter.hpp"

namespace memtrain::train {

// The trainer at a step boundary: after `steps_done()` optimizer steps, before the next one,
// with no activation kept and no gradient pending. RunOptions::at_step_boundary sees it on
// every rank; every rank must make the same changes at the same boundary (they take part in
// the same collectives).
class StepBoundary {
 public:
  virtual ~StepBoundary() = default;

  // Optimizer steps done so far (the resumed step counts), 0 before the first.
  virtual std::int64_t steps_done() const = 0;
  virtual int micro_batch_size() const = 0;
  // The next steps run training.global_batch_size in micro-batches of `micro_batch_size`
  // sequences (more or fewer accumulation steps): the same global batch, the same masks and
  // dropout (keyed by global sample index), so the same update within float rounding of the
  // gradient sums (Note [The global batch does not depend on how it is split]). Evaluations
  // use it too. Throws memtrain::ConfigError when it does not divide this rank's share of the
  // global batch, or on a GPU when it exceeds training.micro_batch_size (the device's fixed
  // workspaces are sized for that).
  virtual void set_micro_batch_size(int micro_batch_size) = 0;
  // Activation checkpointing from the next step on (models::BertForMaskedLM::set_recompute):
  // bitwise the same steps, other memory. num_layers 0 = every layer.
  virtual void set_recompute(models::Recompute recompute, models::RecomputeMethod method, int num_layers) = 0;
  // Returns the allocator's cached, unused segments to its upstream (the host, the GPU, or the
  // ledger's pool) and returns the bytes released (reserved_bytes before minus after).
  virtual std::size_t release_cached_memory() = 0;
  // This rank's allocator statistics (PyTorch's memory_stats names), and a reset of their
  // peaks, so that the steps after a change show what it saved.
  virtual memory::MemoryStats memory_stats() const = 0;
  virtual void reset_peak_memory_stats() = 0;
  // This rank's parameters (its tensor-parallel shards), read-only.
  virtual const std::vector<models::Parameter>& parameters() const = 0;
};

}  // namespace memtrain::train
