#include "comms/gradient_bucket.hpp"

#include "runtime/core/errors.hpp"
#include "runtime/core/tags.hpp"

namespace memtrain::comms {

std::vector<GradientBucket> make_gradient_buckets(core::Context& ctx, const std::vector<GradientSpec>& grads,
                                                  core::DType dtype, std::int64_t bucket_bytes) {
  if (bucket_bytes < 1) {
    throw RuntimeError("make_gradient_buckets: bucket_bytes = " + std::to_string(bucket_bytes) + "; expected >= 1");
  }
  const auto element = static_cast<std::int64_t>(core::dtype_size(dtype));
  std::vector<std::vector<GradientBucketEntry>> layouts;
  std::int64_t filled = 0;  // elements in the last layout
  for (const auto& g : grads) {
    std::int64_t numel = 1;
    for (std::int64_t d : g.shape) numel *= d;
    if (layouts.empty() || (filled > 0 && (filled + numel) * element > bucket_bytes)) {
      layouts.emplace_back();
      filled = 0;
    }
    layouts.back().push_back(GradientBucketEntry{g.key, g.name, g.shape, filled, numel, g.split_rows});
    filled += numel;
  }
  // Note [One allocation holds every bucket]
  // The buckets are views of one flat buffer, as Megatron-LM's grad buffer: one allocation of
  // exactly the gradients' bytes. Dozens of separate bucket-sized blocks would each be rounded
  // up by the allocator (PyTorch's rule rounds a large block to 2 MiB), and those remainders
  // showed up as reserved-but-unallocated bytes at every peak.
  std::int64_t total = 0;
  for (const auto& entries : layouts) total += entries.back().offset + entries.back().numel;
  const core::Tensor storage = core::Tensor::zeros(ctx, {total}, dtype, core::tags().gradient);
  std::vector<GradientBucket> buckets;
  buckets.reserve(layouts.size());
  std::int64_t at = 0;
  for (auto& entries : layouts) {
    const std::int64_t n = entries.back().offset + entries.back().numel;
    core::Tensor view = core::Tensor::unbound({n}, dtype);
    view.bind(storage, at);
    at += n;
    buckets.push_back(GradientBucket{std::move(view), std::move(entries)});
  }
  return buckets;
}

}  // namespace memtrain::comms
