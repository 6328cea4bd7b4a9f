#pragma once
// A transformer-like allocation trace (BERT encoder, fp32, training) whose sequence length
// changes from step to step, for the allocator benchmarks. Sizes follow the tensors of
// forward + backward of a post-LN encoder layer; parameters, gradients and optimizer states
// persist, activations live from their forward to their backward, temporaries die at once.
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "memory/replay.hpp"
#include "memory/types.hpp"

namespace memtrain::bench {

struct TransformerTraceConfig {
  int num_layers = 24;           // BERT-Large
  int hidden_size = 1024;        // C
  int num_attention_heads = 16;  // NH
  int vocab_size = 30522;        // V
  int micro_batch_size = 8;      // B
  int steps = 24;
  // Sequence lengths cycled over the steps (the "changing sequence lengths" of issue 3).
  std::vector<int> seq_lengths = {128, 512, 256, 384, 192, 448, 320, 512};
  double mask_fraction = 0.15;  // masked tokens that get logits
};

// Sequence-length schedules the benchmarks compare.
enum class SeqSchedule {
  cycled,      // the fixed cycle of TransformerTraceConfig::seq_lengths
  increasing,  // a warm-up from 64 to 512 tokens in steps of 64 (sequence-length curriculum)
  random,      // uniform over {64, 128, ..., 512}, fixed seed (length-bucketed batches)
};

inline TransformerTraceConfig transformer_config(SeqSchedule schedule, int steps = 24) {
  TransformerTraceConfig c;
  c.steps = steps;
  if (schedule == SeqSchedule::increasing) {
    c.seq_lengths.clear();
    for (int i = 0; i < steps; ++i) c.seq_lengths.push_back(64 * (1 + i * 8 / steps));
  } else if (schedule == SeqSchedule::random) {
    std::mt19937 rng(2024);
    c.seq_lengths.clear();
    for (int i = 0; i < steps; ++i) c.seq_lengths.push_back(64 * (1 + static_cast<int>(rng() % 8)));
  }
  return c;
}

// The trace as replay rows (ids are decimal slot numbers; tags parameter, gradient,
// optimizer_state, activation, temporary) and in compact form for direct replay.
struct CompactOp {
  bool alloc = true;
  std::uint32_t slot = 0;  // index into a live-block table
  std::size_t bytes = 0;
  std::uint8_t tag = 0;  // index into kTraceTags
};

inline const char* const kTraceTags[] = {"parameter", "gradient", "optimizer_state", "activation", "temporary"};

struct GeneratedTrace {
  std::vector<memory::TraceOp> ops;
  std::vector<CompactOp> compact;
  std::size_t num_slots = 0;
  std::size_t peak_live_bytes = 0;  // largest sum of live requested bytes
};

class TraceBuilder {
 public:
  enum Tag : std::uint8_t { parameter, gradient, optimizer_state, activation, temporary };
  std::uint32_t alloc(std::size_t bytes, Tag tag) {
    std::uint32_t slot;
    if (!free_slots_.empty()) {
      slot = free_slots_.back();
      free_slots_.pop_back();
    } else {
      slot = static_cast<std::uint32_t>(t_.num_slots++);
      sizes_.push_back(0);
    }
    sizes_[slot] = bytes;
    live_ += bytes;
    t_.peak_live_bytes = std::max(t_.peak_live_bytes, live_);
    t_.compact.push_back({true, slot, bytes, tag});
    memory::TraceOp op;
    op.kind = memory::TraceOp::Kind::alloc;
    op.id = std::to_string(slot);
    op.bytes = bytes;
    op.tag = kTraceTags[tag];
    op.line = t_.ops.size() + 2;
    t_.ops.push_back(std::move(op));
    return slot;
  }
  void free(std::uint32_t slot) {
    live_ -= sizes_[slot];
    t_.compact.push_back({false, slot, sizes_[slot], 0});
    memory::TraceOp op;
    op.kind = memory::TraceOp::Kind::free;
    op.id = std::to_string(slot);
    op.line = t_.ops.size() + 2;
    t_.ops.push_back(std::move(op));
    free_slots_.push_back(slot);
  }
  GeneratedTrace take() { return std::move(t_); }

