#pragma once
#include "kernels/cpu/scalar.hpp"

namespace memtrain::kernels {

// y = x W^T + b (torch.nn.Linear; weight stored [OC, C] as in Hugging Face checkpoints).
// Shapes: out [N, OC]; inp [N, C]; weight [OC, C]; bias [OC] or nullptr.
// One GEMM with beta = 1 onto out pre-filled with the bias (no separate bias pass).
template <class T>
void linear_forward(T* out, const T* inp, const T* weight, const NoDeduce<T>* bias, int N, int C, int OC);

// Gradients ACCUMULATE (+=) into dinp [N, C], dweight [OC, C], dbias [OC]; any may be nullptr
// to skip. dout [N, OC]. dinp += dout W; dweight += dout^T x; dbias += sum over rows of dout.
template <class T>
void linear_backward(NoDeduce<T>* dinp, NoDeduce<T>* dweight, NoDeduce<T>* dbias, const T* dout, const T* inp,
                     const T* weight, int N, int C, int OC);

}  // namespace memtrain::kernels
