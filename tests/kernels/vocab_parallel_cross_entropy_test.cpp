// The vocabulary-parallel cross-entropy's three passes (kernels/cpu/vocab_parallel_cross_entropy)
// over a vocabulary split into shards, with the all-reduces between the passes done here by
// hand, against the softmax cross-entropy of the whole rows in double precision.
#include "kernels/cpu/vocab_parallel_cross_entropy.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/kernels/test_util.hpp"

namespace memtrain::kernels {
namespace {

using testing::random_normal;

struct Result {
  double loss = 0;
  std::int64_t correct = -1;
  std::vector<float> dlogits;  // [M, V] gathered from the shards, padding dropped
};

// The passes on `shards` ranks of `columns` columns each (the last ones padded past V), with
// max and sum over the ranks where the group's all-reduces would be.
Result run_sharded(const std::vector<float>& logits, const std::vector<std::int32_t>& targets, int M, int V, int shards,
                   float grad_scale) {
  const std::int64_t columns = (V + shards - 1) / shards;
  std::vector<std::vector<float>> local(shards, std::vector<float>(M * columns, 0.0f));
  for (int r = 0; r < shards; ++r) {
    for (int m = 0; m < M; ++m) {
      for (std::int64_t j = 0; j < columns && r * columns + j < V; ++j) {
        local[r][m * columns + j] = logits[m * V + r * columns + j];
      }
    }
  }
  std::vector<std::vector<float>> local_max(shards, std::vector<float>(M)), global_max = local_max;
  std::vector<std::vector<std::int64_t>> local_first(shards, std::vector<std::int64_t>(M));
  std::vector<std::vector<double>> sums(shards, std::vector<double>(2 * M)), argmax(shards, std::vector<double>(M));
  for (int r = 0; r < shards; ++r) {
    vocab_parallel_cross_entropy_local_max(local_max[r].data(), local_first[r].data(), global_max[r].data(),
                                           local[r].data(), targets.data(), M, r * columns, columns, V);
  }
  for (int m = 0; m < M; ++m) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int r = 0; r < shards; ++r) mx = std::max(mx, global_max[r][m]);
    for (int r = 0; r < shards; ++r) global_max[r][m] = mx;
  }
  for (int r = 0; r < shards; ++r) {
    vocab_parallel_cross_entropy_sums(sums[r].data(), argmax[r].data(), local[r].data(), targets.data(),
                                      local_max[r].data(), local_first[r].data(), global_max[r].data(), M, r * columns,
                                      columns, V);
  }
  std::vector<double> sum(2 * M, 0.0), best(M, -std::numeric_limits<double>::infinity());
  for (int r = 0; r < shards; ++r) {
    for (int i = 0; i < 2 * M; ++i) sum[i] += sums[r][i];
    for (int m = 0; m < M; ++m) best[m] = std::max(best[m], argmax[r][m]);
  }
  Result out;
  out.dlogits.assign(M * V, 0.0f);
  for (int r = 0; r < shards; ++r) {
    std::vector<float> d(M * columns, 7.0f);
    std::int64_t correct = -1;
    const double loss =
        vocab_parallel_cross_entropy_finish(d.data(), local[r].data(), targets.data(), global_max[r].data(), sum.data(),
                                            best.data(), M, r * columns, columns, V, grad_scale, &correct);
    if (r == 0) {
      out.loss = loss;
      out.correct = correct;
    } else {
      EXPECT_EQ(loss, out.loss) << "rank " << r;  // the same on every rank
      EXPECT_EQ(correct, out.correct) << "rank " << r;
    }
    for (int m = 0; m < M; ++m) {
      for (std::int64_t j = 0; j < columns; ++j) {
        if (r * columns + j < V) {
          out.dlogits[m * V + r * columns + j] = d[m * columns + j];
        } else {
          EXPECT_EQ(d[m * columns + j], 0.0f) << "padding of rank " << r;
        }
      }
    }
  }
  return out;
}

