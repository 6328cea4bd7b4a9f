#include "runtime/data/mlm_masking.hpp"

#include <Random123/philox.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "runtime/core/errors.hpp"

namespace memtrain::data {
namespace {

r123::Philox4x32::ctr_type philox_block(std::uint64_t seed, std::uint64_t a, std::uint32_t b, std::uint32_t stream) {
  const r123::Philox4x32::key_type key = {{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)}};
  const r123::Philox4x32::ctr_type counter = {
      {static_cast<std::uint32_t>(a), static_cast<std::uint32_t>(a >> 32), b, stream}};
  return r123::Philox4x32()(counter, key);
}

}  // namespace

std::uint32_t philox_word(std::uint64_t seed, std::uint64_t a, std::uint32_t b, std::uint32_t stream, int word) {
  return philox_block(seed, a, b, stream)[word];
}

void philox_words(std::uint64_t seed, std::uint64_t a, std::uint32_t first_b, std::uint32_t stream,
                  kernels::PhiloxLaneWords& out) {
  for (int j = 0; j < kernels::kPhiloxLanes; ++j) {
    out[0][j] = static_cast<std::uint32_t>(a);
    out[1][j] = static_cast<std::uint32_t>(a >> 32);
    out[2][j] = first_b + static_cast<std::uint32_t>(j);
    out[3][j] = stream;
  }
  kernels::philox4x32_10_lanes(out, {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
}

MlmMasking::MlmMasking(float mlm_probability, int vocab_size, std::uint64_t seed)
    : vocab_size_(vocab_size), seed_(seed) {
  if (!(mlm_probability > 0.0f && mlm_probability <= 1.0f)) {
    throw ConfigError("data.mlm_probability = " + std::to_string(mlm_probability) + "; expected a number in (0, 1]");
  }
  if (vocab_size <= kFirstOrdinaryId) {
    throw ConfigError("vocabulary of " + std::to_string(vocab_size) +
                      " pieces has no ordinary tokens; expected more than " + std::to_string(kFirstOrdinaryId));
  }
  const double scaled = std::ldexp(static_cast<double>(mlm_probability), 32);
  threshold_ = scaled >= 4294967295.0 ? std::numeric_limits<std::uint32_t>::max() : static_cast<std::uint32_t>(scaled);
}

void MlmMasking::mask(std::uint64_t sample, std::span<std::int32_t> row, std::int32_t offset,
                      std::vector<std::int32_t>& positions, std::vector<std::int32_t>& labels) const {
  const std::size_t first = positions.size();
  std::int64_t fallback = -1;
  std::uint32_t fallback_draw = std::numeric_limits<std::uint32_t>::max();
  const auto num_ordinary = static_cast<std::uint64_t>(vocab_size_ - kFirstOrdinaryId);
  const auto corrupt = [&](std::size_t t, std::uint32_t action, std::uint32_t token) {
    positions.push_back(static_cast<std::int32_t>(t) + offset);
    labels.push_back(row[t]);
    // action in [0, 2^32): below 0.8 -> [MASK], below 0.9 -> random, else kept.
    if (action < 3435973837u) {  // 0.8 * 2^32
      row[t] = kSpecialTokens.mask;
    } else if (action < 3865470566u) {  // 0.9 * 2^32
      // Multiply-shift maps the token word onto [0, num_ordinary) (Lemire 2019, without
      // rejection: bias below num_ordinary / 2^32).
      row[t] = kFirstOrdinaryId + static_cast<std::int32_t>((token * num_ordinary) >> 32);
    }
  };
  constexpr auto kLanes = static_cast<std::size_t>(kernels::kPhiloxLanes);
  kernels::PhiloxLaneWords words;  // [4, kLanes]: the blocks of positions t0 .. t0 + kLanes - 1
  for (std::size_t t0 = 0; t0 < row.size(); t0 += kLanes) {
    philox_words(seed_, sample, static_cast<std::uint32_t>(t0), kMaskingStream, words);
    const std::size_t end = std::min(row.size(), t0 + kLanes);
    for (std::size_t t = t0; t < end; ++t) {
      if (row[t] < kFirstOrdinaryId) continue;
      const std::size_t j = t - t0;
      if (words[0][j] < threshold_ || threshold_ == std::numeric_limits<std::uint32_t>::max()) {
        corrupt(t, words[1][j], words[2][j]);
      } else if (words[0][j] < fallback_draw) {
        fallback_draw = words[0][j];
        fallback = static_cast<std::int64_t>(t);
      }
    }
  }
  if (positions.size() == first && fallback >= 0) {
    const auto t = static_cast<std::size_t>(fallback);
    const auto r = philox_block(seed_, sample, static_cast<std::uint32_t>(t), kMaskingStream);
    corrupt(t, r[1], r[2]);
  }
}

}  // namespace memtrain::data
