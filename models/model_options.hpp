#pragma once
// How a model stores and recomputes what a training step needs: the two main levers on
// training memory besides parallelism (issue 5). Filled from the config by runtime/train.
#include <cstdint>

#include "runtime/core/dtype.hpp"

namespace memtrain::models {

// Activation checkpointing granularity, as Megatron-LM's --recompute-granularity.
// full: a checkpointed layer keeps only its input and reruns its forward in backward.
// selective: only the attention core (scores, softmax, dropout, probs x V) is recomputed.
enum class Recompute { none, selective, full };
// Which checkpointed layers: uniform = every k-th layer (0, k, 2k, ...), block = the first k.
enum class RecomputeMethod { uniform, block };
// standard keeps the [B, NH, T, T] probabilities; flash tiles with an online softmax and keeps
// only the per-row log-sum-exp (Dao et al. 2022).
enum class AttentionImpl { standard, flash };

struct ModelOptions {
  // Storage of the weights used by forward/backward, activations and gradients: f32, f16 or
  // bf16. In 16-bit modes each Parameter also has an f32 master.
  core::DType compute_dtype = core::DType::f32;
  bool fp32_grad_accumulation = false;  // gradients stored in f32 even in 16-bit modes
  // bf16 GEMMs run on bf16 operands with oneDNN (true), or on float views with sgemm (false):
  // Note [bf16 GEMMs through oneDNN]. Only read when compute_dtype is bf16.
  bool native_bf16_gemm = false;
  // Whether each 16-bit Parameter gets its f32 master. false under ZeRO-1, where the optimizer
  // keeps the masters of its shard only (runtime/train/zero_adamw.hpp).
  bool master_weights = true;
  Recompute recompute = Recompute::none;
  RecomputeMethod recompute_method = RecomputeMethod::uniform;
  int recompute_num_layers = 0;  // k; 0 = every layer
  AttentionImpl attention = AttentionImpl::standard;
  // Largest flat gradient bucket, bytes (parallel.bucket_size_mb, 25 MiB as PyTorch DDP's
  // bucket_cap_mb): Note [Gradients live in buckets].
  std::int64_t gradient_bucket_bytes = std::int64_t{25} << 20;
};

// True when encoder layer `layer` (0-based, of num_layers) is checkpointed under `options`.
inline bool recomputes_layer(const ModelOptions& options, int layer, int /*num_layers*/) {
  if (options.recompute == Recompute::none) return false;
  const int k = options.recompute_num_layers;
  if (k <= 0) return true;
  if (options.recompute_method == RecomputeMethod::block) return layer < k;
  return layer % k == 0;
}

}  // namespace memtrain::models
