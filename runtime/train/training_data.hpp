#pragma once
// The datasets of a run: training and validation streams, and the tokenizer for fill-mask
// predictions (absent with data.mock).
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "comms/communicator.hpp"
#include "runtime/config/config.hpp"
#include "runtime/data/mlm_dataset.hpp"
#include "runtime/data/tokenizer.hpp"

namespace memtrain::train {

struct TrainingData {
  std::unique_ptr<data::MlmDataset> train;
  std::unique_ptr<data::MlmDataset> validation;
  std::optional<data::Tokenizer> tokenizer;  // none with data.mock
  // What the token ids mean: "mock", or the data cache's key (Note [Data cache]: the corpus
  // bytes' xxh64 and the tokenizer settings). Checkpoints record it, so that a resume after the
  // corpus changed (a new tokenizer, other ids) is refused rather than silently trained on.
  std::string data_key;
};

// data.mock: two independent uniform streams (seeds differ), no tokenizer. Otherwise rank 0
// prepares (or reuses) the cache with data::prepare_data, logging to `log`, while the others
// wait; they then open the verified cache. Errors are prepare_data's (ConfigError for a bad
// corpus, RuntimeError for I/O), raised on rank 0 and reported on every rank (run_on_root).
TrainingData load_training_data(const Config& config, comms::Communicator& comm, std::ostream& log);

// TrainingData::data_key of `config`'s data without preparing it: "mock", or the name of the
// cache directory prepare_data would use (it reads the corpus to hash it; prepare_data's
// errors). eval compares it with a checkpoint's before anything is prepared.
std::string data_key_of(const Config& config);

// The masking key of the validation stream of a run keyed by training.seed `seed`: it differs
// from the training stream's, so validation never repeats the training masking. `memtrain plan`
// uses it to evaluate on the same mock batches as the trainer.
std::uint64_t validation_seed(std::uint64_t seed);

}  // namespace memtrain::train
