#include "models/mlm_head.hpp"
#include "models/op_descriptions.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/ops/copy.hpp"
#include "kernels/ops/cross_entropy.hpp"
#include "kernels/ops/linear.hpp"
#include "kernels/ops/rows.hpp"
#include "models/bias_gelu.hpp"
#include "models/f32_access.hpp"
#include "models/sequence_parallel.hpp"
#include "runtime/core/tags.hpp"

namespace memtrain::models {

using core::DType;
using core::Tensor;

namespace {

using kernels::ops::StagingSlot;

// The kernels' copy of a host index array (the array itself on the CPU: Note [Index arrays
// travel through fixed slots]). The vector must outlive the kernels that read it on the CPU.
const std::int32_t* stage(const PassState& s, StagingSlot slot, const std::vector<std::int32_t>& host) {
  return kernels::ops::stage(s.kc(), slot, host.data(), static_cast<std::int64_t>(host.size()));
}

// Sequence parallelism: the row of this rank's hidden [B, Tl, C] (tokens [t0, t0 + Tl) of each
// sample of T) that holds each masked position, or -1 where another rank holds it.
std::vector<std::int32_t> owned_rows(const std::vector<std::int32_t>& positions, int T, int Tl, int t0) {
  std::vector<std::int32_t> rows(positions.size());
  for (std::size_t m = 0; m < positions.size(); ++m) {
    const int b = positions[m] / T, t = positions[m] % T - t0;
    rows[m] = t < 0 || t >= Tl ? -1 : b * Tl + t;
  }
  return rows;
}

}  // namespace

MlmHead::MlmHead(ParameterSet& params, const BertConfig& c, const Parameter& word_embeddings, const TensorParallel& tp)
    : dense_(params, "cls.predictions.transform.dense", c.hidden_size, c.hidden_size),
      layer_norm_(params, "cls.predictions.transform.LayerNorm", c.hidden_size, c.layer_norm_eps),
      // The decoder bias is split like the word table's rows (Megatron-LM shards it too).
      bias_(params.add("cls.predictions.bias", {word_embeddings.value.shape()[0]}, ParameterInit::zeros, false,
                       word_embeddings.sharded() ? ShardSpec{Sharding::dim0, word_embeddings.shard.offset,
                                                             word_embeddings.shard.full_extent, c.vocab_size}
                                                 : ShardSpec{})),
      word_(word_embeddings),
      tp_(tp),
      C_(c.hidden_size),
      V_(static_cast<int>(word_embeddings.value.shape()[0])),
      shard_{word_embeddings.sharded() ? word_embeddings.shard.offset : 0, word_embeddings.value.shape()[0],
             c.vocab_size} {}

Tensor MlmHead::logits(PassState& s, const Tensor& hidden, const std::vector<std::int32_t>& positions,
                       F32View* logits_f) {
  const int M = static_cast<int>(positions.size()), C = C_;
  const auto act = core::tags().activation;
  auto gathered = Tensor::empty(s.ctx, {M, C}, s.dtype, act);  // [M, C]
  if (s.compute() && tp_.sp()) {
    // Sequence parallelism: hidden holds this rank's tokens [t0, t0 + Tl) of every sample;
    // each rank fills the masked rows it owns and the sum over the group completes them.
    const int T = s.T, Tl = sequence_shard_length(tp_, T), t0 = sequence_shard_first(tp_, T);
    auto g_f = write_f32(s.ctx, gathered);               // [M, C]
    const auto h_f = read_f32(s.ctx, hidden);            // [B, Tl, C]
    const auto rows = owned_rows(positions, T, Tl, t0);  // [M]
    kernels::ops::gather_rows(s.kc(), g_f.get(), h_f.get(), stage(s, StagingSlot::owned_rows, rows), M, long{C} * 4);
    tp_.all_reduce(g_f.get(), long{M} * C);
  } else if (s.compute()) {
    // A row copy in the storage dtype (no conversion needed to move values).
    kernels::ops::gather_rows(s.kc(), raw_bytes(gathered), raw_bytes(hidden),
                              stage(s, StagingSlot::masked_positions, positions), M,
                              static_cast<std::int64_t>(dtype_size(s.dtype)) * C);
  }
  auto pre_gelu = Tensor::empty(s.ctx, {M, C}, s.dtype, act);  // [M, C]
  dense_.forward(s, write_f32(s.ctx, pre_gelu).get(), gathered, M,
                 /*with_bias=*/false);
  auto gelu = Tensor::empty(s.ctx, {M, C}, s.dtype, act);  // [M, C]
  if (s.compute()) {
    const core::ScopedOp op(s.ctx.op_profile(), "bias_gelu.forward",
                            [&] { return masked_elementwise_description(M, C, 2); });
    bias_gelu_forward(s, gelu, pre_gelu, dense_.bias(), M, C);
  }
  auto transformed = layer_norm_.forward(s, gelu, M);  // [M, C]
  gelu.reset();
  auto logits = Tensor::empty(s.ctx, {M, V_}, s.dtype, act);  // [M, V]
  if (s.compute()) {
    // The decoder's weight is the word table, [30522, 768] for BERT. In 16 bits it is read as
    // stored by bf16 GEMMs, or converted a block of rows at a time next to the sgemm (Note
    // [16-bit weights a block at a time]): never whole into float, forward or backward.
    auto z = write_f32(s.ctx, logits);  // [M, V]
    {
      const core::ScopedOp op(s.ctx.op_profile(), "gemm.forward", [&] { return masked_gemm_description(M, C, V_, 1); });
      linear_forward(s, z.get(), transformed, word_.value, bias_.value, M, C, V_);
    }
    if (logits_f != nullptr) {
      z.round_in_place(F32Access::write);
      *logits_f = std::move(z);
    }
  }
  if (s.training) {
    gathered_ = std::move(gathered);
    pre_gelu_ = std::move(pre_gelu);
    transformed_ = std::move(transformed);
  }
  return logits;
}

Tensor MlmHead::loss_backward(PassState& s, const Tensor& hidden, const std::vector<std::int32_t>& positions,
                              const std::vector<std::int32_t>& labels, float grad_scale, StepStats* stats) {
  return backward(s, loss(s, hidden, positions, labels, grad_scale, stats), positions);
}

Tensor MlmHead::loss(PassState& s, const Tensor& hidden, const std::vector<std::int32_t>& positions,
                     const std::vector<std::int32_t>& labels, float grad_scale, StepStats* stats) {
  const int M = static_cast<int>(positions.size());
  // The logits' floats as stored (this rank's [M, Vp/tp] under tp), overwritten by their
  // gradient and rounded in place once more for backward's GEMMs (Note [Views rounded in
  // place]): two conversions of the [M, V] logits where four were.
  Tensor dlogits;  // [M, V]; overwritten by its gradient. Before z: dropped after it
  F32View z;
  dlogits = logits(s, hidden, positions, &z);
  std::int64_t correct = 0;
  double loss = 0.0;
  // Under tensor parallelism the cross-entropy's per-row scratch, in a dry run too (Note [The
  // cross-entropy's scratch is a tensor]).
  Tensor ce_scratch = tp_.enabled() ? vocab_parallel_cross_entropy_scratch(s.ctx, M) : Tensor();
  if (s.compute()) {
    // The loss and its gradient in float (double sums inside the kernel) whatever the logits'
    // storage, as Megatron-LM computes cross-entropy in fp32.
    {
      const core::ScopedOp op(s.ctx.op_profile(), "cross_entropy.forward_backward",
                              [&] { return masked_elementwise_description(M, V_, 2); });
      loss = tp_.enabled() ? vocab_parallel_cross_entropy(s.kc(), ce_scratch, z.get(), z.get(), labels.data(), M,
                                                          shard_, grad_scale, &correct, tp_)
                           : kernels::ops::softmax_cross_entropy_forward_backward(
                                 s.kc(), z.get(), z.get(), stage(s, StagingSlot::masked_labels, labels), M, V_,
                                 grad_scale, &correct);
    }
    z.round_in_place();
    dlogits_f_ = std::move(z);
  }
  ce_scratch.reset();
  stats->loss_sum += loss;
  stats->num_masked += M;
  stats->num_correct += correct;
  return dlogits;
}

Tensor MlmHead::backward(PassState& s, Tensor dlogits, const std::vector<std::int32_t>& positions) {
  const int M = static_cast<int>(positions.size()), C = C_;
  const auto tmp = core::tags().temporary;
  auto dtransformed = Tensor::empty(s.ctx, {M, C}, s.dtype, tmp);  // [M, C]
  if (s.compute()) {
    // Tied decoder: its weight gradient lands in the word-embedding gradient.
    // The head's backward is the first writer of both in a backward pass.
    const core::ScopedOp op(s.ctx.op_profile(), "gemm.backward", [&] { return masked_gemm_description(M, C, V_, 2); });
    linear_backward(s, zeroed_f32(s.ctx, dtransformed).get(), GemmInput(dlogits_f_.get(), dlogits), transformed_,
                    word_.value, word_.grad, bias_.grad, M, C, V_);
  }
  // f: the decoder is column-parallel over the vocabulary, so each rank's d transformed is a
  // partial sum (the transform before it is replicated).
  if (s.compute() && tp_.enabled()) {
    tp_.all_reduce(update_f32(s.ctx, dtransformed).get(), long{M} * C);
  }
  dlogits_f_ = F32View();  // its workspace slot back
  dlogits.reset();
  transformed_.reset();
  auto dgelu = Tensor::empty(s.ctx, {M, C}, s.dtype, tmp);  // [M, C]
  layer_norm_.backward(s, zeroed_f32(s.ctx, dgelu).get(), read_f32(s.ctx, dtransformed).get(), M);
  dtransformed.reset();
  auto dpre = Tensor::empty(s.ctx, {M, C}, s.dtype, tmp);  // [M, C]
  if (s.compute()) {
    const core::ScopedOp op(s.ctx.op_profile(), "bias_gelu.backward",
                            [&] { return masked_elementwise_description(M, C, 3); });
    bias_gelu_backward(s, dpre, dense_.bias(), dgelu, pre_gelu_, M, C);
  }
  dgelu.reset();
  pre_gelu_.reset();
  auto dgathered = Tensor::empty(s.ctx, {M, C}, s.dtype, tmp);  // [M, C]
  dense_.backward(s, zeroed_f32(s.ctx, dgathered).get(), dpre, gathered_, M, /*with_bias=*/false);
  dpre.reset();
  gathered_.reset();

  // Sequence parallelism: this rank's tokens only ([B, Tl, C]); d gathered is the same on
  // every rank (the transform is replicated), so each takes the rows it owns.
  const bool sp = tp_.sp();
  const int T = s.T, Tl = sp ? sequence_shard_length(tp_, T) : T;
  const int t0 = sp ? sequence_shard_first(tp_, T) : 0;
  auto dhidden = Tensor::empty(s.ctx, {s.B, Tl, C}, s.dtype, tmp);  // [B, Tl, C]
  if (s.compute()) {
    auto dh_f = zeroed_f32(s.ctx, dhidden);        // [B, Tl, C]
    const auto dg_f = read_f32(s.ctx, dgathered);  // [M, C]
    const std::vector<std::int32_t> owned = sp ? owned_rows(positions, T, Tl, t0) : std::vector<std::int32_t>();
    const auto* rows =
        sp ? stage(s, StagingSlot::owned_rows, owned) : stage(s, StagingSlot::masked_positions, positions);  // [M]
    kernels::ops::scatter_add_rows(s.kc(), dh_f.get(), dg_f.get(), rows, M, C);
  }
  return dhidden;
}

void MlmHead::evaluate(PassState& s, const Tensor& logits, const std::vector<std::int32_t>& labels,
                       StepStats* stats) const {
  const int M = static_cast<int>(labels.size());
  const Tensor ce_scratch = tp_.enabled() ? vocab_parallel_cross_entropy_scratch(s.ctx, M) : Tensor();
  if (s.compute()) {
    const auto z = read_f32(s.ctx, logits);  // [M, V]
    std::int64_t correct = 0;
    stats->loss_sum += tp_.enabled()
                           ? vocab_parallel_cross_entropy(s.kc(), ce_scratch, nullptr, z.get(), labels.data(), M,
                                                          shard_, 1.0f, &correct, tp_)
                           : kernels::ops::softmax_cross_entropy_forward(
                                 s.kc(), z.get(), stage(s, StagingSlot::masked_labels, labels), M, V_, &correct);
    stats->num_correct += correct;
  }
  stats->num_masked += M;
}

std::vector<float> MlmHead::log_probs(PassState& s, const Tensor& logits) const {
  const std::int64_t P = logits.shape()[0], Vl = shard_.columns, V = shard_.vocab_size;
  std::vector<float> out(static_cast<std::size_t>(P * V));
  if (!s.compute() || P == 0) return out;
  // The logits as float on the host (fill-mask's few rows; copied back from a GPU).
  std::vector<float> host(static_cast<std::size_t>(logits.numel()));
  load_f32(host.data(), logits);
  const float* z = host.data();  // [P, Vl]
  // The whole rows on every rank: gathered as [tp, P, Vl], then padding dropped.
  std::vector<float> gathered;
  if (tp_.enabled()) {
    gathered.resize(static_cast<std::size_t>(tp_.size() * P * Vl));
    tp_.group->allgather(z, gathered.data(), P * Vl);
  }
  for (std::int64_t p = 0; p < P; ++p) {
    float* row = out.data() + p * V;
    if (!tp_.enabled()) {
      std::copy(z + p * Vl, z + (p + 1) * Vl, row);
    } else {
      for (int r = 0; r < tp_.size(); ++r) {
        const float* part = gathered.data() + (r * P + p) * Vl;
        const std::int64_t first = r * Vl;
        const std::int64_t n = std::clamp<std::int64_t>(V - first, 0, Vl);
        std::copy(part, part + n, row + first);
      }
    }
    const float max = *std::max_element(row, row + V);
    double sum = 0.0;
    for (std::int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(row[v]) - max);
    const double log_z = max + std::log(sum);
    for (std::int64_t v = 0; v < V; ++v) row[v] = static_cast<float>(row[v] - log_z);
  }
  return out;
}

void MlmHead::release() {
  layer_norm_.release();
  dlogits_f_ = F32View();
  gathered_.reset();
  pre_gelu_.reset();
  transformed_.reset();
}

}  // namespace memtrain::models
