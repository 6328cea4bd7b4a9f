#pragma once
namespace memtrain::kernels {

// Row softmax with an additive key mask (Vaswani et al. 2017 eq. 1; masked positions get
// probability 0). Shapes: out, inp [rows, cols]; key_mask [rows / rows_per_mask, cols] where
// 1 = attend, 0 = padding, or nullptr. A row whose keys are all masked outputs zeros.
void masked_softmax_forward(float* out, const float* inp, const float* key_mask, int rows,
                            int cols, int rows_per_mask, float scale);

// dinp (overwrites) = scale * probs * (dout - sum(dout * probs)).
void masked_softmax_backward(float* dinp, const float* dout, const float* probs, int rows,
                             int cols, float scale);

}  // namespace memtrain::kernels
