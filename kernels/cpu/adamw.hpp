#pragma once
#include <cstdint>
namespace memtrain::kernels {

// One AdamW step (Loshchilov & Hutter 2019, Algorithm 2; torch.optim.AdamW's formulation):
// param -= lr * weight_decay * param; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// param -= lr * (m / (1 - b1^step)) / (sqrt(v / (1 - b2^step)) + eps). step counts from 1.
// Shapes: param, grad, m, v [n].
void adamw_update(float* param, const float* grad, float* m, float* v, std::int64_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, std::int64_t step);

// Sum of squares of x [n], accumulated in double (for the global gradient norm).
double sum_of_squares(const float* x, std::int64_t n);

// x *= s, x [n]. Used for clipping: s = min(1, max_norm / (global_norm + 1e-6)) as in
// torch.nn.utils.clip_grad_norm_.
void scale_inplace(float* x, std::int64_t n, float s);

}  // namespace memtrain::kernels
