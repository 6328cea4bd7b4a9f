#include "kernels/ops/half_convert.hpp"

#include "kernels/cpu/half_convert.hpp"
#include "kernels/ops/dispatch.hpp"

#if MEMTRAIN_HAVE_CUDA
#include "kernels/cuda/half_convert.hpp"
#endif

namespace memtrain::kernels::ops {

void convert_half_to_float(const OpContext& kc, float* out, const std::uint16_t* in, std::int64_t n, HalfFormat f) {
  if (detail::on_cpu(kc, "convert_half_to_float")) return kernels::convert_half_to_float(out, in, n, f);
#if MEMTRAIN_HAVE_CUDA
  gpu::convert_half_to_float(detail::cuda(kc), out, in, n, f);
#endif
}

void convert_float_to_half(const OpContext& kc, std::uint16_t* out, const float* in, std::int64_t n, HalfFormat f) {
  if (detail::on_cpu(kc, "convert_float_to_half")) return kernels::convert_float_to_half(out, in, n, f);
#if MEMTRAIN_HAVE_CUDA
  gpu::convert_float_to_half(detail::cuda(kc), out, in, n, f);
#endif
}

void round_float_to_half(const OpContext& kc, std::uint16_t* out, float* x, std::int64_t n, HalfFormat f) {
  if (detail::on_cpu(kc, "round_float_to_half")) return kernels::round_float_to_half(out, x, n, f);
#if MEMTRAIN_HAVE_CUDA
  gpu::convert_float_to_half(detail::cuda(kc), out, x, n, f);
  gpu::convert_half_to_float(detail::cuda(kc), x, out, n, f);
#endif
}

}  // namespace memtrain::kernels::ops
