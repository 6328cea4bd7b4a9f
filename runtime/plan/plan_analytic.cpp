#include "runtime/plan/plan_analytic.hpp"

#include <string>

#include "runtime/core/errors.hpp"

namespace memtrain::train {

double zero_bytes_per_parameter(const PrecisionConfig& precision, int zero_stage, int data_parallel_size) {
  if ((zero_stage != 0 && zero_stage != 1) || data_parallel_size < 1) {
    throw ConfigError("zero_bytes_per_parameter: ZeRO stage " + std::to_string(zero_stage) + " over " +
                      std::to_string(data_parallel_size) +
                      " data-parallel ranks; expected stage 0 or 1 and at least one rank");
  }
  const double shards = zero_stage == 1 ? data_parallel_size : 1.0;
  if (precision.dtype == "fp32") return 4 + 4 + 8 / shards;
  const double gradient = precision.fp32_grad_accumulation ? 4 : 2;
  return 2 + gradient + (4 + 8) / shards;
}

KorthikantiBytes korthikanti_activation_bytes(const Config& config) {
  const double s = config.data.seq_length;
  const double b = config.training.micro_batch_size;
  const double h = config.model.hidden_size;
  const double a = config.model.num_attention_heads;
  KorthikantiBytes k;
  k.no_recompute = s * b * h * (34.0 + 5.0 * a * s / h);
  k.selective_recompute = s * b * h * 34.0;
  k.full_recompute = 2.0 * s * b * h;
  const std::string& r = config.memory.recompute;
  k.per_layer = r == "full" ? k.full_recompute : r == "selective" ? k.selective_recompute : k.no_recompute;
  const double t = config.parallel.tensor_model_parallel_size;
  if (t > 1) {
    // Of the 34 sbh, 10 are the replicated LayerNorm inputs, dropout masks and the layer input;
    // 24 sit inside the split attention and MLP, as do the 5as/h attention terms.
    // Sequence parallelism divides the 10 replicated sbh by t as well.
    const double attention = 5.0 * a * s / (h * t);
    const double replicated = config.parallel.sequence_parallel ? 10.0 / t : 10.0;
    const double full = config.parallel.sequence_parallel ? k.full_recompute / t : k.full_recompute;
    k.tensor_parallel = r == "full"        ? full
                        : r == "selective" ? s * b * h * (replicated + 24.0 / t)
                                           : s * b * h * (replicated + 24.0 / t + attention);
  }
  return k;
}

}  // namespace memtrain::train
