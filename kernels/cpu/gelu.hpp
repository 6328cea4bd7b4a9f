#pragma once
namespace memtrain::kernels {

// Exact GELU, x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)) (Hendrycks & Gimpel 2016; Hugging Face
// BERT's "gelu"), fused with the bias of the preceding linear layer:
// out[n,c] = gelu(inp[n,c] + bias[c]). Shapes: out, inp [N, C]; bias [C] or nullptr.
void bias_gelu_forward(float* out, const float* inp, const float* bias, int N, int C);

// dinp (+=) [N, C] and dbias (+=) [C] (nullptr to skip) from dout [N, C].
void bias_gelu_backward(float* dinp, float* dbias, const float* dout, const float* inp,
                        const float* bias, int N, int C);

}  // namespace memtrain::kernels
