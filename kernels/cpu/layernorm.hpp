#pragma once
namespace memtrain::kernels {

// LayerNorm over the last dimension (Ba, Kiros, Hinton 2016, eq. 4).
// out = (x - mean) * rstd * gamma + beta, rstd = 1 / sqrt(var + eps); var is the biased variance.
// Shapes: x, out [N, C] row-major; gamma, beta [C]; mean, rstd [N] (saved for the backward pass).
// Never allocates; out must not alias x.
void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* gamma,
                       const float* beta, int N, int C, float eps);

// Accumulates (+=) into dx [N, C], dgamma [C], dbeta [C]. dout [N, C].
void layernorm_backward(float* dx, float* dgamma, float* dbeta, const float* dout, const float* x,
                        const float* gamma, const float* mean, const float* rstd, int N, int C);

}  // namespace memtrain::kernels
