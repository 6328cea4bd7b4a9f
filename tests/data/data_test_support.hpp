#pragma once
// Helpers for the data tests: a temporary directory and small generated corpora.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace memtrain::data::testing {

// A fresh directory under the system temp dir, removed with its contents at scope exit.
class TempDir {
 public:
  TempDir() {
    const auto base = std::filesystem::temp_directory_path();
    std::mt19937_64 rng(std::random_device{}());
    for (;;) {
      path_ = base / ("memtrain-data-test-" + std::to_string(rng()));
      if (std::filesystem::create_directory(path_)) break;
    }
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// Deterministic English-like sentences (lower-case ASCII words, single spaces, a final period),
// the shape of normalised text that SentencePiece round-trips exactly.
inline std::vector<std::string> generated_sentences(int count, std::uint32_t seed) {
  static const char* const words[] = {
      "and",    "the",    "lord",  "said",    "unto",  "moses", "land",    "of",       "egypt",
      "people", "went",   "out",   "into",    "city",  "house", "king",    "israel",   "children",
      "water",  "light",  "earth", "heaven",  "great", "day",   "night",   "were",     "there",
      "bread",  "father", "son",   "brother", "spake", "came",  "before",  "after",    "mountain",
      "river",  "stone",  "gold",  "silver",  "seven", "years", "hundred", "thousand", "men"};
  constexpr int kWords = sizeof(words) / sizeof(words[0]);
  std::mt19937 rng(seed);
  std::vector<std::string> sentences;
  for (int s = 0; s < count; ++s) {
    const int length = 4 + static_cast<int>(rng() % 16);
    std::string sentence;
    for (int w = 0; w < length; ++w) {
      if (w > 0) sentence += ' ';
      sentence += words[rng() % kWords];
    }
    sentences.push_back(sentence + ".");
  }
  return sentences;
}

// A text file body: `documents` documents of `per_document` lines, separated by blank lines.
inline std::string generated_corpus_text(int documents, int per_document, std::uint32_t seed) {
  const auto sentences = generated_sentences(documents * per_document, seed);
  std::string text;
  for (int d = 0; d < documents; ++d) {
    if (d > 0) text += "\n";
    for (int s = 0; s < per_document; ++s) text += sentences[d * per_document + s] + "\n";
  }
  return text;
}

}  // namespace memtrain::data::testing

#include <gtest/gtest.h>

#include <initializer_list>
#include <sstream>

#include "runtime/core/errors.hpp"

#include "runtime/data/prepare_data.hpp"

namespace memtrain::data::testing {

// One small prepared corpus per test process: 40 documents x 50 generated lines in a text file,
// a 300-piece BPE tokenizer (trains in well under a second), 4% held out.
struct SmallPrepared {
  TempDir dir;
  DataConfig config;
  int vocab_size = 300;
  PreparedData prepared;
  std::vector<std::string> lines;  // the corpus lines in order (documents concatenated)

  SmallPrepared() {
    write_file(dir.file("corpus.txt"), generated_corpus_text(40, 50, /*seed=*/11));
    lines = generated_sentences(40 * 50, 11);
    config.corpus = dir.file("corpus.txt");
    config.cache_dir = dir.file("cache");
    config.validation_fraction = 0.04;
    config.seq_length = 32;
    std::ostringstream log;
    prepared = prepare_data(config, vocab_size, log);
  }
};

// Destroyed (its directory removed) at process exit.
inline const SmallPrepared& small_prepared() {
  static const SmallPrepared instance;
  return instance;
}

// Checks that `fn` throws ConfigError whose message contains every one of `parts`.
template <class Fn>
void expect_config_error(Fn fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected ConfigError";
  } catch (const ConfigError& e) {
    for (const auto& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "message: " << e.what() << "\nmissing: " << part;
    }
  }
}

}  // namespace memtrain::data::testing
