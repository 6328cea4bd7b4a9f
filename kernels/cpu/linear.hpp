#pragma once
namespace memtrain::kernels {

// y = x W^T + b (torch.nn.Linear; weight stored [OC, C] as in Hugging Face checkpoints).
// Shapes: out [N, OC]; inp [N, C]; weight [OC, C]; bias [OC] or nullptr.
void linear_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                    int C, int OC);

// Gradients ACCUMULATE (+=) into dinp [N, C], dweight [OC, C], dbias [OC]; any may be nullptr
// to skip. dout [N, OC].
void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, int N, int C, int OC);

}  // namespace memtrain::kernels
