#pragma once
// Masked-LM evaluation on a fixed validation set.
#include <cstdint>

#include "comms/communicator.hpp"
#include "models/bert_for_masked_lm.hpp"
#include "runtime/data/mlm_dataset.hpp"

namespace memtrain::train {

struct EvalResult {
  double loss = 0;        // mean cross-entropy over all masked tokens of the set (nats)
  double accuracy = 0;    // share of masked tokens predicted exactly (argmax)
  double perplexity = 0;  // exp(loss)
  std::int64_t num_masked = 0;
};

// The validation set is the first `eval_steps` micro-batches of `validation` (samples
// [0, eval_steps * micro_batch_size)), capped to the sequences it has, so every evaluation of a
// run, with any dp, sees the same masked tokens. Rank r evaluates batches r, r + dp, ...; sums
// are all-reduced. Dropout is off (model.evaluate).
EvalResult evaluate_model(models::BertForMaskedLM& model, const data::MlmDataset& validation, comms::Communicator& comm,
                          int micro_batch_size, int eval_steps);

}  // namespace memtrain::train
