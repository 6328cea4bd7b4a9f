#pragma once
// The deterministic train/validation split of a corpus.
#include <cstddef>
#include <utility>
#include <vector>

#include "runtime/data/corpus.hpp"

namespace memtrain::data {

struct CorpusSplit {
  Corpus train, validation;  // xxh64 and source copied from the whole corpus
  // The held-out segment ranges [begin, end) in whole-corpus segment indices, ascending.
  std::vector<std::pair<std::size_t, std::size_t>> validation_ranges;
};

// Note [Held-out ranges]
// Neighbouring verses repeat names and phrases, so holding out random single verses would let
// the validation loss reward memorisation of the training text. Validation is therefore a few
// contiguous ranges of segments: v = max(1, round(n * validation_fraction)) segments in
// r = ceil(v / 100) ranges of (almost) equal length, range j centred in the j-th of r equal slices,
// so they sample the whole corpus (for the KJV: 622 verses in 7 ranges spread from Genesis to
// Revelation). It depends only on the segment count and the fraction: deterministic, no seed.
// A document cut by a range becomes separate documents on either side of it.
// Throws ConfigError when validation_fraction is not in (0, 0.5] or the corpus has fewer than 2
// segments (each split needs at least one).
CorpusSplit split_corpus(const Corpus& corpus, double validation_fraction);

}  // namespace memtrain::data
