#pragma once
// A Config small enough for unit tests: a 2-layer BERT with hidden 32 on mock data.
#include <cstdint>

#include "runtime/config/config.hpp"

namespace memtrain::train::testing {

inline Config tiny_mock_config() {
  Config c;
  c.name = "tiny-test";
  c.path = "tests/train/tiny_config.hpp";
  c.model.vocab_size = 64;
  c.model.hidden_size = 32;
  c.model.num_hidden_layers = 2;
  c.model.num_attention_heads = 2;
  c.model.intermediate_size = 64;
  c.model.max_position_embeddings = 32;
  c.model.hidden_dropout_prob = 0.0f;
  c.model.attention_probs_dropout_prob = 0.0f;
  c.data.mock = true;
  c.data.seq_length = 16;
  c.training.micro_batch_size = 8;
  c.training.global_batch_size = 16;  // 2 micro-batches accumulated
  c.training.max_steps = 120;
  c.training.lr = 1e-2;
  c.training.warmup_steps = 10;
  c.training.lr_schedule = "linear";
  c.training.log_interval = 20;
  c.training.eval_interval = 60;
  c.training.eval_steps = 8;
  c.training.num_threads = 1;
  return c;
}

// The shape of the per-layer activation tests: sequence s = 32, micro-batch b = 4, hidden
// h = 64, a = 4 heads, FFN 4h as BERT, dropout 0.1, one micro-batch per step, mock data.
inline constexpr std::int64_t kActS = 32, kActB = 4, kActH = 64, kActA = 4;
inline Config activation_layer_config(int num_layers) {
  Config c = tiny_mock_config();
  c.model.hidden_size = kActH;
  c.model.num_attention_heads = kActA;
  c.model.intermediate_size = 4 * kActH;
  c.model.num_hidden_layers = num_layers;
  c.model.max_position_embeddings = kActS;
  c.model.hidden_dropout_prob = 0.1f;
  c.model.attention_probs_dropout_prob = 0.1f;
  c.data.seq_length = kActS;
  c.training.micro_batch_size = kActB;
  c.training.global_batch_size = kActB;
  return c;
}

}  // namespace memtrain::train::testing
