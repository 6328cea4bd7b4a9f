#pragma once
#include "kernels/cpu/scalar.hpp"

namespace memtrain::kernels {

// Row softmax with a key mask (Vaswani et al. 2017 eq. 1; masked positions get probability
// exactly 0, as an additive -inf mask would give): out[r, j] = softmax_j(scale * inp[r, j]) over
// the columns j with key_mask[r / rows_per_mask, j] != 0.
// Shapes: out, inp [rows, cols] (out may alias inp); key_mask [rows / rows_per_mask, cols]
// where 1 = attend, 0 = padding, or nullptr. A row whose keys are all masked outputs zeros.
template <class T>
void masked_softmax_forward(T* out, const T* inp, const NoDeduce<T>* key_mask, int rows, int cols, int rows_per_mask,
                            NoDeduce<T> scale);

// dinp (overwrites; may alias dout) = scale * probs * (dout - sum(dout * probs)), per row.
// Shapes: dinp, dout, probs [rows, cols]. Masked entries (probs 0) get gradient 0.
template <class T>
void masked_softmax_backward(NoDeduce<T>* dinp, const T* dout, const T* probs, int rows, int cols, NoDeduce<T> scale);

namespace detail {
// One row of masked_softmax_forward; key_mask [cols] or nullptr. Single-threaded, for callers
// that already run inside a parallel loop (attention).
template <class T>
void masked_softmax_row(T* out, const T* inp, const T* key_mask, int cols, T scale);
// One row of masked_softmax_backward.
template <class T>
void softmax_backward_row(T* dinp, const T* dout, const T* probs, int cols, T scale);
}  // namespace detail

}  // namespace memtrain::kernels
