#include "models/bias_gelu.hpp"

#include <cstdint>

#include "kernels/ops/gelu.hpp"
#include "models/f32_access.hpp"

namespace memtrain::models {

void bias_gelu_forward(PassState& s, core::Tensor& out, const core::Tensor& inp, const Parameter& bias, int N, int C) {
  if (!s.compute()) return;
  const auto b = read_f32(s.ctx, bias.value);  // [C]
  // The chunked 16-bit kernels are the CPU's; a GPU takes float views (Note [Float views convert
  // on the tensor's device]).
  const bool host = s.kc().device == kernels::Device::cpu;
  if (host && is_half(inp.dtype()) && out.dtype() == inp.dtype()) {
    kernels::ops::bias_gelu_forward_half(s.kc(), out.data<std::uint16_t>(), inp.data<std::uint16_t>(), b.get(), N, C,
                                         half_format(inp.dtype()));
    return;
  }
  kernels::ops::bias_gelu_forward(s.kc(), write_f32(s.ctx, out).get(), read_f32(s.ctx, inp).get(), b.get(), N, C);
}

void bias_gelu_backward(PassState& s, core::Tensor& dinp, Parameter& bias, const core::Tensor& dout,
                        const core::Tensor& inp, int N, int C) {
  if (!s.compute()) return;
  auto dbias = update_f32(s.ctx, bias.grad);   // [C]
  const auto b = read_f32(s.ctx, bias.value);  // [C]
  const bool host = s.kc().device == kernels::Device::cpu;
  if (host && is_half(inp.dtype()) && dinp.dtype() == inp.dtype() && dout.dtype() == inp.dtype()) {
    kernels::ops::bias_gelu_backward_half(s.kc(), dinp.data<std::uint16_t>(), dbias.get(), dout.data<std::uint16_t>(),
                                          inp.data<std::uint16_t>(), b.get(), N, C, half_format(inp.dtype()));
    return;
  }
  kernels::ops::bias_gelu_backward(s.kc(), write_f32(s.ctx, dinp).get(), dbias.get(), read_f32(s.ctx, dout).get(),
                                   read_f32(s.ctx, inp).get(), b.get(), N, C);
}

}  // namespace memtrain::models
