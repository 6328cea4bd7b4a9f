#pragma once
// BERT input embeddings (Devlin et al. 2019, sec. 3, Figure 2; Hugging Face BertEmbeddings):
// LayerNorm(word[id] + position[t] + token_type[type]) followed by dropout.
#include <cstdint>

#include "models/bert_config.hpp"
#include "models/layer_norm.hpp"
#include "models/parameter_set.hpp"
#include "models/pass_state.hpp"
#include "models/tensor_parallel.hpp"

namespace memtrain::models {

class BertEmbeddings {
 public:
  // Under tensor parallelism (tp.size() > 1) the word table is vocabulary-parallel
  // (Megatron-LM's VocabParallelEmbedding): this rank holds rows [rank x Vp / tp, (rank + 1) x
  // Vp / tp) of the table padded to Vp = tp.padded_vocab_size(vocab_size) rows; the position
  // and type tables and the LayerNorm are replicated.
  BertEmbeddings(ParameterSet& params, const BertConfig& config, const TensorParallel& tp = {});

  // ids, type_ids [B, T] (validated by the caller). Returns the hidden states [B, T, C]
  // (tag activation); keeps the pre-LayerNorm sum and the ids when training. Under tensor
  // parallelism each rank looks up the ids it owns (zeros elsewhere) and one all-reduce over
  // the group completes the sum.
  core::Tensor forward(PassState& s, const std::int32_t* ids, const std::int32_t* type_ids);
  // dout [B, T, C] is the gradient of forward's output (consumed: overwritten in place).
  // Accumulates the three tables' and the LayerNorm's gradients.
  void backward(PassState& s, core::Tensor& dout);

  // The word table [V, C] (this rank's [Vp / tp, C] shard) and its gradient: the MLM decoder
  // is tied to them.
  const Parameter& word_embeddings() const { return word_; }
  // The rows of this rank's word table (shard) that backward's lookup will write: the ids of
  // the training forward's B x T tokens that fall in the shard, less its first row (repeats
  // kept). Empty when no training forward is pending.
  std::vector<std::int32_t> word_rows_to_write(const PassState& s) const;
  // The rows of this rank's word table (shard) that ids [N] name, in order, repeats kept.
  std::vector<std::int32_t> local_word_rows(const std::int32_t* ids, std::int64_t N) const;

 private:
  Parameter word_, position_, token_type_;
  LayerNorm layer_norm_;
  TensorParallel tp_;
  int V_, TV_, C_;
  std::int64_t first_row_ = 0, rows_ = 0;     // this rank's rows of the word table
  const std::int32_t* ids_ = nullptr;         // the training forward's host ids [B, T]
  const std::int32_t* ids_d_ = nullptr;       // and the kernels' copies (Note [Index arrays travel
  const std::int32_t* type_ids_d_ = nullptr;  // through fixed slots]); the same pointers on the CPU
};

}  // namespace memtrain::models
