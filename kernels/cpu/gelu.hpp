#pragma once
#include "kernels/cpu/scalar.hpp"

namespace memtrain::kernels {

// Exact GELU, x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)) (Hendrycks & Gimpel 2016; Hugging Face
// BERT's "gelu"), fused with the bias of the preceding linear layer:
// out[n,c] = gelu(inp[n,c] + bias[c]). Shapes: out, inp [N, C]; bias [C] or nullptr.
// out may alias inp. erf and exp are Eigen's vectorized versions (SIMD in float).
template <class T>
void bias_gelu_forward(T* out, const T* inp, const NoDeduce<T>* bias, int N, int C);

// dinp [N, C] = dout gelu'(inp + bias) and dbias (+=) [C] its column sums (nullptr to skip), with
// gelu'(x) = Phi(x) + x * phi(x), phi the standard normal density. dinp is written, not added to:
// its only consumer is the preceding linear's backward, and accumulating made every caller zero
// 12 MB first and the kernel read them back (issue 15). dinp may alias dout or inp.
template <class T>
void bias_gelu_backward(T* dinp, NoDeduce<T>* dbias, const T* dout, const T* inp, const NoDeduce<T>* bias, int N,
                        int C);

}  // namespace memtrain::kernels
