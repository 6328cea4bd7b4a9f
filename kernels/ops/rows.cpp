#include "kernels/ops/rows.hpp"

#include "kernels/cpu/rows.hpp"
#include "kernels/ops/dispatch.hpp"

#if MEMTRAIN_HAVE_CUDA
#include "kernels/cuda/rows.hpp"
#endif

namespace memtrain::kernels::ops {

void add_bias(const OpContext& kc, float* out, const float* bias, std::int64_t N, std::int64_t C) {
  if (detail::on_cpu(kc, "add_bias")) return kernels::add_bias(out, bias, N, C);
#if MEMTRAIN_HAVE_CUDA
  gpu::add_bias(detail::cuda(kc), out, bias, N, C);
#endif
}

void add_inplace(const OpContext& kc, float* y, const float* x, std::int64_t n) {
  if (detail::on_cpu(kc, "add_inplace")) return kernels::add_inplace(y, x, n);
#if MEMTRAIN_HAVE_CUDA
  gpu::add_inplace(detail::cuda(kc), y, x, n);
#endif
}

void gather_rows(const OpContext& kc, void* dst, const void* src, const std::int32_t* rows, std::int64_t M,
                 std::int64_t row_bytes) {
  if (detail::on_cpu(kc, "gather_rows")) return kernels::gather_rows(dst, src, rows, M, row_bytes);
#if MEMTRAIN_HAVE_CUDA
  gpu::gather_rows(detail::cuda(kc), dst, src, rows, M, row_bytes);
#endif
}

void scatter_add_rows(const OpContext& kc, float* dst, const float* src, const std::int32_t* rows, std::int64_t M,
                      std::int64_t C) {
  if (detail::on_cpu(kc, "scatter_add_rows")) return kernels::scatter_add_rows(dst, src, rows, M, C);
#if MEMTRAIN_HAVE_CUDA
  gpu::scatter_add_rows(detail::cuda(kc), dst, src, rows, M, C);
#endif
}

}  // namespace memtrain::kernels::ops
