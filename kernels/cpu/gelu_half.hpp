#pragma once
// GELU with its bias on 16-bit storage: the float kernels of gelu.hpp fed a chunk at a time from
// the f16/bf16 tensors (Note [16-bit operands converted a chunk at a time]).
#include <cstdint>

#include "kernels/cpu/half_convert.hpp"

namespace memtrain::kernels {

// Note [16-bit operands converted a chunk at a time]
// A 16-bit tensor used to reach a float kernel as a whole float copy: converted into scratch
// (2 bytes read, 4 written), read by the kernel (4), its output written (4) then rounded into
// the 16-bit result (4 read, 2 written): 20 bytes an element for GELU's forward, against the 4
// that 16-bit storage needs, which is why a bf16 step ran slower than an fp32 one (issue 15).
// Here each thread converts a chunk of up to 2048 elements of a row into stack buffers (8 KiB a
// buffer, L1 or L2: 2048 rather than 256 because Eigen's array expressions cost about 80 ns a
// call beyond their elements), runs the float kernel on it and rounds the chunk out: only the 16-bit tensors travel
// through memory. The arithmetic is the float kernel's on the converted values, rounded to
// nearest even once at the end, as the whole-copy path computed it.

// out [N, C] = round(gelu(float(inp) + bias)) in `format`: bias_gelu_forward<float> on the
// converted inputs. inp, out [N, C] bit patterns of `format`; bias [C] float or nullptr.
// out may alias inp. Never allocates.
void bias_gelu_forward_half(std::uint16_t* out, const std::uint16_t* inp, const float* bias, int N, int C,
                            HalfFormat format);

// bias_gelu_backward<float> on converted dout and inp, for a gradient that starts at zero:
// dinp [N, C] = round(0 + g) in `format` (written, not accumulated) and dbias (+=) [C] float
// (nullptr to skip) summed over rows in row order from the unrounded g, as the float kernel
// sums them. dout, inp [N, C] of `format`; bias [C] float or nullptr. dinp must not alias
// dout or inp. Never allocates.
void bias_gelu_backward_half(std::uint16_t* dinp, float* dbias, const std::uint16_t* dout, const std::uint16_t* inp,
                             const float* bias, int N, int C, HalfFormat format);

}  // namespace memtrain::kernels
