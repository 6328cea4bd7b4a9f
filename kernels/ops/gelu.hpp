#pragma once
// bias + GELU (Hendrycks and Gimpel 2016, the erf form) through the op API: kernels/cpu/gelu
// (and gelu_half for 16-bit storage) or kernels/cuda/gelu, with their contract.
#include <cstdint>

#include "kernels/half_format.hpp"
#include "kernels/op_context.hpp"

namespace memtrain::kernels::ops {

// out [N, C] = gelu(inp [N, C] + bias [C]) (bias may be null).
void bias_gelu_forward(const OpContext& kc, float* out, const float* inp, const float* bias, int N, int C);

// dinp [N, C] = dout gelu'(inp + bias) (written, not added to; may alias dout or inp); dbias [C]
// += its column sums (may be null).
void bias_gelu_backward(const OpContext& kc, float* dinp, float* dbias, const float* dout, const float* inp,
                        const float* bias, int N, int C);

// The same on 16-bit storage (f16 or bf16 bit patterns, fp32 arithmetic, each result rounded
// once), as kernels/cpu/gelu_half; CPU only so far.
void bias_gelu_forward_half(const OpContext& kc, std::uint16_t* out, const std::uint16_t* inp, const float* bias, int N,
                            int C, HalfFormat format);
void bias_gelu_backward_half(const OpContext& kc, std::uint16_t* dinp, float* dbias, const std::uint16_t* dout,
                             const std::uint16_t* inp, const float* bias, int N, int C, HalfFormat format);

}  // namespace memtrain::kernels::ops
