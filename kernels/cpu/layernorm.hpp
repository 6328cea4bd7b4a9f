#pragma once
#include "kernels/cpu/scalar.hpp"

namespace memtrain::kernels {

// LayerNorm over the last dimension (Ba, Kiros, Hinton 2016, eq. 4).
// out = (x - mean) * rstd * gamma + beta, rstd = 1 / sqrt(var + eps); var is the biased variance.
// Shapes: x, out [N, C] row-major; gamma, beta [C]; mean, rstd [N] (saved for the backward pass).
// Never allocates; out must not alias x.
template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* x, const T* gamma, const T* beta, int N, int C,
                       NoDeduce<T> eps);

// Accumulates (+=) into dx [N, C], dgamma [C], dbeta [C] (dgamma/dbeta may be nullptr).
// dout [N, C]. With xhat = (x - mean) * rstd and g = dout * gamma:
// dx = rstd * (g - mean_c(g) - xhat * mean_c(g * xhat)); dgamma = sum_n dout * xhat;
// dbeta = sum_n dout.
template <class T>
void layernorm_backward(T* dx, NoDeduce<T>* dgamma, NoDeduce<T>* dbeta, const T* dout, const T* x, const T* gamma,
                        const T* mean, const T* rstd, int N, int C);

}  // namespace memtrain::kernels
