#pragma once
// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11, via Random123).
// A value depends only on (key, counter), never on call order: dropout masks can be rebuilt
// bitwise in a backward or recompute pass, and do not depend on how a batch is split.
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
float philox_uniform(const RngKey& key, std::uint64_t sample, std::uint64_t element);

}  // namespace memtrain::kernels
