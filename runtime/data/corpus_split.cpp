#include "runtime/data/corpus_split.hpp"

#include <algorithm>
#include <cmath>

#include "runtime/core/errors.hpp"

namespace memtrain::data {

CorpusSplit split_corpus(const Corpus& corpus, double validation_fraction) {
  if (!(validation_fraction > 0.0 && validation_fraction <= 0.5)) {
    throw ConfigError("data.validation_fraction = " + std::to_string(validation_fraction) +
                      "; expected a number in (0, 0.5]");
  }
  const std::size_t n = corpus.segments.size();
  if (n < 2) {
    throw ConfigError("data.corpus: " + corpus.source + " has " + std::to_string(n) +
                      " non-blank line(s); at least 2 are needed to hold out a validation split");
  }
  const std::size_t v = std::clamp<std::size_t>(
      static_cast<std::size_t>(std::llround(static_cast<double>(n) * validation_fraction)), 1, n - 1);
  const std::size_t r = (v + 99) / 100;

  CorpusSplit split;
  for (std::size_t j = 0; j < r; ++j) {
    // Range j sits in the middle of slice j = [j * n / r, (j + 1) * n / r), so ranges never
    // overlap; a fraction <= 0.5 keeps each range shorter than its slice.
    const std::size_t slice_begin = j * n / r, slice_end = (j + 1) * n / r;
    const std::size_t length = std::min(v / r + (j < v % r ? 1 : 0), slice_end - slice_begin);
    const std::size_t begin = slice_begin + (slice_end - slice_begin - length) / 2;
    split.validation_ranges.emplace_back(begin, begin + length);
  }

  split.train.source = split.validation.source = corpus.source;
  split.train.xxh64 = split.validation.xxh64 = corpus.xxh64;
  std::size_t next_range = 0;
  std::size_t next_document = 0;
  Corpus* previous = nullptr;
  for (std::size_t i = 0; i < n; ++i) {
    while (next_range < r && split.validation_ranges[next_range].second <= i) ++next_range;
    const bool held_out = next_range < r && split.validation_ranges[next_range].first <= i;
    Corpus& target = held_out ? split.validation : split.train;
    bool starts_document = &target != previous;
    if (next_document < corpus.document_starts.size() && corpus.document_starts[next_document] == i) {
      starts_document = true;
      ++next_document;
    }
    if (starts_document) target.document_starts.push_back(target.segments.size());
    target.segments.push_back(corpus.segments[i]);
    previous = &target;
  }
  return split;
}

}  // namespace memtrain::data
