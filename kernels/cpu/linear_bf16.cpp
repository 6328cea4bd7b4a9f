#include "kernels/cpu/linear_bf16.hpp"

#include "kernels/cpu/column_sum.hpp"
#include "kernels/cpu/half_convert.hpp"
#include "kernels/cpu/matmul_bf16.hpp"

namespace memtrain::kernels {

void linear_forward_bf16(float* out, const std::uint16_t* inp, const std::uint16_t* weight, const float* bias, int N,
                         int C, int OC) {
  // [N, C] x [C, OC] with the weight stored [OC, C]
  matmul_bf16(out, /*c_bf16=*/false, inp, weight, bias, N, OC, C, /*trans_a=*/false,
              /*trans_b=*/true, /*accumulate=*/false);
}

void linear_backward_bf16(float* dinp, void* dweight, bool dweight_bf16, bool dweight_accumulate, float* dbias,
                          const std::uint16_t* dout, const std::uint16_t* inp, const std::uint16_t* weight, int N,
                          int C, int OC) {
  if (dinp != nullptr) {
    matmul_bf16(dinp, false, dout, weight, nullptr, N, C, OC, false, false,
                /*accumulate=*/true);  // [N, OC] x [OC, C]
  }
  if (dweight != nullptr) {
    matmul_bf16(dweight, dweight_bf16, dout, inp, nullptr, OC, C, N, /*trans_a=*/true, false,
                dweight_accumulate);  // [OC, N] x [N, C]
  }
  if (dbias != nullptr) {
    detail::for_column_blocks(N, OC, [&](int c0, int c1) {
      for (int n = 0; n < N; ++n) {
        const std::uint16_t* row = dout + static_cast<std::int64_t>(n) * OC;
#pragma omp simd
        for (int c = c0; c < c1; ++c) dbias[c] += bf16_to_float(row[c]);
      }
    });
  }
}

}  // namespace memtrain::kernels