// -log softmax(x)[t] summed over rows, and its gradient, in double over whole rows.
double reference(const std::vector<float>& x, const std::vector<std::int32_t>& targets, int M, int V, float grad_scale,
                 std::vector<double>* grad) {
  double loss = 0;
  grad->assign(M * V, 0.0);
  for (int m = 0; m < M; ++m) {
    double z = 0;
    for (int j = 0; j < V; ++j) z += std::exp(static_cast<double>(x[m * V + j]));
    loss += std::log(z) - x[m * V + targets[m]];
    for (int j = 0; j < V; ++j) {
      (*grad)[m * V + j] = (std::exp(static_cast<double>(x[m * V + j])) / z - (j == targets[m])) * grad_scale;
    }
  }
  return loss;
}

TEST(VocabParallelCrossEntropy, ShardsGiveTheWholeRowsLossGradientAndAccuracy) {
  const int M = 5, V = 13;
  std::vector<float> x = random_normal<float>(M * V, 11);
  const std::vector<std::int32_t> targets = {0, 12, 4, 6, 9};
  x[1 * V + 12] = 6.0f;  // row 1: the argmax is the target, on the last rank
  x[2 * V + 4] = 6.0f;   // row 2: the argmax is the target, on the first rank
  std::vector<double> grad_ref;
  const double loss_ref = reference(x, targets, M, V, 0.5f, &grad_ref);
  std::int64_t correct_ref = 0;  // rows whose first maximum is the target
  for (int m = 0; m < M; ++m) {
    correct_ref += std::max_element(x.begin() + m * V, x.begin() + (m + 1) * V) - (x.begin() + m * V) == targets[m];
  }
  ASSERT_GE(correct_ref, 2);
  for (int shards : {1, 2, 3, 4}) {
    SCOPED_TRACE("shards = " + std::to_string(shards));
    const Result r = run_sharded(x, targets, M, V, shards, 0.5f);
    EXPECT_NEAR(r.loss, loss_ref, 1e-6 * M);  // z - max is taken in float
    EXPECT_EQ(r.correct, correct_ref);
    EXPECT_LT(testing::max_relative_error(r.dlogits, grad_ref), 1e-6);
  }
}

// torch.argmax's tie rule across ranks: the first maximum of the whole row wins, even when a
// later rank holds the same value.
TEST(VocabParallelCrossEntropy, ATieAcrossRanksCountsOnlyTheFirstIndex) {
  const int M = 2, V = 8;
  std::vector<float> x(M * V, 0.0f);
  x[1] = x[6] = 5.0f;          // row 0: maxima at 1 (rank 0) and 6 (rank 1)
  x[V + 1] = x[V + 6] = 5.0f;  // row 1: the same
  const std::vector<std::int32_t> targets = {1, 6};
  EXPECT_EQ(run_sharded(x, targets, M, V, 2, 1.0f).correct, 1);
}

// A bad target is named before anything is written, as the fused kernel does.
TEST(VocabParallelCrossEntropy, ATargetOutsideTheVocabularyIsNamedBeforeWriting) {
  const int M = 3, V = 4;
  const std::vector<float> x(M * V, 1.0f);
  const std::vector<std::int32_t> targets = {0, 4, 1};
  std::vector<float> local_max(M, 7.0f), global_max(M, 7.0f);
  std::vector<std::int64_t> local_first(M, 7);
  try {
    vocab_parallel_cross_entropy_local_max(local_max.data(), local_first.data(), global_max.data(), x.data(),
                                           targets.data(), M, 0, V, V);
    FAIL() << "expected std::out_of_range";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("targets[1] = 4"), std::string::npos) << e.what();
  }
  EXPECT_EQ(local_max, std::vector<float>(M, 7.0f));
  EXPECT_EQ(local_first, std::vector<std::int64_t>(M, 7));
}

}  // namespace
}  // namespace memtrain::kernels
