#include "models/bert_embeddings.hpp"
#include "models/op_descriptions.hpp"

#include "kernels/ops/copy.hpp"
#include "kernels/ops/dropout.hpp"
#include "kernels/ops/embedding.hpp"
#include "models/f32_access.hpp"
#include "models/sequence_parallel.hpp"
#include "runtime/core/tags.hpp"

namespace memtrain::models {

namespace {

// The vocabulary-parallel shard of the word table: rows [rank x Vp / tp, (rank + 1) x Vp / tp)
// of Vp padded rows, of which the first vocab_size are tokens.
ShardSpec word_shard(const BertConfig& c, const TensorParallel& tp) {
  if (!tp.enabled()) return {};
  const std::int64_t padded = tp.padded_vocab_size(c.vocab_size);
  return ShardSpec{Sharding::dim0, tp.rank() * (padded / tp.size()), padded, c.vocab_size};
}

std::int64_t word_rows(const BertConfig& c, const TensorParallel& tp) {
  return tp.padded_vocab_size(c.vocab_size) / tp.size();
}

}  // namespace

BertEmbeddings::BertEmbeddings(ParameterSet& params, const BertConfig& c, const TensorParallel& tp)
    : word_(params.add("bert.embeddings.word_embeddings.weight", {word_rows(c, tp), c.hidden_size},
                       ParameterInit::normal, true, word_shard(c, tp))),
      position_(params.add("bert.embeddings.position_embeddings.weight", {c.max_position_embeddings, c.hidden_size},
                           ParameterInit::normal, true)),
      token_type_(params.add("bert.embeddings.token_type_embeddings.weight", {c.type_vocab_size, c.hidden_size},
                             ParameterInit::normal, true)),
      layer_norm_(params, "bert.embeddings.LayerNorm", c.hidden_size, c.layer_norm_eps),
      tp_(tp),
      V_(c.vocab_size),
      TV_(c.type_vocab_size),
      C_(c.hidden_size),
      first_row_(word_.shard.offset),
      rows_(word_rows(c, tp)) {}

core::Tensor BertEmbeddings::forward(PassState& s, const std::int32_t* ids, const std::int32_t* type_ids) {
  const int N = s.N();
  // Sequence parallelism: the LayerNorm and dropout run on this rank's tokens (Nl rows).
  const bool sp = tp_.sp();
  const int Tl = sp ? sequence_shard_length(tp_, s.T) : s.T, Nl = s.B * Tl;
  auto sum = core::Tensor::empty(s.ctx, {s.B, Tl, C_}, s.dtype,
                                 core::tags().activation);  // [B, Tl, C]
  // The word table's rows this rank looks up: only those are converted from 16 bits (Note [Row
  // views of embedding tables]).
  const std::vector<std::int32_t> rows = s.compute() ? local_word_rows(ids, N) : std::vector<std::int32_t>();
  // The kernels' copies of the ids (the host arrays themselves on the CPU: Note [Index arrays
  // travel through fixed slots]); the host ids stay for the rows above and the rows hook.
  using kernels::ops::StagingSlot;
  const std::int32_t* ids_d = s.compute() ? kernels::ops::stage(s.kc(), StagingSlot::input_ids, ids, N) : ids;
  const std::int32_t* type_ids_d =
      s.compute() && type_ids ? kernels::ops::stage(s.kc(), StagingSlot::token_type_ids, type_ids, N) : type_ids;
  if (s.compute() && !tp_.enabled()) {
    const core::ScopedOp op(s.ctx.op_profile(), "embedding.forward", [&] { return elementwise_description(N, C_, 4); });
    const F32View word(s.ctx, word_.value, F32Access::read, rows);  // [V, C], the rows of ids
    kernels::ops::bert_embeddings_forward(s.kc(), write_f32(s.ctx, sum).get(), ids_d, type_ids_d, word.get(),
                                          read_f32(s.ctx, position_.value).get(),
                                          read_f32(s.ctx, token_type_.value).get(), s.B, s.T, C_, V_, TV_);
  }
  if (tp_.enabled()) {
    // Each rank's lookups, positions and types on rank 0 only, summed over the group: the
    // all-reduce (or with sequence parallelism the reduce-scatter) leaves a row-parallel
    // region (g of Note [Megatron's f and g]).
    auto partial = sp ? core::Tensor::empty(s.ctx, {s.B, s.T, C_}, s.dtype,
                                            core::tags().temporary)
                      : core::Tensor();  // [B, T, C]
    if (s.compute()) {
      auto sum_f = write_f32(s.ctx, sum);                             // [B, Tl, C]
      F32View part_f = sp ? write_f32(s.ctx, partial) : F32View();    // [B, T, C]
      const F32View word(s.ctx, word_.value, F32Access::read, rows);  // [Vp/tp, C], this shard's rows of ids
      kernels::ops::vocab_parallel_embeddings_forward(s.kc(), sp ? part_f.get() : sum_f.get(), ids_d, type_ids_d,
                                                      word.get(), read_f32(s.ctx, position_.value).get(),
                                                      read_f32(s.ctx, token_type_.value).get(), s.B, s.T, C_, V_, TV_,
                                                      first_row_, rows_, /*with_positions=*/tp_.rank() == 0);
      if (sp) {
        reduce_scatter_sequence(s, tp_, part_f.get(), sum_f.get(), C_);
      } else {
        tp_.all_reduce(sum_f.get(), long{N} * C_);
      }
    }
  }
  auto out = layer_norm_.forward(s, sum, Nl);  // [B*Tl, C]
  sum.reset();
  if (s.compute() && s.hidden_dropout > 0.0f) {
    auto o = update_f32(s.ctx, out);  // [B, Tl, C]
    const core::ScopedOp op(s.ctx.op_profile(), "dropout.forward", [&] { return elementwise_description(Nl, C_, 2); });
    kernels::ops::dropout_forward(s.kc(), o.get(), o.get(), s.B, long{Tl} * C_, s.hidden_dropout,
                                  s.key(kEmbeddingsLayer, kEmbeddingsOutput), s.first_sample,
                                  std::uint64_t(sp ? sequence_shard_first(tp_, s.T) : 0) * C_);
  }
  if (s.training) {
    ids_ = ids;
    ids_d_ = ids_d;
    type_ids_d_ = type_ids_d;
  }
  return out;
}

std::vector<std::int32_t> BertEmbeddings::word_rows_to_write(const PassState& s) const {
  if (ids_ == nullptr) return {};
  return local_word_rows(ids_, std::int64_t{s.B} * s.T);
}

std::vector<std::int32_t> BertEmbeddings::local_word_rows(const std::int32_t* ids, std::int64_t N) const {
  std::vector<std::int32_t> rows;
  rows.reserve(static_cast<std::size_t>(N));
  for (std::int64_t i = 0; i < N; ++i) {
    const std::int64_t r = std::int64_t{ids[i]} - first_row_;
    if (r >= 0 && r < rows_) rows.push_back(static_cast<std::int32_t>(r));
  }
  return rows;
}

void BertEmbeddings::backward(PassState& s, core::Tensor& dout) {
  const bool sp = tp_.sp();
  const int Tl = sp ? sequence_shard_length(tp_, s.T) : s.T, Nl = s.B * Tl;
  // One float view of dout and of dsum through the whole backward (fused: the 16-bit tensors
  // are rounded never, since both die here).
  auto dout_f = update_f32(s.ctx, dout);  // [B, Tl, C]
  if (s.compute() && s.hidden_dropout > 0.0f) {
    const core::ScopedOp op(s.ctx.op_profile(), "dropout.backward", [&] { return elementwise_description(Nl, C_, 2); });
    kernels::ops::dropout_backward(s.kc(), dout_f.get(), dout_f.get(), s.B, long{Tl} * C_, s.hidden_dropout,
                                   s.key(kEmbeddingsLayer, kEmbeddingsOutput), s.first_sample,
                                   std::uint64_t(sp ? sequence_shard_first(tp_, s.T) : 0) * C_);
  }
  auto dsum = core::Tensor::empty(s.ctx, {s.B, Tl, C_}, s.dtype,
                                  core::tags().temporary);  // [B, Tl, C]
  auto dsum_f = zeroed_f32(s.ctx, dsum);                    // [B, Tl, C]
  layer_norm_.backward(s, dsum_f.get(), dout_f.get(), Nl);
  // With sequence parallelism the tables' gradients need every token's d sum: gathered, the
  // same on every rank, so the replicated position and type tables stay bitwise equal.
  auto gathered = sp ? core::Tensor::empty(s.ctx, {s.B, s.T, C_}, s.dtype,
                                           core::tags().temporary)
                     : core::Tensor();  // [B, T, C]
  if (s.compute()) {
    F32View g_f = sp ? write_f32(s.ctx, gathered) : F32View();
    if (sp) gather_sequence(s, tp_, dsum_f.get(), g_f.get(), C_);
    const float* d = sp ? g_f.get() : dsum_f.get();  // [B, T, C]
    const std::vector<std::int32_t> rows = word_rows_to_write(s);
    F32View dword(s.ctx, word_.grad, F32Access::read_write, rows);  // [V, C] (shard [Vp/tp, C]), rows of ids
    auto dposition = update_f32(s.ctx, position_.grad);             // [P, C]
    auto dtoken_type = update_f32(s.ctx, token_type_.grad);         // [TV, C]
    if (!tp_.enabled()) {
      const core::ScopedOp op(s.ctx.op_profile(), "embedding.backward",
                              [&] { return elementwise_description(std::int64_t{s.B} * s.T, C_, 4); });
      kernels::ops::bert_embeddings_backward(s.kc(), dword.get(), dposition.get(), dtoken_type.get(), d, ids_d_,
                                             type_ids_d_, s.B, s.T, C_);
    } else {
      // d sum is the same on every rank: each takes the rows it owns, and the replicated
      // position and type tables get bitwise equal gradients everywhere.
      kernels::ops::vocab_parallel_embedding_backward(s.kc(), dword.get(), d, ids_d_, s.B, s.T, C_, first_row_, rows_);
      kernels::ops::bert_embeddings_backward(s.kc(), static_cast<float*>(nullptr), dposition.get(), dtoken_type.get(),
                                             d, ids_d_, type_ids_d_, s.B, s.T, C_);
    }
  }
  ids_ = ids_d_ = type_ids_d_ = nullptr;
}

}  // namespace memtrain::models
