#include "kernels/philox.hpp"

namespace memtrain::kernels {

std::array<std::uint32_t, 4> philox4x32_10(const std::array<std::uint32_t, 4>& ctr,
                                           const std::array<std::uint32_t, 2>& key) {
  const r123::Philox4x32::ctr_type c = {{ctr[0], ctr[1], ctr[2], ctr[3]}};
  const r123::Philox4x32::key_type k = {{key[0], key[1]}};
  const auto r = r123::Philox4x32()(c, k);
  return {r[0], r[1], r[2], r[3]};
}

// See Note [Philox key derivation] in philox.hpp.
PhiloxStream::PhiloxStream(const RngKey& key) {
  const auto k1 =
      philox4x32_10({static_cast<std::uint32_t>(key.step), static_cast<std::uint32_t>(key.step >> 32), 0, 0},
                    {static_cast<std::uint32_t>(key.seed), static_cast<std::uint32_t>(key.seed >> 32)});
  const auto k = philox4x32_10({key.layer, key.site, key.tp_rank, 0x5eedu}, {k1[0], k1[1]});
  key_ = {{k[0], k[1]}};
}

// See Note [Many Philox blocks at once]; the rounds are Random123's _philox4x32round and
// _philox4x32bumpkey (Salmon et al. 2011, section 4.2) with its multipliers and Weyl constants.
void philox4x32_10_lanes(PhiloxLaneWords& words, const std::array<std::uint32_t, 2>& key) {
  std::uint32_t c0[kPhiloxLanes], c1[kPhiloxLanes], c2[kPhiloxLanes], c3[kPhiloxLanes];
  for (int j = 0; j < kPhiloxLanes; ++j) {
    c0[j] = words[0][j];
    c1[j] = words[1][j];
    c2[j] = words[2][j];
    c3[j] = words[3][j];
  }
  std::uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += PHILOX_W32_0;
      k1 += PHILOX_W32_1;
    }
#pragma omp simd
    for (int j = 0; j < kPhiloxLanes; ++j) {
      const std::uint64_t p0 = static_cast<std::uint64_t>(PHILOX_M4x32_0) * c0[j];
      const std::uint64_t p1 = static_cast<std::uint64_t>(PHILOX_M4x32_1) * c2[j];
      const auto n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c1[j] ^ k0;
      const auto n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c3[j] ^ k1;
      c0[j] = n0;
      c1[j] = static_cast<std::uint32_t>(p1);
      c2[j] = n2;
      c3[j] = static_cast<std::uint32_t>(p0);
    }
  }
  for (int j = 0; j < kPhiloxLanes; ++j) {
    words[0][j] = c0[j];
    words[1][j] = c1[j];
    words[2][j] = c2[j];
    words[3][j] = c3[j];
  }
}

void PhiloxStream::blocks(std::uint64_t sample, std::uint64_t first_block, Words& out) const {
  for (int j = 0; j < kLanes; ++j) {
    const std::uint64_t b = first_block + static_cast<std::uint64_t>(j);
    out[0][j] = static_cast<std::uint32_t>(b);
    out[1][j] = static_cast<std::uint32_t>(b >> 32);
    out[2][j] = static_cast<std::uint32_t>(sample);
    out[3][j] = static_cast<std::uint32_t>(sample >> 32);
  }
  philox4x32_10_lanes(out, {key_[0], key_[1]});
}

float philox_uniform(const RngKey& key, std::uint64_t sample, std::uint64_t element) {
  return PhiloxStream(key).uniform(sample, element);
}

}  // namespace memtrain::kernels
