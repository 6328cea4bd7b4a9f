#include "kernels/cuda/linear.hpp"

#include "kernels/cuda/column_reduce.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/dtype_traits.cuh"
#include "kernels/cuda/matmul.hpp"

namespace memtrain::kernels::gpu {
namespace {

// dbias[c] += sum_n dout[n, c], kColumns columns a block (Note [Deterministic column sums]).
// One thread per column walking all N rows left 16 blocks busy for OC = 4096, and the bias
// gradient took longer than the two GEMMs of the FFN's backward together (H200, N = 4096).
template <class T>
__global__ void column_sum_accumulate(T* dbias, const T* dout, int N, int OC) {
  __shared__ float shared[kRowGroups][kColumns];
  const int c = blockIdx.x * kColumns + threadIdx.x;
  float partial = 0.0f;
  if (c < OC) {
    for (int n = threadIdx.y; n < N; n += kRowGroups) partial += to_float(dout[static_cast<long long>(n) * OC + c]);
  }
  const float s = reduce_row_groups(partial, shared);
  if (threadIdx.y == 0 && c < OC) dbias[c] = from_float<T>(to_float(dbias[c]) + s);
}

}  // namespace

template <class T>
void linear_forward(const KernelContext& ctx, T* out, const T* inp, const T* weight, const T* bias, int N, int C,
                    int OC) {
  // out [N, OC] = inp [N, C] . weight^T, weight stored [OC, C]
  matmul_strided_batched<T>(ctx, out, inp, weight, 1, N, OC, C, false, true, 0, 0, 0, C, C, OC, 1.0f, 0.0f, bias);
}

template <class T>
void linear_backward(const KernelContext& ctx, T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                     const T* weight, int N, int C, int OC) {
  // dinp [N, C] += dout [N, OC] . weight [OC, C]
  if (dinp != nullptr) {
    matmul_strided_batched<T>(ctx, dinp, dout, weight, 1, N, C, OC, false, false, 0, 0, 0, OC, C, C, 1.0f, 1.0f);
  }
  // dweight [OC, C] += dout^T [OC, N] . inp [N, C]
  if (dweight != nullptr) {
    matmul_strided_batched<T>(ctx, dweight, dout, inp, 1, OC, C, N, true, false, 0, 0, 0, OC, C, C, 1.0f, 1.0f);
  }
  if (dbias != nullptr && OC > 0) {
    column_sum_accumulate<<<(OC + kColumns - 1) / kColumns, dim3(kColumns, kRowGroups), 0, ctx.stream>>>(dbias, dout, N,
                                                                                                         OC);
    MEMTRAIN_CUDA_CHECK_LAUNCH();
  }
}

#define MEMTRAIN_INSTANTIATE(T)                                                                           \
  template void linear_forward<T>(const KernelContext&, T*, const T*, const T*, const T*, int, int, int); \
  template void linear_backward<T>(const KernelContext&, T*, T*, T*, const T*, const T*, const T*, int, int, int);
MEMTRAIN_INSTANTIATE(float)
MEMTRAIN_INSTANTIATE(__nv_bfloat16)
MEMTRAIN_INSTANTIATE(__half)
#undef MEMTRAIN_INSTANTIATE

}  // namespace memtrain::kernels::gpu
