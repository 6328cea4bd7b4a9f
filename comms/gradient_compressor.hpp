#pragma once
// What the gradient synchroniser asks of a compressor: one bucket in, its (approximate) sum
// over the group out.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comms/communicator.hpp"
#include "comms/gradient_bucket.hpp"
#include "comms/gradient_sync_stats.hpp"
#include "runtime/core/context.hpp"
#include "runtime/core/tensor.hpp"

namespace memtrain::comms {

// A compressed all-reduce over the buckets it was built for, with whatever state it keeps
// (error feedback, factors) keyed by their layout. Implementations: PowerSgdCompressor
// (powersgd_compressor.hpp) and OneBitCompressor (onebit_compressor.hpp). The sum is a sum,
// not a mean: memtrain's ranks hold gradients already scaled by one over the global token count
// (Note [Buckets overlap backward], gradient_synchronizer.hpp).
class GradientCompressor {
 public:
  virtual ~GradientCompressor() = default;
  // Replaces `data` ([numel of bucket b] f32, laid out as bucket b, this rank's values) by the
  // compressed sum over `group` and updates the state, or, when some rank's values are not
  // finite, by the plain sum with the state left as it was (an fp16 step that overflowed is
  // skipped and must not reach the state). Collective over group: every rank calls it for the
  // same buckets in the same order. `iteration`: the optimizer step. Adds the payload bytes
  // and collectives to `into`. Throws memtrain::RuntimeError when a collective fails.
  virtual void sum(std::size_t b, float* data, Communicator& group, std::int64_t iteration,
                   GradientSyncStats& into) = 0;
  // Bytes of the state and scratch buffers (tag communication, allocated by the constructor).
  virtual std::int64_t state_bytes() const = 0;

  // Note [Compression state in checkpoints]
  // What carries from one step to the next (error feedback, PowerSGD's warm-start Qs and
  // whether each was drawn) is this rank's own: the errors differ between ranks. A checkpoint
  // writes it per rank and a resume copies it back by name, so the resumed run compresses
  // exactly as the uninterrupted one did; scratch buffers are not state. The tensors are
  // handles onto the live buffers (f32), in a fixed order for a given bucket layout.
  struct State {
    std::vector<std::pair<std::string, core::Tensor>> tensors;
    std::vector<std::int32_t> flags;  // PowerSGD: q_drawn per matrix; 1-bit: none
  };
  virtual State state() const = 0;
  // Restores the flags of a checkpoint's state() (the tensors are copied into state()'s
  // handles by the caller). Throws memtrain::RuntimeError when the count differs.
  virtual void set_flags(const std::vector<std::int32_t>& flags) = 0;
};

// Builds a compressor over `buckets` (the synchroniser's, which outlive it) for a group of
// `world` ranks (world > 1), allocating its state and scratch from `ctx` (tag communication).
// Each compressor's file provides one (powersgd_factory, onebit_factory); the synchroniser
// calls it and never names a concrete compressor. Throws what the compressor's constructor
// throws (memtrain::RuntimeError for options it refuses).
using CompressorFactory = std::function<std::unique_ptr<GradientCompressor>(const std::vector<GradientBucket>& buckets,
                                                                            int world, core::Context& ctx)>;

}  // namespace memtrain::comms
