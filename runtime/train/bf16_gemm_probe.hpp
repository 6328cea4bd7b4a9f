#pragma once
// The measurement behind precision.bf16_gemm: auto (Note [bf16_gemm: auto measures the step's
// GEMMs], bf16_gemm_choice.hpp): the forward GEMMs of one micro-batch of this job, run through
// both CPU paths of a bf16 Linear.
#include <string>
#include <vector>

#include "runtime/config/config.hpp"

namespace memtrain::train {

// One GEMM of a training step's forward pass: out [rows, out] = in [rows, in] weight [out, in]^T
// + bias [out], run `count` times per micro-batch (once per encoder layer, or once).
struct StepGemm {
  std::string name;  // "attention.qkv", "attention.out", "mlp.in", "mlp.out", "head.transform", "head.decoder"
  int rows = 0;
  int in = 0;
  int out = 0;
  int count = 1;
  double flops() const { return 2.0 * rows * static_cast<double>(in) * out * count; }
};

// Rows of a probed GEMM are capped at this: per FLOP a GEMM this tall runs as fast as a taller
// one, and the probe of a large model stays within seconds (Note [bf16_gemm: auto measures
// the step's GEMMs]).
inline constexpr int kProbeMaxRows = 1024;

// The forward GEMMs of one micro-batch on one rank of `config`'s job with `tp_size`
// tensor-parallel ranks: per layer [B T, C] -> 3C/tp (QKV), [B T, C/tp] -> C (attention out),
// [B T, C] -> I/tp and [B T, I/tp] -> C (MLP); the MLM head's transform [M, C] -> C and
// decoder [M, C] -> Vp/tp on the M = mlm_probability x B T masked rows (it runs there only).
// B = training.micro_batch_size, T = data.seq_length, C = hidden_size, I = intermediate_size,
// Vp = the vocabulary padded as the model pads it; rows capped at kProbeMaxRows.
std::vector<StepGemm> step_forward_gemms(const Config& config, int tp_size, std::int64_t padded_vocab_size);

// FLOP/s of the two CPU paths of a bf16 Linear on `gemms`, each GEMM weighted by its count.
struct Bf16GemmSpeeds {
  double native_flops = 0;  // oneDNN's bf16 matmul on bf16 operands (kernels::linear_forward_bf16)
  double fp32_flops = 0;    // the input converted to float, then sgemm with the weight converted
                            // a block at a time (kernels::linear_forward_half_weight)
};

// Runs every GEMM of `gemms` through both paths on deterministic non-zero bf16 operands: one
// untimed call of each, then `repeats` timed calls of each, alternating which path goes first;
// a path's time is the median over the repeats of the count-weighted sum over the GEMMs.
// Buffers are host vectors, one GEMM's at a time: nothing goes through memtrain's allocator,
// so the run's allocation trace is the one a dry run plans. Runs on kernels::num_threads()
// threads. Needs bf16 dot products (kernels::bf16_gemm_native()); throws std::runtime_error
// when oneDNN refuses the matmul, std::invalid_argument for an empty list or a size < 1.
Bf16GemmSpeeds measure_bf16_gemm_paths(const std::vector<StepGemm>& gemms, int repeats = 3);

}  // namespace memtrain::train
