#include "runtime/train/gradient_allreduce.hpp"

#include <algorithm>

#include "kernels/cpu/half_convert.hpp"
#include "runtime/core/tags.hpp"

namespace memtrain::train {
namespace {

bool is_half(core::DType d) { return d == core::DType::f16 || d == core::DType::bf16; }

}  // namespace

GradientAllReduce::GradientAllReduce(const std::vector<models::Parameter>& params, core::Context& ctx,
                                     comms::Communicator& comm)
    : comm_(comm), dry_run_(ctx.dry_run()) {
  if (comm.size() <= 1) return;
  std::int64_t largest = 0;
  for (const auto& p : params) {
    if (is_half(p.grad.dtype())) largest = std::max(largest, p.grad.numel());
  }
  if (largest == 0) return;
  // Note [Communication buffers are allocated up front]
  staging_ = core::Tensor::empty(ctx, {std::min(largest, kStagingElements)}, core::DType::f32,
                                 core::tags().communication);
}

void GradientAllReduce::sum(std::vector<models::Parameter>& params) {
  if (comm_.size() <= 1 || dry_run_) return;
  for (auto& p : params) {
    if (!is_half(p.grad.dtype())) {
      comm_.allreduce_sum(p.grad.data<float>(), p.grad.numel());
      continue;
    }
    const auto format = p.grad.dtype() == core::DType::f16 ? kernels::HalfFormat::f16 : kernels::HalfFormat::bf16;
    std::uint16_t* g = p.grad.data<std::uint16_t>();
    float* buf = staging_.data<float>();
    const std::int64_t n = p.grad.numel();
    for (std::int64_t lo = 0; lo < n; lo += staging_.numel()) {
      const std::int64_t len = std::min(staging_.numel(), n - lo);
      kernels::convert_half_to_float(buf, g + lo, len, format);
      comm_.allreduce_sum(buf, len);
      kernels::convert_float_to_half(g + lo, buf, len, format);
    }
  }
}

}  // namespace memtrain::train
