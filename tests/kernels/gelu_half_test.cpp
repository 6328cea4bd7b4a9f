// GELU on 16-bit storage (kernels/cpu/gelu_half.hpp) against the reference it replaces: the
// float kernels run on whole float copies of the converted tensors, their outputs rounded to
// nearest even (models' Note [fp32 arithmetic on 16-bit storage]). Odd shapes (a ragged
// 2048-chunk and SIMD tail), both formats, with and without the bias.
#include "kernels/cpu/gelu_half.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/cpu/gelu.hpp"
#include "tests/kernels/test_util.hpp"

namespace memtrain::kernels {
namespace {

using testing::random_normal;

std::vector<std::uint16_t> to_half(const std::vector<float>& x, HalfFormat f) {
  std::vector<std::uint16_t> h(x.size());
  detail::convert_float_to_half_scalar(h.data(), x.data(), static_cast<std::int64_t>(x.size()), f);
  return h;
}

std::vector<float> to_float(const std::vector<std::uint16_t>& h, HalfFormat f) {
  std::vector<float> x(h.size());
  detail::convert_half_to_float_scalar(x.data(), h.data(), static_cast<std::int64_t>(h.size()), f);
  return x;
}

class GeluHalf : public ::testing::TestWithParam<HalfFormat> {};

TEST_P(GeluHalf, ForwardIsTheFloatKernelOnConvertedValuesRounded) {
  const HalfFormat f = GetParam();
  // C = 3077: rows of a whole and a ragged 2048-element chunk.
  for (const auto& [N, C] : {std::pair{37, 300}, std::pair{5, 3077}}) {
    for (const bool with_bias : {true, false}) {
      const auto inp = to_half(random_normal<float>(static_cast<std::size_t>(N) * C, 5, 2.0), f);  // [N, C]
      const auto bias = random_normal<float>(C, 6, 0.5);                                           // [C]
      const float* b = with_bias ? bias.data() : nullptr;
      std::vector<std::uint16_t> out(inp.size());
      bias_gelu_forward_half(out.data(), inp.data(), b, N, C, f);
      auto ref = to_float(inp, f);
      bias_gelu_forward(ref.data(), ref.data(), b, N, C);
      EXPECT_EQ(out, to_half(ref, f)) << "bias " << with_bias << ", C " << C;
      // In place, as the header allows.
      auto in_place = inp;
      bias_gelu_forward_half(in_place.data(), in_place.data(), b, N, C, f);
      EXPECT_EQ(in_place, out);
    }
  }
}

TEST_P(GeluHalf, BackwardWritesTheRoundedGradientAndSumsTheBiasGradientInFloat) {
  const HalfFormat f = GetParam();
  // C = 4500: column blocks wider than the 2048-element chunks, whole and ragged.
  for (const auto& [N, C] : {std::pair{33, 515}, std::pair{3, 4500}}) {
    const auto dout = to_half(random_normal<float>(static_cast<std::size_t>(N) * C, 7), f);  // [N, C]
    const auto inp = to_half(random_normal<float>(static_cast<std::size_t>(N) * C, 8), f);   // [N, C]
    const auto bias = random_normal<float>(C, 9, 0.5);                                       // [C]
    auto dbias = random_normal<float>(C, 10);                                                // [C], accumulated into
    auto dbias_ref = dbias;
    std::vector<std::uint16_t> dinp(dout.size(), 0x7FC0);  // garbage: written, not accumulated
    bias_gelu_backward_half(dinp.data(), dbias.data(), dout.data(), inp.data(), bias.data(), N, C, f);
    std::vector<float> dinp_ref(dout.size(), 0.0f);
    bias_gelu_backward(dinp_ref.data(), dbias_ref.data(), to_float(dout, f).data(), to_float(inp, f).data(),
                       bias.data(), N, C);
    EXPECT_EQ(dinp, to_half(dinp_ref, f)) << C;
    EXPECT_EQ(dbias, dbias_ref) << C;
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, GeluHalf, ::testing::Values(HalfFormat::f16, HalfFormat::bf16),
                         [](const auto& info) { return info.param == HalfFormat::f16 ? "f16" : "bf16"; });

}  // namespace
}  // namespace memtrain::kernels
