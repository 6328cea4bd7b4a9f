#include "kernels/cpu/philox.hpp"

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
  const auto k1 = philox4x32_10(
      {static_cast<std::uint32_t>(key.step), static_cast<std::uint32_t>(key.step >> 32), 0, 0},
      {static_cast<std::uint32_t>(key.seed), static_cast<std::uint32_t>(key.seed >> 32)});
  const auto k = philox4x32_10({key.layer, key.site, key.tp_rank, 0x5eedu}, {k1[0], k1[1]});
  key_ = {{k[0], k[1]}};
}

float philox_uniform(const RngKey& key, std::uint64_t sample, std::uint64_t element) {
  return PhiloxStream(key).uniform(sample, element);
}

}  // namespace memtrain::kernels
