#include "kernels/cpu/vocab_parallel_cross_entropy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/cpu/parallel.hpp"

namespace memtrain::kernels {

namespace {

constexpr float kNoColumn = -std::numeric_limits<float>::infinity();

std::int64_t valid_columns(std::int64_t first, std::int64_t columns, std::int64_t vocab_size) {
  return std::clamp<std::int64_t>(vocab_size - first, 0, columns);
}

// A team pays off from 65536 logits on (Note [No thread team for small or single-threaded loops]).
bool worth_a_team(int M, std::int64_t columns) { return std::int64_t{M} * columns >= 65536; }

}  // namespace

void vocab_parallel_cross_entropy_local_max(float* local_max, std::int64_t* local_first, float* global_max,
                                            const float* logits, const std::int32_t* targets, int M, std::int64_t first,
                                            std::int64_t columns, std::int64_t vocab_size) {
  for (int m = 0; m < M; ++m) {
    if (targets[m] < 0 || targets[m] >= vocab_size) {
      throw std::out_of_range("vocab_parallel_cross_entropy: targets[" + std::to_string(m) +
                              "] = " + std::to_string(targets[m]) + "; expected a class in [0, " +
                              std::to_string(vocab_size) + ")");
    }
  }
  const std::int64_t valid = valid_columns(first, columns, vocab_size);
  detail::parallel_for(M, worth_a_team(M, columns), [=](std::int64_t m) {
    const float* z = logits + m * columns;
    float mx = kNoColumn;
    std::int64_t at = -1;
    for (std::int64_t j = 0; j < valid; ++j) {
      if (z[j] > mx) {
        mx = z[j];
        at = j;
      }
    }
    local_max[m] = mx;
    local_first[m] = at;
    global_max[m] = mx;
  });
}

void vocab_parallel_cross_entropy_sums(double* sums, double* argmax, const float* logits, const std::int32_t* targets,
                                       const float* local_max, const std::int64_t* local_first, const float* global_max,
                                       int M, std::int64_t first, std::int64_t columns, std::int64_t vocab_size) {
  const std::int64_t valid = valid_columns(first, columns, vocab_size);
  detail::parallel_for(M, worth_a_team(M, columns), [=](std::int64_t m) {
    const float* z = logits + m * columns;
    const float mx = global_max[m];
    double sum = 0.0;
    for (std::int64_t j = 0; j < valid; ++j) sum += std::exp(static_cast<double>(z[j] - mx));
    sums[m] = sum;
    const std::int64_t t = targets[m] - first;
    sums[M + m] = t >= 0 && t < valid ? static_cast<double>(z[t]) : 0.0;
    argmax[m] = local_first[m] >= 0 && local_max[m] == mx ? -static_cast<double>(first + local_first[m])
                                                          : -std::numeric_limits<double>::infinity();
  });
}

double vocab_parallel_cross_entropy_finish(float* dlogits, const float* logits, const std::int32_t* targets,
                                           const float* global_max, const double* sums, const double* argmax, int M,
                                           std::int64_t first, std::int64_t columns, std::int64_t vocab_size,
                                           float grad_scale, std::int64_t* num_correct) {
  double loss = 0.0;
  std::int64_t correct = 0;
  for (int m = 0; m < M; ++m) {
    // max - z_target first: exact for nearby values (the fused kernel's order).
    loss += (static_cast<double>(global_max[m]) - sums[M + m]) + std::log(sums[m]);
    if (-argmax[m] == static_cast<double>(targets[m])) ++correct;
  }
  if (num_correct != nullptr) *num_correct = correct;
  if (dlogits == nullptr) return loss;
  const std::int64_t valid = valid_columns(first, columns, vocab_size);
  detail::parallel_for(M, worth_a_team(M, columns), [=](std::int64_t m) {
    const float* z = logits + m * columns;
    float* d = dlogits + m * columns;
    const float mx = global_max[m];
    const double s = static_cast<double>(grad_scale) / sums[m];
    for (std::int64_t j = 0; j < valid; ++j) {
      d[j] = static_cast<float>(std::exp(static_cast<double>(z[j] - mx)) * s);
    }
    std::fill(d + valid, d + columns, 0.0f);
    const std::int64_t t = targets[m] - first;
    if (t >= 0 && t < valid) d[t] -= grad_scale;
  });
  return loss;
}

}  // namespace memtrain::kernels
