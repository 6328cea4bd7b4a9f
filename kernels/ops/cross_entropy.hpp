#pragma once
// Softmax cross-entropy over the masked positions through the op API: kernels/cpu/cross_entropy
// or kernels/cuda/cross_entropy, with their contract.
#include <cstddef>
#include <cstdint>

#include "kernels/op_context.hpp"

namespace memtrain::kernels::ops {

// logits [M, V], targets [M] in [0, V). Writes dlogits [M, V] (overwrites; may alias logits) =
// (softmax(logits) - onehot(target)) grad_scale and returns the SUM of -log p(target) over the
// rows; *num_correct (if not null) gets the rows whose first argmax is the target. Throws
// std::out_of_range naming the row of a bad target; nothing is written then.
double softmax_cross_entropy_forward_backward(const OpContext& kc, float* dlogits, const float* logits,
                                              const std::int32_t* targets, int M, int V, float grad_scale,
                                              std::int64_t* num_correct);

// Bytes of the GPU's fixed scratch (the KernelContext's) that the two ops above need for M rows
// on `device`; 0 on the CPU, whose kernel takes none. Throws std::runtime_error for a GPU in a
// build without CUDA.
std::size_t softmax_cross_entropy_workspace_bytes(Device device, int M);

// Forward only (evaluation): the summed loss and *num_correct as above.
double softmax_cross_entropy_forward(const OpContext& kc, const float* logits, const std::int32_t* targets, int M,
                                     int V, std::int64_t* num_correct);

}  // namespace memtrain::kernels::ops
