#include "runtime/train/evaluator.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace memtrain::train {

EvalResult evaluate_model(models::BertForMaskedLM& model, const data::MlmDataset& validation, comms::Communicator& comm,
                          int micro_batch_size, int eval_steps) {
  const auto available =
      static_cast<std::int64_t>(validation.num_sequences() / static_cast<std::uint64_t>(micro_batch_size));
  const std::int64_t num_batches = std::max<std::int64_t>(1, std::min<std::int64_t>(eval_steps, available));
  double loss_sum = 0.0;
  std::int64_t counts[2] = {0, 0};  // masked, correct
  for (std::int64_t i = comm.rank(); i < num_batches; i += comm.size()) {
    const auto batch = validation.batch(static_cast<std::uint64_t>(i) * micro_batch_size, micro_batch_size);
    const auto stats = model.evaluate(batch);
    loss_sum += stats.loss_sum;
    counts[0] += stats.num_masked;
    counts[1] += stats.num_correct;
  }
  comm.allreduce_sum(&loss_sum, 1);
  comm.allreduce_sum(counts, 2);
  EvalResult r;
  r.num_masked = counts[0];
  if (counts[0] == 0) {
    r.loss = r.accuracy = r.perplexity = std::numeric_limits<double>::quiet_NaN();
    return r;
  }
  r.loss = loss_sum / static_cast<double>(counts[0]);
  r.accuracy = static_cast<double>(counts[1]) / static_cast<double>(counts[0]);
  r.perplexity = std::exp(r.loss);
  return r;
}

}  // namespace memtrain::train
