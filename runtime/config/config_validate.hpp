#pragma once
// Rules that involve more than one key, or the machine (corpus files, the `bible` program).
#include <string>

#include "runtime/config/config.hpp"

namespace memtrain::train {

// Throws memtrain::ConfigError ("<where>: <key> = <value>: <what>; expected <...>") for the first
// rule `config` breaks. <where> comes from config.origin, or "<file> (default)" for a key left
// at its default. The corpus rules (validate_corpus) only with `corpus` CorpusCheck::required.
void validate_config(const Config& config, CorpusCheck corpus = CorpusCheck::required);

// The corpus is there to read: data.corpus exists, is readable, is a UTF-8 text file or a
// directory with .txt files and has a non-blank line; "kjv" needs the `bible` program. Nothing
// for data.mock. Throws memtrain::ConfigError as validate_config.
void validate_corpus(const Config& config);

// Rules about the machine a compute run trains on, checked by `train` without --dry-run only
// (a dry run, `plan`, `eval` and `export-hf` do not need them): precision.bf16_gemm native with
// dtype bf16 needs bf16 dot products (Note [bf16 GEMMs through oneDNN]). Throws
// memtrain::ConfigError as validate_config.
void validate_compute_host(const Config& config);

// For device cuda / cuda:N: throws ConfigError naming the first key whose value a GPU run does
// not train yet (Note [What a GPU run trains so far]), with where it was set and what is
// expected. Returns for device cpu. The world size (one GPU per rank; several ranks in fp32
// only: Note [Data parallelism on GPUs]) is the trainer's check.
void validate_cuda_support(const Config& config);

// Where `key` was set, for messages: config.origin[key] or "<config.path> (default)".
std::string where_set(const Config& config, const std::string& key);

// The pieces of validate_config's messages, for the components' checks (component_registry.hpp).
// Throws ConfigError "<where_set>: <key> = <value>: <what>; expected <expected>".
[[noreturn]] void fail_key(const Config& config, const std::string& key, const std::string& what,
                           const std::string& expected);
// Another key named in a message, with where it was set: "model.hidden_size = 100 (f.yaml:3)",
// "training.optimizer = adamw (default)".
std::string key_and_value(const Config& config, const std::string& key);
// Of two keys in one rule, the one the user set last is the likelier mistake: `a` unless only
// `b` was set.
std::string blamed_key(const Config& config, const std::string& a, const std::string& b);
// True when `key` was set in the file or an override to something other than its default.
// Only such a key of an unselected component is refused: run directories and checkpoints write
// every key into config.yaml with its value (canonical_yaml), and eval, export-hf and --config
// <run>/config.yaml load those files back.
bool set_away_from_default(const Config& config, const std::string& key);

// Searches PATH for an executable named `program`, as a shell would. Empty when not found.
std::string find_program(const std::string& program);

}  // namespace memtrain::train
