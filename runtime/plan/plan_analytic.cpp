#include "runtime/plan/plan_analytic.hpp"

namespace memtrain::train {

int zero_bytes_per_parameter(const PrecisionConfig& precision) {
  if (precision.dtype == "fp32") return 4 + 4 + 8;
  const int gradient = precision.fp32_grad_accumulation ? 4 : 2;
  return 2 + gradient + 4 + 8;
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
  // Tensor parallelism is not built yet (parallel.tensor_model_parallel_size must be 1), so
  // its row is shown as n/a rather than evaluated at t = 1, where it would only repeat the
  // first row's attention terms.
  return k;
}

}  // namespace memtrain::train
