#pragma once
// Shared helpers of the models/ tests: the PyTorch fixture, a model with its weights, error
// measures.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/bert_for_masked_lm.hpp"
#include "runtime/core/safetensors.hpp"
#include "tests/core/test_allocator.hpp"

namespace memtrain::testing {

// A BERT small enough for exact (bitwise, memcmp) comparisons in milliseconds: hidden 32, 4 heads,
// FFN 64; layers, vocabulary, positions and dropout as the test needs.
inline models::BertConfig small_bert_config(int layers, float dropout, int max_positions, int vocab_size = 96) {
  models::BertConfig c;
  c.vocab_size = vocab_size;
  c.hidden_size = 32;
  c.num_hidden_layers = layers;
  c.num_attention_heads = 4;
  c.intermediate_size = 64;
  c.max_position_embeddings = max_positions;
  c.hidden_dropout_prob = dropout;
  c.attention_probs_dropout_prob = dropout;
  return c;
}

inline const std::string kBertFixture = std::string(MEMTRAIN_SOURCE_DIR) + "/tests/fixtures/bert_tiny.safetensors";

struct BertFixture {
  std::map<std::string, core::HostArray> arrays;
  std::map<std::string, std::string> meta;
  models::BertConfig config;
  core::MlmBatch batch;

  static const BertFixture& get() {
    static const BertFixture f = load();
    return f;
  }

  static BertFixture load() {
    BertFixture f;
    f.arrays = core::read_safetensors(kBertFixture, &f.meta);
    auto i = [&](const char* k) { return std::stoi(f.meta.at(k)); };
    f.config.vocab_size = i("vocab_size");
    f.config.hidden_size = i("hidden_size");
    f.config.num_hidden_layers = i("num_hidden_layers");
    f.config.num_attention_heads = i("num_attention_heads");
    f.config.intermediate_size = i("intermediate_size");
    f.config.max_position_embeddings = i("max_position_embeddings");
    f.config.type_vocab_size = i("type_vocab_size");
    f.config.layer_norm_eps = std::stof(f.meta.at("layer_norm_eps"));
    f.config.hidden_dropout_prob = 0.0f;
    f.config.attention_probs_dropout_prob = 0.0f;
    f.batch.batch_size = i("batch_size");
    f.batch.seq_length = i("seq_length");
    f.batch.input_ids = core::to_int32s(f.arrays.at("input.input_ids"));
    f.batch.token_type_ids = core::to_int32s(f.arrays.at("input.token_type_ids"));
    f.batch.attention_mask = core::to_floats(f.arrays.at("input.attention_mask"));
    f.batch.masked_positions = core::to_int32s(f.arrays.at("input.masked_positions"));
    f.batch.masked_labels = core::to_int32s(f.arrays.at("input.masked_labels"));
    return f;
  }

  std::vector<double> doubles(const std::string& name) const { return core::to_doubles(arrays.at(name)); }
};

// Copies fixture arrays named like the parameters into them; fails the test for a parameter
// the fixture lacks (so this also checks the Hugging Face names).
inline void load_weights(std::vector<models::Parameter>& params, const BertFixture& f) {
  for (auto& p : params) {
    auto it = f.arrays.find(p.name);
    ASSERT_NE(it, f.arrays.end()) << "fixture has no tensor named " << p.name;
    ASSERT_EQ(it->second.shape, p.value.shape()) << p.name;
    auto v = core::to_floats(it->second);
    std::copy(v.begin(), v.end(), p.value.data<float>());
  }
}

// max |got - ref| / max |ref|: the error relative to the tensor's scale. Element-wise relative
// error is meaningless for entries that are zero up to rounding.
inline double scaled_max_error(const float* got, const std::vector<double>& ref) {
  double err = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    err = std::max(err, std::abs(static_cast<double>(got[i]) - ref[i]));
    scale = std::max(scale, std::abs(ref[i]));
  }
  return scale > 0.0 ? err / scale : err;
}

// A deterministic synthetic batch (no reference values needed): B sequences of length T, the
// last `pad` tokens of odd rows padded, every 5th real token masked.
inline core::MlmBatch synthetic_batch(int B, int T, int V, std::uint64_t first_sample, int pad = 2) {
  core::MlmBatch b;
  b.batch_size = B;
  b.seq_length = T;
  b.first_sample = first_sample;
  for (int r = 0; r < B; ++r) {
    const std::uint64_t sample = first_sample + r;
    const int real = (sample % 2 == 1) ? T - pad : T;
    for (int t = 0; t < T; ++t) {
      const bool is_real = t < real;
      b.input_ids.push_back(is_real ? static_cast<std::int32_t>((sample * 31 + t * 7 + 3) % V) : 0);
      b.token_type_ids.push_back(t >= T / 2 ? 1 : 0);
      b.attention_mask.push_back(is_real ? 1.0f : 0.0f);
      if (is_real && (t + static_cast<int>(sample)) % 5 == 1) {
        b.masked_positions.push_back(r * T + t);
        b.masked_labels.push_back(static_cast<std::int32_t>((sample * 13 + t * 5 + 1) % V));
      }
    }
  }
  return b;
}

// Rows [first, first + count) of a batch, as the data pipeline would cut a micro-batch.
inline core::MlmBatch slice_rows(const core::MlmBatch& b, int first, int count) {
  core::MlmBatch s;
  s.batch_size = count;
  s.seq_length = b.seq_length;
  s.first_sample = b.first_sample + first;
  const int T = b.seq_length;
  s.input_ids.assign(b.input_ids.begin() + first * T, b.input_ids.begin() + (first + count) * T);
  s.token_type_ids.assign(b.token_type_ids.begin() + first * T, b.token_type_ids.begin() + (first + count) * T);
  s.attention_mask.assign(b.attention_mask.begin() + first * T, b.attention_mask.begin() + (first + count) * T);
  for (std::size_t m = 0; m < b.masked_positions.size(); ++m) {
    const int p = b.masked_positions[m];
    if (p >= first * T && p < (first + count) * T) {
      s.masked_positions.push_back(p - first * T);
      s.masked_labels.push_back(b.masked_labels[m]);
    }
  }
  return s;
}

inline std::vector<std::vector<float>> copy_grads(const std::vector<models::Parameter>& ps) {
  std::vector<std::vector<float>> out;
  for (const auto& p : ps) {
    const float* g = p.grad.data<float>();
    out.emplace_back(g, g + p.grad.numel());
  }
  return out;
}

}  // namespace memtrain::testing
