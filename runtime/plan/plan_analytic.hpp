#pragma once
// The published closed forms a plan shows beside its measurements (issue 4, "memtrain plan").
#include <cstdint>
#include <optional>

#include "runtime/config/config.hpp"

namespace memtrain::train {

// Model-state bytes per parameter with Adam, as the ZeRO paper counts them (Rajbhandari et al.
// 2020, section 3.1: "2Ψ + 2Ψ + KΨ" with K = 12 for mixed precision): 16-bit value 2 + 16-bit
// gradient 2 + fp32 master 4 + fp32 moments 8 = 16; fp32 training: value 4 + gradient 4 +
// moments 8 = 16 (the weights are their own master). With precision.fp32_grad_accumulation in
// a 16-bit mode the gradient is 4 bytes: 18.
// ZeRO stage 1 (section 5.1, P_os) over `data_parallel_size` N_d ranks shards the optimizer
// states K: 2 + 2 + 12 / N_d in mixed precision, 4 + 4 + 8 / N_d in fp32 (memtrain's shards are
// the buckets' blocks, Note [ZeRO-1 shards the buckets], so this is exact when N_d divides
// every bucket). Throws memtrain::ConfigError for zero_stage outside {0, 1} or N_d < 1.
double zero_bytes_per_parameter(const PrecisionConfig& precision, int zero_stage = 0, int data_parallel_size = 1);

// Activation bytes one transformer layer stores for its backward pass, Korthikanti et al.
// 2022, "Reducing Activation Recomputation in Large Transformer Models", section 4.1 and
// Table 2, with s = sequence length, b = micro-batch, h = hidden size, a = attention heads,
// 16-bit activations and 1-byte dropout masks:
//   no parallelism:            s*b*h*(34 + 5*a*s/h)
//   full recompute:            2*s*b*h (the layer input only)
//   tensor parallel size t:    s*b*h*(10 + 24/t + 5*a*s/(h*t))
//   ... + selective recompute: s*b*h*(10 + 24/t)
//   tensor + sequence parallel: s*b*h*(34/t + 5*a*s/(h*t)); + selective: s*b*h*34/t
// (full recompute keeps the layer input: 2*s*b*h on every rank, 2*s*b*h/t with sequence
// parallelism, whose layer input is the rank's shard.)
struct KorthikantiBytes {
  double per_layer = 0;            // the row of Table 2 that matches memory.recompute (t = 1)
  double no_recompute = 0;         // s*b*h*(34 + 5as/h)
  double selective_recompute = 0;  // s*b*h*34 (the as^2 terms recomputed)
  double full_recompute = 0;       // 2*s*b*h
  // With parallel.tensor_model_parallel_size t > 1: the tensor-parallel row matching
  // memory.recompute (none for t = 1, where it would only repeat the rows above).
  std::optional<double> tensor_parallel;
};
KorthikantiBytes korthikanti_activation_bytes(const Config& config);

}  // namespace memtrain::train
