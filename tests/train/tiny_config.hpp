#pragma once
// A Config small enough for unit tests: a 2-layer BERT with hidden 32 on mock data.
#include "runtime/train/config.hpp"

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

}  // namespace memtrain::train::testing