 private:
  GeneratedTrace t_;
  std::vector<std::size_t> sizes_;
  std::vector<std::uint32_t> free_slots_;
  std::size_t live_ = 0;
};

inline GeneratedTrace make_transformer_trace(const TransformerTraceConfig& cfg) {
  using T = TraceBuilder;
  TraceBuilder tb;
  const std::size_t f = 4;  // bytes per fp32
  const std::size_t C = cfg.hidden_size, NH = cfg.num_attention_heads, V = cfg.vocab_size;
  const std::size_t B = cfg.micro_batch_size;

  // Parameters: embeddings, then per layer QKV, attention out, LN1, MLP in/out, LN2, then head.
  std::vector<std::size_t> param_numels = {V * C, 512 * C, 2 * C, C, C};
  for (int l = 0; l < cfg.num_layers; ++l) {
    for (std::size_t n : {C * 3 * C, 3 * C, C * C, C, C, C, C * 4 * C, 4 * C, 4 * C * C, C, C, C})
      param_numels.push_back(n);
  }
  for (std::size_t n : {C * C, C, C, C, V}) param_numels.push_back(n);
  std::vector<std::uint32_t> params, grads, states;
  for (std::size_t n : param_numels) params.push_back(tb.alloc(n * f, T::parameter));

  for (int step = 0; step < cfg.steps; ++step) {
    const std::size_t Tlen = cfg.seq_lengths[step % cfg.seq_lengths.size()];
    const std::size_t N = B * Tlen;                                             // tokens
    const std::size_t M = static_cast<std::size_t>(cfg.mask_fraction * N) + 1;  // masked tokens
    // Forward. Saved tensors per layer, in order, freed in reverse by the backward.
    std::vector<std::vector<std::uint32_t>> saved(cfg.num_layers + 2);
    auto save = [&](int layer, std::size_t bytes) { saved[layer].push_back(tb.alloc(bytes, T::activation)); };
    auto temp = [&](std::size_t bytes) { tb.free(tb.alloc(bytes, T::temporary)); };
    save(0, N * C * f);  // embedding sum           // [B, T, C]
    save(0, N * C * f);  // embedding LayerNorm out  // [B, T, C]
    save(0, 2 * N * f);  // mean, rstd               // [B, T] x 2
    for (int l = 1; l <= cfg.num_layers; ++l) {
      save(l, N * 3 * C * f);                                                   // qkv               // [B, T, 3*C]
      std::uint32_t scores = tb.alloc(B * NH * Tlen * Tlen * f, T::temporary);  // [B, NH, T, T]
      save(l, B * NH * Tlen * Tlen * f);                                        // softmax probs   // [B, NH, T, T]
      tb.free(scores);
      save(l, N * C * f);      // attention context // [B, T, C]
      temp(N * C * f);         // projection out    // [B, T, C]
      save(l, N * C * f);      // residual + LN1    // [B, T, C]
      save(l, 2 * N * f);      // LN1 mean, rstd    // [B, T] x 2
      save(l, N * 4 * C * f);  // MLP in            // [B, T, 4*C]
      save(l, N * 4 * C * f);  // GELU out          // [B, T, 4*C]
      temp(N * C * f);         // MLP out           // [B, T, C]
      save(l, N * C * f);      // residual + LN2    // [B, T, C]
      save(l, 2 * N * f);      // LN2 mean, rstd    // [B, T] x 2
    }
    const int head = cfg.num_layers + 1;
    save(head, M * C * f);  // gathered masked rows   // [M, C]
    save(head, M * C * f);  // transform + GELU + LN  // [M, C]
    save(head, M * V * f);  // logits                 // [M, V]
    temp(M * V * f);        // softmax for the loss   // [M, V]

    // Backward: gradients of each parameter are created on first use and then persist.
    const bool first = grads.empty();
    std::size_t next_grad = param_numels.size();
    auto grad_of = [&](std::size_t count) {
      for (std::size_t k = 0; k < count && first; ++k) {
        --next_grad;
        grads.push_back(tb.alloc(param_numels[next_grad] * f, T::gradient));
      }
    };
    std::uint32_t dlogits = tb.alloc(M * V * f, T::temporary);  // [M, V]
    grad_of(5);
    std::uint32_t dx = tb.alloc(N * C * f, T::temporary);  // [B, T, C]
    tb.free(dlogits);
    for (auto it = saved[head].rbegin(); it != saved[head].rend(); ++it) tb.free(*it);
    for (int l = cfg.num_layers; l >= 1; --l) {
      grad_of(12);
      std::uint32_t d4c = tb.alloc(N * 4 * C * f, T::temporary);               // [B, T, 4*C]
      temp(N * 4 * C * f);                                                     // GELU backward
      std::uint32_t dattn = tb.alloc(B * NH * Tlen * Tlen * f, T::temporary);  // [B, NH, T, T]
      tb.free(d4c);
      std::uint32_t dqkv = tb.alloc(N * 3 * C * f, T::temporary);  // [B, T, 3*C]
      tb.free(dattn);
      std::uint32_t dx_next = tb.alloc(N * C * f, T::temporary);  // [B, T, C]
      tb.free(dqkv);
      tb.free(dx);
      dx = dx_next;
      for (auto it = saved[l].rbegin(); it != saved[l].rend(); ++it) tb.free(*it);
    }
    grad_of(5);
    tb.free(dx);
    for (auto it = saved[0].rbegin(); it != saved[0].rend(); ++it) tb.free(*it);
    // Optimizer (AdamW): two states per parameter, created at the first step.
    if (states.empty()) {
      for (std::size_t n : param_numels) {
        states.push_back(tb.alloc(n * f, T::optimizer_state));
        states.push_back(tb.alloc(n * f, T::optimizer_state));
      }
    }
  }
  for (auto s : states) tb.free(s);
  for (auto g : grads) tb.free(g);
  for (auto p : params) tb.free(p);
  return tb.take();
}

}  // namespace memtrain::bench
