#include "comms/gradient_bucket.hpp"

#include "runtime/core/errors.hpp"
#include "runtime/core/tags.hpp"

namespace memtrain::comms {

std::vector<GradientBucket> make_gradient_buckets(core::Context& ctx,
                                                  const std::vector<GradientSpec>& grads,
                                                  core::DType dtype, std::int64_t bucket_bytes) {
  if (bucket_bytes < 1) {
    throw RuntimeError("make_gradient_buckets: bucket_bytes = " + std::to_string(bucket_bytes) +
                       "; expected >= 1");
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
    layouts.back().push_back(GradientBucketEntry{g.key, g.name, g.shape, filled, numel});
    filled += numel;
  }
  std::vector<GradientBucket> buckets;
  buckets.reserve(layouts.size());
  for (auto& entries : layouts) {
    const std::int64_t n = entries.back().offset + entries.back().numel;
    buckets.push_back(GradientBucket{
        core::Tensor::zeros(ctx, {n}, dtype, core::tags().gradient), std::move(entries)});
  }
  return buckets;
}

}  // namespace memtrain::comms
