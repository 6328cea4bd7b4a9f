#pragma once
#include <cstdint>

#include "kernels/cpu/scalar.hpp"

namespace memtrain::kernels {

// Softmax cross-entropy over the masked positions only, fused with its gradient.
// logits [M, V]; targets [M] in [0, V). Writes dlogits [M, V] (overwrites; may alias logits)
// = (softmax(logits) - onehot(target)) * grad_scale, where grad_scale is 1 / (masked tokens in
// the global batch) so the loss is the global mean however the batch is split.
// Returns the SUM of -log p(target) over the M rows (double); *num_correct (if not null) gets
// the number of rows whose argmax (first maximum, as torch.argmax) equals the target.
// Throws std::out_of_range naming the row on a bad target; nothing is written then.
template <class T>
double softmax_cross_entropy_forward_backward(NoDeduce<T>* dlogits, const T* logits, const std::int32_t* targets, int M,
                                              int V, NoDeduce<T> grad_scale, std::int64_t* num_correct);

// Forward only (eval): returns the summed loss; *num_correct as above.
template <class T>
double softmax_cross_entropy_forward(const T* logits, const std::int32_t* targets, int M, int V,
                                     std::int64_t* num_correct);

}  // namespace memtrain::kernels
