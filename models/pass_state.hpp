#pragma once
// What every layer needs to know about the micro-batch pass it runs in.
#include <cstdint>

#include "kernels/philox.hpp"
#include "runtime/core/context.hpp"
#include "runtime/core/dtype.hpp"

namespace memtrain::models {

// Note [Dropout keys]
// Every dropout mask is a pure function of (seed, step, layer, site, global sample, element)
// (design.md, "Training step"), so it is the same however the global batch is split into
// micro-batches or ranks, and a backward pass rebuilds it instead of storing it.
// layer: 0 = embeddings, l + 1 = encoder layer l. site: which dropout inside that layer
// (DropoutSite below). The element index inside a sample is the flat index of the tensor's
// per-sample slice: t * C + c for hidden states (independent of T, so dynamic padding does not
// move it), (h * T + i) * T + j for attention probabilities (the attention kernel's choice).
enum DropoutSite : std::uint32_t {
  kEmbeddingsOutput = 0,
  kAttentionProbs = 0,
  kAttentionOutput = 1,
  kMlpOutput = 2,
};
inline constexpr std::uint32_t kEmbeddingsLayer = 0;
inline std::uint32_t encoder_rng_layer(int layer) { return static_cast<std::uint32_t>(layer) + 1; }

struct PassState {
  core::Context& ctx;
  int B = 0;  // micro-batch size
  int T = 0;  // sequence length of this micro-batch
  // [B, T], 1 = token, 0 = padding; readable by the kernels of ctx's device (Note [Index arrays
  // travel through fixed slots], kernels/ops/copy.hpp); null: no padding.
  const float* attention_mask = nullptr;
  bool training = false;           // dropout on and activations saved for backward
  float hidden_dropout = 0.0f;     // hidden_dropout_prob when training, else 0
  float attention_dropout = 0.0f;  // attention_probs_dropout_prob when training, else 0
  std::uint64_t seed = 0;
  std::uint64_t step = 0;
  std::uint64_t first_sample = 0;  // global index of row 0
  // Storage dtype of activations and of the gradients flowing between layers: the model's
  // compute_dtype (f32, f16, bf16). LayerNorm statistics and the loss stay f32 (Note [fp32
  // arithmetic on 16-bit storage], f32_access.hpp).
  core::DType dtype = core::DType::f32;
  // Every parameter gradient is zero when this pass's backward starts (its first micro-batch
  // since zero_grad): a layer's first contribution may then be written instead of added to
  // zeros (gradient_f32 in f32_access.hpp).
  bool grads_zero = false;
  // bf16 storage and oneDNN's bf16 GEMMs (ModelOptions::native_bf16_gemm): Linear layers hand
  // bf16 operands to kernels::ops::linear_*_bf16 instead of float views to the sgemm kernels.
  bool native_bf16_gemm = false;

  // False in a dry run: shapes and allocations only, no math.
  bool compute() const { return !ctx.dry_run(); }
  // The op API's context (kernels/ops): which device's kernels this pass runs.
  const kernels::OpContext& kc() const { return ctx.op_context(); }
  int N() const { return B * T; }
  kernels::RngKey key(std::uint32_t layer, std::uint32_t site) const {
    return kernels::RngKey{seed, step, layer, site, 0};
  }
};

}  // namespace memtrain::models
