#include "models/vocab_parallel_cross_entropy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/parallel.hpp"
#include "runtime/core/errors.hpp"

namespace memtrain::models {

std::int64_t VocabShard::valid_columns() const { return std::clamp<std::int64_t>(vocab_size - first, 0, columns); }

double vocab_parallel_cross_entropy(float* dlogits, const float* logits, const std::int32_t* targets, int M,
                                    const VocabShard& shard, float grad_scale, std::int64_t* num_correct,
                                    const TensorParallel& tp) {
  for (int m = 0; m < M; ++m) {
    if (targets[m] < 0 || targets[m] >= shard.vocab_size) {
      throw RuntimeError("vocab_parallel_cross_entropy: targets[" + std::to_string(m) +
                         "] = " + std::to_string(targets[m]) + "; expected a class in [0, " +
                         std::to_string(shard.vocab_size) + ")");
    }
  }
  const std::int64_t Vl = shard.columns, valid = shard.valid_columns();
  constexpr float kNoColumn = -std::numeric_limits<float>::infinity();
  // Per row: this shard's maximum and the index of its first occurrence.
  std::vector<float> row_max(M, kNoColumn);
  std::vector<std::int64_t> first_max(M, -1);
  const bool team = std::int64_t{M} * Vl >= 65536;
  kernels::detail::parallel_for(M, team, [&, Vl, valid](std::int64_t m) {
    const float* z = logits + m * Vl;
    float mx = kNoColumn;
    std::int64_t at = -1;
    for (std::int64_t j = 0; j < valid; ++j) {
      if (z[j] > mx) {
        mx = z[j];
        at = j;
      }
    }
    row_max[m] = mx;
    first_max[m] = at;
  });
  std::vector<float> global_max = row_max;  // [M]
  if (tp.enabled()) tp.group->allreduce_max(global_max.data(), M);

  // [M] sums of exp(z - max), then [M] target logits (0 on ranks that do not own the target).
  std::vector<double> sums(2 * static_cast<std::size_t>(M), 0.0);
  // [M] minus the global index of this rank's first maximum when it is the row's maximum:
  // the maximum over ranks is minus the first global argmax.
  std::vector<double> argmax(M, -std::numeric_limits<double>::infinity());
  kernels::detail::parallel_for(M, team, [&, Vl, valid](std::int64_t m) {
    const float* z = logits + m * Vl;
    const float mx = global_max[m];
    double sum = 0.0;
    for (std::int64_t j = 0; j < valid; ++j) sum += std::exp(static_cast<double>(z[j] - mx));
    sums[m] = sum;
    const std::int64_t t = targets[m] - shard.first;
    if (t >= 0 && t < valid) sums[M + m] = static_cast<double>(z[t]);
    if (first_max[m] >= 0 && row_max[m] == mx) {
      argmax[m] = -static_cast<double>(shard.first + first_max[m]);
    }
  });
  if (tp.enabled()) {
    tp.group->allreduce_sum(sums.data(), 2 * std::int64_t{M});
    if (num_correct != nullptr) tp.group->allreduce_max(argmax.data(), M);
  }

  double loss = 0.0;
  std::int64_t correct = 0;
  for (int m = 0; m < M; ++m) {
    // max - z_target first: exact for nearby values (the fused kernel's order).
    loss += (static_cast<double>(global_max[m]) - sums[M + m]) + std::log(sums[m]);
    if (-argmax[m] == static_cast<double>(targets[m])) ++correct;
  }
  if (num_correct != nullptr) *num_correct = correct;
  if (dlogits != nullptr) {
    kernels::detail::parallel_for(M, team, [&, Vl, valid](std::int64_t m) {
      const float* z = logits + m * Vl;
      float* d = dlogits + m * Vl;
      const float mx = global_max[m];
      const double s = static_cast<double>(grad_scale) / sums[m];
      for (std::int64_t j = 0; j < valid; ++j) {
        d[j] = static_cast<float>(std::exp(static_cast<double>(z[j] - mx)) * s);
      }
      std::fill(d + valid, d + Vl, 0.0f);
      const std::int64_t t = targets[m] - shard.first;
      if (t >= 0 && t < valid) d[t] -= grad_scale;
    });
  }
  return loss;
}

}  // namespace memtrain::models
