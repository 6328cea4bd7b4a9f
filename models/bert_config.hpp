#pragma once
// The `model:` section, with Hugging Face BertConfig's names and defaults (bert-base-uncased).
#include <cstdint>

namespace memtrain::models {

struct BertConfig {
  int vocab_size = 30522;
  int hidden_size = 768;
  int num_hidden_layers = 12;
  int num_attention_heads = 12;
  int intermediate_size = 3072;
  int max_position_embeddings = 512;
  int type_vocab_size = 2;
  float layer_norm_eps = 1e-12f;
  float hidden_dropout_prob = 0.1f;
  float attention_probs_dropout_prob = 0.1f;
  float initializer_range = 0.02f;
};

}  // namespace memtrain::models
