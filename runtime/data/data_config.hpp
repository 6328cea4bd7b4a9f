#pragma once
// The `data:` section.
#include <string>

namespace memtrain::data {

struct DataConfig {
  std::string corpus = "kjv";  // "kjv", a UTF-8 text file, or a directory of .txt files
  bool mock = false;           // uniform random token ids, no tokenizer
  int seq_length = 128;
  bool dynamic_seq_length = false;  // pad each micro-batch only to its longest sequence
  float mlm_probability = 0.15f;
  std::string tokenizer_type = "bpe";  // "bpe" | "unigram"
  std::string cache_dir = ".cache/memtrain";
  double validation_fraction = 0.02;  // held-out share of documents/verses (contiguous ranges)
};

}  // namespace memtrain::data
