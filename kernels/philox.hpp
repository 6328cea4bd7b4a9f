#pragma once
// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11, via Random123).
// A value depends only on (key, counter), never on call order: dropout masks can be rebuilt
// bitwise in a backward or recompute pass, and do not depend on how a batch is split.
// Device-independent math, so it lives beside the op API rather than in a backend: the CPU
// kernels (kernels/cpu), the CUDA kernels (kernels/cuda/philox_device.cuh draws the same words),
// models' parameter init and dropout keys, the data pipeline and the compressors all use it.
#include <Random123/philox.h>

#include <array>
#include <cstdint>

namespace memtrain::kernels {

// Identifies one random stream: the call site of one op in one step.
// seed: training seed; step: optimizer step; layer: layer index (or a distinct id for
// embeddings/head); site: which call inside the layer (e.g. 0 = attention probs, 1 = attn out,
// 2 = mlp out); tp_rank: tensor-parallel rank inside tensor-parallel regions, else 0.
struct RngKey {
  std::uint64_t seed = 0;
  std::uint64_t step = 0;
  std::uint32_t layer = 0;
  std::uint32_t site = 0;
  std::uint32_t tp_rank = 0;
};

// Uniform float in [0, 1) for element `element` of global sample `sample` under `key`.
// Equals PhiloxStream(key).uniform(sample, element).
float philox_uniform(const RngKey& key, std::uint64_t sample, std::uint64_t element);

// One Philox4x32-10 block: r123::Philox4x32 (10 rounds) of counter `ctr` under `key`.
std::array<std::uint32_t, 4> philox4x32_10(const std::array<std::uint32_t, 4>& ctr,
                                           const std::array<std::uint32_t, 2>& key);

// Note [Many Philox blocks at once]
// r123::Philox4x32 computes one block with scalar 32 x 32 -> 64-bit multiplies, and dropout
// spent more time drawing its words than moving its data (3.5 GB/s, issue 15). The same ten
// rounds over many independent counters, written lane-major with the key shared, compile to
// vector multiplies (vpmuludq): the words are bitwise those of philox4x32_10. How many at once
// is set by latency, not width: each round waits on the last one's multiply, so 8 lanes (one or
// two vector registers) left the multiplier idle between rounds at 1.3 ns an element
// (2026-12-05, AVX-512 EPYC), while 64 lanes keep eight registers' chains in flight: 0.4 ns an
// element. The data pipeline's mock tokens and MLM masks use the same routine.
inline constexpr int kPhiloxLanes = 64;
using PhiloxLaneWords = std::uint32_t[4][kPhiloxLanes];

// In place: on return words[w][j] = philox4x32_10({words[0][j], .., words[3][j]}, key)[w] for
// every lane j in [0, kPhiloxLanes).
void philox4x32_10_lanes(PhiloxLaneWords& words, const std::array<std::uint32_t, 2>& key);

// Note [Philox key derivation]
// An RngKey holds 224 bits (seed, step, layer, site, tp_rank) but a Philox key has 64. Rather
// than packing fields into shared bits (where site 65536 would collide with tp_rank 1), the
// stream key is derived with Philox itself, one field group per block:
//   k1 = philox(ctr = {step lo, step hi, 0, 0},        key = {seed lo, seed hi})[0..1]
//   k  = philox(ctr = {layer, site, tp_rank, 0x5eed},   key = k1)[0..1]
// Values of the stream: element e of sample s is word (e mod 4) of
//   philox(ctr = {e/4 lo, e/4 hi, s lo, s hi}, key = k)
// so one block yields 4 consecutive elements. The uniform is (word >> 8) * 2^-24: exactly
// representable in float, in [0, 1), so `u >= p` keeps an element with probability 1 - p up
// to 2^-24.
class PhiloxStream {
 public:
  explicit PhiloxStream(const RngKey& key);
  // The derived Philox key: what the CUDA twin (kernels/cuda/dropout.cu) hands its kernels so
  // that the GPU draws the CPU's masks.
  std::array<std::uint32_t, 2> key_words() const { return {key_[0], key_[1]}; }

  // The 4 raw words of block `block` (elements 4*block .. 4*block+3) of `sample`.
  r123::Philox4x32::ctr_type block(std::uint64_t sample, std::uint64_t block) const {
    r123::Philox4x32::ctr_type ctr = {{static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32),
                                       static_cast<std::uint32_t>(sample), static_cast<std::uint32_t>(sample >> 32)}};
    return r123::Philox4x32()(ctr, key_);
  }

  // See Note [Many Philox blocks at once].
  static constexpr int kLanes = kPhiloxLanes;
  using Words = PhiloxLaneWords;
  // out[w][j] = block(sample, first_block + j)[w] for j in [0, kLanes).
  void blocks(std::uint64_t sample, std::uint64_t first_block, Words& out) const;

  static float to_uniform(std::uint32_t word) { return static_cast<float>(word >> 8) * (1.0f / 16777216.0f); }

  float uniform(std::uint64_t sample, std::uint64_t element) const {
    return to_uniform(block(sample, element >> 2)[element & 3]);
  }

  // Calls f(i, u) for i in [0, n) with u = uniform(sample, first_element + i), one Philox
  // block per 4 elements.
  template <class F>
  void for_each_uniform(std::uint64_t sample, std::uint64_t first_element, std::int64_t n, F&& f) const {
    std::int64_t i = 0;
    std::uint64_t e = first_element;
    while (i < n) {
      const auto r = block(sample, e >> 2);
      for (unsigned lane = e & 3; lane < 4 && i < n; ++lane, ++i, ++e) f(i, to_uniform(r[lane]));
    }
  }

 private:
  r123::Philox4x32::key_type key_;
};

}  // namespace memtrain::kernels
