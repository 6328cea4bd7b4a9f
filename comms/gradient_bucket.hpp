#pragma once
// Flat gradient buffers and what lies in them: the unit of data-parallel gradient
// synchronisation (PyTorch DDP's Reducer buckets).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/core/context.hpp"
#include "runtime/core/dtype.hpp"
#include "runtime/core/tensor.hpp"

namespace memtrain::comms {

// One gradient inside a bucket: elements [offset, offset + numel) of the bucket's buffer.
struct GradientBucketEntry {
  std::size_t key = 0;              // the caller's id of the gradient (a parameter's index)
  std::string name;                 // e.g. bert.encoder.layer.0.attention.self.query.weight
  std::vector<std::int64_t> shape;  // of the gradient
  std::int64_t offset = 0;          // elements from the buffer's start
  std::int64_t numel = 0;
  // The gradient's rows (shape[0]) may become final in two parts: all rows but a few listed
  // ones first, the listed ones later (Note [The tied embedding's rows are summed in two
  // parts], gradient_synchronizer.hpp).
  bool split_rows = false;
};

// A flat buffer of gradients of one dtype (f32, f16 or bf16), tag gradient, and its layout
// in the order the gradients become final.
struct GradientBucket {
  core::Tensor buffer;  // [sum of the entries' numel]
  std::vector<GradientBucketEntry> entries;
};

// What make_gradient_buckets needs of a gradient: its id, name and shape.
struct GradientSpec {
  std::size_t key = 0;
  std::string name;
  std::vector<std::int64_t> shape;
  bool split_rows = false;  // as GradientBucketEntry::split_rows
};

// Packs `grads`, given in the order they become final in backward, into buckets of at most
// `bucket_bytes` bytes each (a gradient larger than that gets a bucket of its own), as PyTorch
// DDP's bucket_cap_mb does: consecutive gradients share a bucket until the next one would
// overflow it. The buckets' buffers are views of one zeroed allocation from ctx under tag
// gradient (Note [One allocation holds every bucket]) of exactly the gradients' bytes (no
// padding). With bucket_bytes <= the
// smallest gradient every gradient is a bucket of its own. Throws memtrain::RuntimeError for
// bucket_bytes < 1 and memtrain::OutOfMemory from the allocator.
std::vector<GradientBucket> make_gradient_buckets(core::Context& ctx, const std::vector<GradientSpec>& grads,
                                                  core::DType dtype, std::int64_t bucket_bytes);

}  // namespace memtrain::comms
