#pragma once
// `memtrain data prepare`: corpus -> tokenizer -> token files, cached and shared between runs.
#include <iosfwd>
#include <string>

#include "runtime/data/data_config.hpp"
#include "runtime/data/special_tokens.hpp"

namespace memtrain::data {

// What prepare_data produces, all inside one cache directory.
struct PreparedData {
  std::string dir;                         // <cache_dir>/<key>/
  std::string tokenizer_model;             // path of the SentencePiece .model
  std::string train_tokens, valid_tokens;  // binary token files (token_file.hpp)
  int vocab_size = 0;                      // pieces of the trained tokenizer (<= the requested model.vocab_size)
  SpecialTokens special = kSpecialTokens;
};

// Note [Data cache]
// The cache directory name is a key: a short label ("kjv-bpe-30522") and the xxh64 of the
// corpus bytes (and file names) with every setting that changes the outputs (tokenizer type,
// vocab size, validation fraction, format version). Runs with the same data share one
// directory; a changed corpus gets a new key, so an old cache is never mistaken for it.
// A directory is used only when manifest.json parses, its settings equal ours and every file
// it lists has the recorded size and xxh64; otherwise it is stale and rebuilt. Building happens
// in <cache_dir>/.tmp-<key>-<pid>-<n>/, files fsynced, then renamed into place: a crash leaves
// a .tmp directory that nobody reads, never a half-written cache. If another process finished
// the same key first, its (verified) copy is used and ours is dropped.

// Prepares or reuses the data for `config` and a requested vocabulary of `vocab_size` pieces
// (model.vocab_size). Progress lines go to `log`. Under MPI only rank 0 calls this.
// Throws ConfigError (missing/empty corpus, non-UTF-8 byte with file and offset, bad tokenizer
// settings, vocabulary too small, corpus too small to split) or RuntimeError (I/O failures).
PreparedData prepare_data(const DataConfig& config, int vocab_size, std::ostream& log);

// The directory prepare_data would use (reads the corpus to hash it). Same errors.
std::string cache_key_dir(const DataConfig& config, int vocab_size);

}  // namespace memtrain::data
