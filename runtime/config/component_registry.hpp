#pragma once
// The registries of the components a config selects by name: gradient compressors
// (compression.method) and optimizers (training.optimizer). Each component declares here the
// config keys it owns, checks them and (compressors) builds itself from the config; nothing
// else in the config layer names a component. Optimizers are built in runtime/train
// (runtime/train/optimizer_registry.hpp), above the config layer, from the same names.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "comms/gradient_compressor.hpp"
#include "runtime/config/config.hpp"

namespace memtrain::train {

// Note [Components own their settings]
// A component's keys are read only while it is selected. A key owned by a component that is
// not selected, and read by none that is, set away from its default, would do nothing and is
// refused, naming the owner (validate_config); so adding a component never edits the checks
// of the others. With compression.method none the whole compression section is ignored and
// nothing in it is refused (as precision.loss_scale.* under fp32), since run directories write
// every key back (canonical_yaml).

// What the config layer knows of one component.
struct ComponentSettings {
  std::string name;   // the selecting key's value: "powersgd", "onebit_adam"
  std::string title;  // in messages: "PowerSGD", "1-bit"
  // Keys only this component reads ("compression.rank"), in config_keys() order.
  std::vector<std::string> keys;
  // Keys of other components it reads as well (1-bit Adam reads 1-bit's block_size and scale).
  std::vector<std::string> reads;
  // What the owner needs besides being selected, ending the refusal's "expected ... or
  // <selecting key> = <name><needs>": " with compression.method = none". Usually empty.
  std::string needs;
  // Checks of its keys' values that hold whichever component is selected (a value no
  // component could use). Null: none. Throws ConfigError (fail_key).
  std::function<void(const Config&)> check_values;
  // Checks of the combination with the rest of the config, run when it is selected. Null:
  // none. Throws ConfigError (fail_key).
  std::function<void(const Config&)> validate;
  // Its state differs between data-parallel ranks (error feedback), so a checkpoint resumes
  // only on the same data-parallel and tensor-parallel sizes.
  bool per_rank_state = false;
  // It trains on a GPU (device cuda) so far.
  bool runs_on_gpu = false;
};

// A gradient compressor: its settings and how the synchroniser gets it from a config.
struct CompressorEntry {
  ComponentSettings settings;
  // The synchroniser's compression (comms::GradientSynchronizer::Compression's factory) for
  // `config`, whose compression.method is this entry's name.
  std::function<comms::CompressorFactory(const Config&)> make;
};

// Every registered compressor and optimizer, in registration order (component_registry.cpp
// lists them: an explicit list, not static initialisers, which a static library's link
// would drop).
const std::vector<CompressorEntry>& compressor_registry();
const std::vector<ComponentSettings>& optimizer_registry();

// The entry named `name`, or null.
const CompressorEntry* find_compressor(std::string_view name);
const ComponentSettings* find_optimizer(std::string_view name);

// The registered names, in order: {"powersgd", "onebit"}, {"adamw", "onebit_adam"}.
std::vector<std::string> compressor_names();
std::vector<std::string> optimizer_names();

// True when `config`'s compressor or optimizer keeps per-rank state (per_rank_state): a
// resume then needs the checkpoint's data-parallel and tensor-parallel sizes.
bool keeps_per_rank_state(const Config& config);

// One entry per component, each defined in its own file (powersgd_settings.cpp, ...).
CompressorEntry powersgd_compressor_entry();
CompressorEntry onebit_compressor_entry();
ComponentSettings adamw_optimizer_settings();
ComponentSettings onebit_adam_optimizer_settings();

}  // namespace memtrain::train
