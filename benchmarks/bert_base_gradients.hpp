#pragma once
// BERT-Base's gradient shapes, for the communication benchmarks (bench_gradient_sync,
// bench_compression).
#include <cstdint>
#include <string>
#include <vector>

#include "comms/gradient_bucket.hpp"

namespace memtrain::bench {

// BERT-Base's parameter shapes (hidden 768, 12 layers, FFN 3072, vocabulary 30522), in the
// order backward finishes them: head, layers 11 .. 0, embeddings with the word table last.
inline std::vector<comms::GradientSpec> bert_base_gradients(double scale) {
  const std::int64_t C = static_cast<std::int64_t>(768 * scale), I = 4 * C, V = 30522, P = 512;
  std::vector<comms::GradientSpec> g;
  auto add = [&](std::string name, std::vector<std::int64_t> shape) {
    g.push_back({g.size(), std::move(name), std::move(shape)});
  };
  add("cls.predictions.bias", {V});
  add("cls.transform.dense.weight", {C, C});
  add("cls.transform.dense.bias", {C});
  add("cls.transform.LayerNorm.weight", {C});
  add("cls.transform.LayerNorm.bias", {C});
  for (int l = 11; l >= 0; --l) {
    const std::string p = "layer." + std::to_string(l) + ".";
    for (const char* w : {"query", "key", "value", "attention.output"}) {
      add(p + w + ".weight", {C, C});
      add(p + w + ".bias", {C});
    }
    add(p + "attention.LayerNorm.weight", {C});
    add(p + "attention.LayerNorm.bias", {C});
    add(p + "intermediate.weight", {I, C});
    add(p + "intermediate.bias", {I});
    add(p + "output.weight", {C, I});
    add(p + "output.bias", {C});
    add(p + "output.LayerNorm.weight", {C});
    add(p + "output.LayerNorm.bias", {C});
  }
  add("embeddings.LayerNorm.weight", {C});
  add("embeddings.LayerNorm.bias", {C});
  add("embeddings.token_type_embeddings.weight", {2, C});
  add("embeddings.position_embeddings.weight", {P, C});
  add("embeddings.word_embeddings.weight", {V, C});
  return g;
}

}  // namespace memtrain::bench
