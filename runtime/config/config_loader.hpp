#pragma once
// Loading and validating an experiment config (configs/*.yaml; every key in docs/config.md).
#include <string>
#include <vector>

#include "runtime/config/config.hpp"

namespace memtrain::train {

// Reads the YAML file at `path`, then the MEMTRAIN_ALLOC_CONF environment variable (allocator
// options, PYTORCH_CUDA_ALLOC_CONF syntax), then `overrides` ("section.key=value", as given to
// `--set`; later ones win), and validates the result: types, ranges, cross-key rules
// (hidden_size % num_attention_heads, seq_length <= max_position_embeddings, global_batch_size a
// multiple of micro_batch_size, allocator options that would do nothing) and the environment
// (the corpus exists; "kjv" needs the `bible` program). Creates nothing on disk.
//
// Throws memtrain::ConfigError with one line
//   "<where>: <section.key> = <value>: <what>; expected <...>"
// where <where> is "<file>:<line>", "--set <argument>" or "MEMTRAIN_ALLOC_CONF=<value>". Also
// for a missing, unreadable or non-YAML file, an unknown key (naming the closest known key) and
// a key that names a feature not built yet ("not supported yet"). With `corpus`
// CorpusCheck::skipped the corpus is not looked at (a checkpoint's config.yaml, read for its
// model by eval --input and export-hf on a machine that may not have the corpus).
Config load_config(const std::string& path, const std::vector<std::string>& overrides,
                   CorpusCheck corpus = CorpusCheck::required);

// The data-parallel rule that needs the world size, known only once ranks exist: throws
// ConfigError unless training.global_batch_size is a multiple of
// training.micro_batch_size x data_parallel_size. load_config checks data_parallel_size = 1;
// the trainer calls this with the real size before creating the run directory.
void check_data_parallel_size(const Config& config, int data_parallel_size);

// The tensor-parallel rule that needs the world size: throws ConfigError naming where
// parallel.tensor_model_parallel_size was set when it does not divide `world_size` ranks.
void check_tensor_parallel_world(const Config& config, int world_size);

}  // namespace memtrain::train
