#include "runtime/train/bf16_gemm_probe.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "kernels/cpu/half_convert.hpp"
#include "kernels/cpu/linear_bf16.hpp"
#include "kernels/cpu/linear_half_weight.hpp"

namespace memtrain::train {
namespace {

using Clock = std::chrono::steady_clock;

// n bf16 values cycling through small multiples of 0.01, as measure_sgemm_flops's operands.
std::vector<std::uint16_t> bf16_values(std::int64_t n, int stride, int period) {
  std::vector<float> f(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) f[i] = static_cast<float>((i * stride) % period - period / 2) * 0.01f;
  std::vector<std::uint16_t> out(f.size());
  kernels::convert_float_to_half(out.data(), f.data(), n, kernels::HalfFormat::bf16);
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One GEMM's operands and both paths over them.
class GemmOperands {
 public:
  explicit GemmOperands(const StepGemm& g)
      : g_(g),
        x_(bf16_values(std::int64_t{g.rows} * g.in, 7, 13)),
        w_(bf16_values(std::int64_t{g.out} * g.in, 5, 11)),
        bias_(static_cast<std::size_t>(g.out), 0.01f),
        x_f32_(x_.size()),
        out_(static_cast<std::size_t>(g.rows) * g.out),
        scratch_(kernels::linear_half_weight_scratch_elements(g.out, g.in)) {}

  // oneDNN on the operands as stored: what Linear runs when PassState::native_bf16_gemm.
  double native_s() {
    const auto t0 = Clock::now();
    kernels::linear_forward_bf16(out_.data(), x_.data(), w_.data(), bias_.data(), g_.rows, g_.in, g_.out);
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }

  // The fp32 path: the input's float view, then sgemm on the weight converted a block at a
  // time (models/linear's blockwise_half_weight branch).
  double fp32_s() {
    const auto t0 = Clock::now();
    kernels::convert_half_to_float(x_f32_.data(), x_.data(), static_cast<std::int64_t>(x_.size()),
                                   kernels::HalfFormat::bf16);
    kernels::linear_forward_half_weight(out_.data(), x_f32_.data(), w_.data(), bias_.data(), g_.rows, g_.in, g_.out,
                                        kernels::HalfFormat::bf16, scratch_.data());
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }

 private:
  StepGemm g_;
  std::vector<std::uint16_t> x_;  // [rows, in] bf16
  std::vector<std::uint16_t> w_;  // [out, in] bf16
  std::vector<float> bias_;       // [out]
  std::vector<float> x_f32_;      // [rows, in]
  std::vector<float> out_;        // [rows, out]
  std::vector<float> scratch_;
};

}  // namespace

std::vector<StepGemm> step_forward_gemms(const Config& config, int tp_size, std::int64_t padded_vocab_size) {
  const auto& m = config.model;
  const int tp = std::max(1, tp_size);
  const std::int64_t tokens = std::int64_t{config.training.micro_batch_size} * config.data.seq_length;
  const int rows = static_cast<int>(std::min<std::int64_t>(tokens, kProbeMaxRows));
  const auto masked_tokens =
      std::llround(static_cast<double>(config.data.mlm_probability) * static_cast<double>(tokens));
  const int masked = static_cast<int>(std::clamp<std::int64_t>(masked_tokens, 1, kProbeMaxRows));
  const int C = m.hidden_size;
  const int L = m.num_hidden_layers;
  return {
      {"attention.qkv", rows, C, 3 * C / tp, L},
      {"attention.out", rows, C / tp, C, L},
      {"mlp.in", rows, C, m.intermediate_size / tp, L},
      {"mlp.out", rows, m.intermediate_size / tp, C, L},
      {"head.transform", masked, C, C, 1},
      {"head.decoder", masked, C, static_cast<int>(padded_vocab_size / tp), 1},
  };
}

Bf16GemmSpeeds measure_bf16_gemm_paths(const std::vector<StepGemm>& gemms, int repeats) {
  if (gemms.empty()) throw std::invalid_argument("measure_bf16_gemm_paths: no GEMMs to measure");
  for (const auto& g : gemms) {
    if (g.rows < 1 || g.in < 1 || g.out < 1 || g.count < 1) {
      throw std::invalid_argument("measure_bf16_gemm_paths: " + g.name + " [" + std::to_string(g.rows) + ", " +
                                  std::to_string(g.in) + "] -> " + std::to_string(g.out) + " x " +
                                  std::to_string(g.count) + "; expected every size >= 1");
    }
  }
  const int n = std::max(1, repeats);
  std::vector<double> native(static_cast<std::size_t>(n), 0.0), fp32(static_cast<std::size_t>(n), 0.0);
  double flops = 0;
  // One GEMM's buffers at a time (the decoder's weight alone is tens of MB).
  for (const auto& g : gemms) {
    GemmOperands op(g);
    op.native_s();  // untimed: oneDNN builds its primitive, OpenBLAS wakes its threads
    op.fp32_s();
    for (int r = 0; r < n; ++r) {
      // Alternated, so that neither path always runs on caches the other warmed.
      if (r % 2 == 0) {
        native[r] += g.count * op.native_s();
        fp32[r] += g.count * op.fp32_s();
      } else {
        fp32[r] += g.count * op.fp32_s();
        native[r] += g.count * op.native_s();
      }
    }
    flops += g.flops();
  }
  return {flops / median(native), flops / median(fp32)};
}

}  // namespace memtrain::train
