#include "runtime/train/training_data.hpp"

#include <filesystem>

#include <sstream>

#include "runtime/data/prepare_data.hpp"
#include "runtime/train/root_only.hpp"

namespace memtrain::train {

namespace {
// The validation stream must not repeat the training stream's masking: its key differs.
constexpr std::uint64_t kValidationSeedOffset = 0x9e3779b97f4a7c15ULL;

// <cache_dir>/<key> -> <key>, with or without a trailing '/'.
std::string cache_key_of(const std::string& dir) {
  std::filesystem::path key = std::filesystem::path(dir).lexically_normal();
  if (key.filename().empty()) key = key.parent_path();
  return key.filename().string();
}

}  // namespace

std::uint64_t validation_seed(std::uint64_t seed) { return seed + kValidationSeedOffset; }

TrainingData load_training_data(const Config& config, comms::Communicator& comm, std::ostream& log) {
  const std::uint64_t seed = config.training.seed;
  TrainingData out;
  if (config.data.mock) {
    out.train = std::make_unique<data::MlmDataset>(data::MlmDataset::mock(config.data, config.model.vocab_size, seed));
    out.validation = std::make_unique<data::MlmDataset>(
        data::MlmDataset::mock(config.data, config.model.vocab_size, validation_seed(seed)));
    out.data_key = data_key_of(config);
    return out;
  }
  data::PreparedData prepared;
  run_on_root(comm, "data preparation",
              [&] { prepared = data::prepare_data(config.data, config.model.vocab_size, log); });
  if (comm.rank() != 0) {
    std::ostringstream quiet;  // the cache is complete now: this only verifies and opens it
    prepared = data::prepare_data(config.data, config.model.vocab_size, quiet);
  }
  out.train = std::make_unique<data::MlmDataset>(prepared, /*validation=*/false, config.data, seed);
  out.validation =
      std::make_unique<data::MlmDataset>(prepared, /*validation=*/true, config.data, validation_seed(seed));
  out.tokenizer.emplace(prepared.tokenizer_model);
  out.data_key = cache_key_of(prepared.dir);
  return out;
}

std::string data_key_of(const Config& config) {
  if (config.data.mock) return "mock";
  return cache_key_of(data::cache_key_dir(config.data, config.model.vocab_size));
}

}  // namespace memtrain::train
