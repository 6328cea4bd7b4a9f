#include "models/bert_for_masked_lm.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "kernels/ops/copy.hpp"
#include "kernels/ops/half_convert.hpp"
#include "kernels/ops/linear.hpp"
#include "models/f32_access.hpp"
#include "models/parameter_init.hpp"
#include "runtime/core/errors.hpp"

namespace memtrain::models {

namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw ConfigError(what);
}

void check_config(const BertConfig& c) {
  auto positive = [](int v, const char* key) {
    require(v >= 1, std::string("model.") + key + " = " + std::to_string(v) + "; expected an integer >= 1");
  };
  positive(c.vocab_size, "vocab_size");
  positive(c.hidden_size, "hidden_size");
  positive(c.num_hidden_layers, "num_hidden_layers");
  positive(c.num_attention_heads, "num_attention_heads");
  positive(c.intermediate_size, "intermediate_size");
  positive(c.max_position_embeddings, "max_position_embeddings");
  positive(c.type_vocab_size, "type_vocab_size");
  require(c.hidden_size % c.num_attention_heads == 0,
          "model.num_attention_heads = " + std::to_string(c.num_attention_heads) +
              " does not divide model.hidden_size = " + std::to_string(c.hidden_size));
  auto probability = [](float p, const char* key) {
    require(p >= 0.0f && p < 1.0f,
            std::string("model.") + key + " = " + std::to_string(p) + "; expected a probability in [0, 1)");
  };
  probability(c.hidden_dropout_prob, "hidden_dropout_prob");
  probability(c.attention_probs_dropout_prob, "attention_probs_dropout_prob");
  require(c.layer_norm_eps > 0.0f, "model.layer_norm_eps must be > 0");
}

void check_tensor_parallel(const BertConfig& c, const TensorParallel& tp) {
  const int n = tp.size();
  auto divides = [n](int v, const char* key) {
    require(v % n == 0, std::string("model.") + key + " = " + std::to_string(v) +
                            " is not divisible by parallel.tensor_model_parallel_size = " + std::to_string(n) +
                            "; expected a multiple of it");
  };
  divides(c.num_attention_heads, "num_attention_heads");
  divides(c.intermediate_size, "intermediate_size");
  require(!tp.sequence_parallel || n > 1,
          "parallel.sequence_parallel = true needs parallel.tensor_model_parallel_size > 1 "
          "(it splits the tensor-parallel group's replicated regions)");
  require(tp.make_vocab_size_divisible_by >= 1,
          "parallel.make_vocab_size_divisible_by = " + std::to_string(tp.make_vocab_size_divisible_by) +
              "; expected an integer >= 1");
}

void check_options(const ModelOptions& o) {
  require(o.compute_dtype == core::DType::f32 || is_half(o.compute_dtype),
          "ModelOptions::compute_dtype = " + core::dtype_name(o.compute_dtype) +
              "; expected F32, F16 or BF16 (precision.dtype fp32, fp16 or bf16)");
}

}  // namespace

BertForMaskedLM::BertForMaskedLM(const BertConfig& config, core::Context& ctx, ModelOptions options, TensorParallel tp)
    : config_(config), options_(options), tp_(tp), ctx_(ctx), params_(ctx, options_, /*bucketed=*/true) {
  check_config(config_);
  check_options(options_);
  check_tensor_parallel(config_, tp_);
  auto& ps = params_.parameters();
  // The indices [first, ps.size()) that a module's constructor added.
  auto added_since = [&ps](std::size_t first) {
    std::vector<std::size_t> v;
    for (std::size_t i = first; i < ps.size(); ++i) v.push_back(i);
    return v;
  };
  embeddings_ = std::make_unique<BertEmbeddings>(params_, config_, tp_);
  std::vector<std::size_t> embedding_indices = added_since(0);
  std::vector<std::vector<std::size_t>> layer_indices;
  for (int l = 0; l < config_.num_hidden_layers; ++l) {
    const std::size_t first = ps.size();
    layers_.push_back(std::make_unique<BertLayer>(params_, l, config_, options_, tp_));
    layer_indices.push_back(added_since(first));
  }
  const std::size_t head_first = ps.size();
  head_ = std::make_unique<MlmHead>(params_, config_, embeddings_->word_embeddings(), tp_);
  // Note [Gradients live in buckets]: in backward's order. The tied word-embedding gradient is
  // written by the decoder (first in backward) and by the embedding lookup (last), so it goes
  // at the very end.
  ready_stages_.push_back(added_since(head_first));
  for (auto it = layer_indices.rbegin(); it != layer_indices.rend(); ++it) ready_stages_.push_back(*it);
  std::stable_partition(embedding_indices.begin(), embedding_indices.end(),
                        [&](std::size_t i) { return ps[i].name != embeddings_->word_embeddings().name; });
  ready_stages_.push_back(embedding_indices);
  word_index_ = embedding_indices.back();
  std::vector<std::size_t> order, partial;
  for (const auto& stage : ready_stages_) {
    for (std::size_t i : stage) (sequence_parallel_partial(ps[i]) ? partial : order).push_back(i);
  }
  order.insert(order.end(), partial.begin(), partial.end());
  params_.pack_gradients(order, {word_index_});
}

bool BertForMaskedLM::sequence_parallel_partial(const Parameter& p) const {
  // The MLM transform's LayerNorm runs on the gathered masked rows (replicated): not partial.
  return tp_.sp() && p.name.find(".LayerNorm.") != std::string::npos && !p.name.starts_with("cls.");
}

void BertForMaskedLM::announce(std::size_t stage) {
  if (!ready_hook_) return;
  const auto& ps = params_.parameters();
  for (std::size_t i : ready_stages_[stage]) {
    if (!sequence_parallel_partial(ps[i])) ready_hook_(i);
  }
}

namespace {

// The draw of a normal-initialised parameter: its shard's elements of the unsharded tensor's
// stream (fill_normal), zeros on padded vocabulary rows.
void fill_normal_shard(float* v, const Parameter& p, float stddev, std::uint64_t seed) {
  const std::int64_t n = p.value.numel();
  const auto& sh = p.shard;
  if (sh.sharding == Sharding::replicated) {
    fill_normal(v, n, stddev, seed, p.name);
    return;
  }
  const std::int64_t rows = p.value.shape()[0];
  const std::int64_t cols = n / rows;
  if (sh.sharding == Sharding::dim0) {
    const std::int64_t valid = std::clamp<std::int64_t>(sh.valid_extent - sh.offset, 0, rows);
    fill_normal_strided(v, 1, valid * cols, stddev, seed, p.name, sh.offset * cols, valid * cols);
    std::fill(v + valid * cols, v + n, 0.0f);
    return;
  }
  // dim1: row r of the shard is columns [offset, offset + cols) of row r of [rows, full].
  fill_normal_strided(v, rows, cols, stddev, seed, p.name, sh.offset, sh.full_extent);
}

}  // namespace

void BertForMaskedLM::init_parameters(std::uint64_t seed,
                                      const std::function<void(std::size_t, const float*)>& on_draw) {
  if (ctx_.dry_run()) return;
  auto& ps = params_.parameters();
  // On a GPU every draw is made on the host and copied over (Note [A tensor's bytes are touched
  // by its device]): the same numbers as a CPU run's.
  const bool on_host = ctx_.op_context().device == kernels::Device::cpu;
  std::vector<float> draw;  // a 16-bit value's draw when it has no master, or any draw for a GPU
  for (std::size_t i = 0; i < ps.size(); ++i) {
    // In 16-bit modes the f32 master gets the exact draw and the value its rounding, so that
    // the optimizer starts from the same weights as an fp32 run.
    const bool half = ps[i].value.dtype() != core::DType::f32;
    const std::int64_t n = ps[i].value.numel();
    float* v = nullptr;
    if (!on_host) {
      draw.assign(static_cast<std::size_t>(n), 0.0f);
      v = draw.data();
    } else if (ps[i].master.defined()) {
      v = ps[i].master.data<float>();
    } else if (half) {
      draw.assign(static_cast<std::size_t>(n), 0.0f);
      v = draw.data();
    } else {
      v = ps[i].value.data<float>();
    }
    switch (params_.init_of(i)) {
      case ParameterInit::normal:
        fill_normal_shard(v, ps[i], config_.initializer_range, seed);
        break;
      case ParameterInit::zeros:
        std::fill(v, v + n, 0.0f);
        break;
      case ParameterInit::ones:
        std::fill(v, v + n, 1.0f);
        break;
    }
    if (on_draw) on_draw(i, v);
    if (!on_host) {
      if (ps[i].master.defined()) ps[i].master.copy_from_host(v);
      if (half) {
        std::vector<std::uint16_t> rounded(static_cast<std::size_t>(n));
        kernels::ops::convert_float_to_half(kernels::OpContext{}, rounded.data(), v, n,
                                            half_format(ps[i].value.dtype()));
        ps[i].value.copy_from_host(rounded.data());
      } else {
        ps[i].value.copy_from_host(v);
      }
    } else if (half) {
      store_f32(ps[i].value, v, n);
    }
  }
}

void BertForMaskedLM::validate(const core::MlmBatch& b, const std::vector<std::int32_t>& positions,
                               const std::vector<std::int32_t>* labels, bool any_length) const {
  auto fail = [](const std::string& what) { throw RuntimeError("invalid MLM batch: " + what); };
  if (b.batch_size < 1 || b.seq_length < 1) {
    fail("batch_size = " + std::to_string(b.batch_size) + ", seq_length = " + std::to_string(b.seq_length) +
         "; both must be >= 1");
  }
  if (b.seq_length > config_.max_position_embeddings) {
    fail("seq_length = " + std::to_string(b.seq_length) +
         " exceeds max_position_embeddings = " + std::to_string(config_.max_position_embeddings));
  }
  if (tp_.sp() && !any_length && b.seq_length % tp_.size() != 0) {
    fail("seq_length = " + std::to_string(b.seq_length) + " is not divisible by the tensor-parallel size " +
         std::to_string(tp_.size()) + " (sequence parallelism splits every sample's tokens evenly)");
  }
  const std::size_t N = static_cast<std::size_t>(b.batch_size) * b.seq_length;
  auto size_ok = [&](std::size_t got, const char* field, bool may_be_empty) {
    if (got != N && !(may_be_empty && got == 0)) {
      fail(std::string(field) + " has " + std::to_string(got) + " entries; expected B * T = " + std::to_string(N));
    }
  };
  size_ok(b.input_ids.size(), "input_ids", false);
  size_ok(b.token_type_ids.size(), "token_type_ids", true);
  size_ok(b.attention_mask.size(), "attention_mask", true);
  for (std::size_t i = 0; i < N; ++i) {
    if (b.input_ids[i] < 0 || b.input_ids[i] >= config_.vocab_size) {
      fail("input_ids[" + std::to_string(i) + "] = " + std::to_string(b.input_ids[i]) +
           " outside [0, vocab_size = " + std::to_string(config_.vocab_size) + ")");
    }
    if (!b.token_type_ids.empty() && (b.token_type_ids[i] < 0 || b.token_type_ids[i] >= config_.type_vocab_size)) {
      fail("token_type_ids[" + std::to_string(i) + "] = " + std::to_string(b.token_type_ids[i]) +
           " outside [0, type_vocab_size = " + std::to_string(config_.type_vocab_size) + ")");
    }
  }
  for (std::size_t m = 0; m < positions.size(); ++m) {
    if (positions[m] < 0 || static_cast<std::size_t>(positions[m]) >= N ||
        (m > 0 && positions[m] <= positions[m - 1])) {
      fail("masked position " + std::to_string(m) + " = " + std::to_string(positions[m]) +
           "; expected strictly ascending flat indices in [0, " + std::to_string(N) + ")");
    }
  }
  if (labels) {
    if (labels->size() != positions.size()) {
      fail(std::to_string(labels->size()) + " masked_labels for " + std::to_string(positions.size()) +
           " masked_positions");
    }
    for (std::size_t m = 0; m < labels->size(); ++m) {
      if ((*labels)[m] < 0 || (*labels)[m] >= config_.vocab_size) {
        fail("masked_labels[" + std::to_string(m) + "] = " + std::to_string((*labels)[m]) +
             " outside [0, vocab_size = " + std::to_string(config_.vocab_size) + ")");
      }
    }
  }
}

PassState BertForMaskedLM::make_pass(const core::MlmBatch& b, bool training, std::uint64_t seed, std::uint64_t step) {
  PassState s{ctx_};
  s.B = b.batch_size;
  s.T = b.seq_length;
  // The attention kernels' copy of the mask (the host array itself on the CPU: Note [Index
  // arrays travel through fixed slots]).
  s.attention_mask =
      b.attention_mask.empty() || ctx_.dry_run()
          ? (b.attention_mask.empty() ? nullptr : b.attention_mask.data())
          : kernels::ops::stage(s.kc(), kernels::ops::StagingSlot::attention_mask, b.attention_mask.data(),
                                static_cast<std::int64_t>(b.attention_mask.size()));
  s.training = training;
  s.hidden_dropout = training ? config_.hidden_dropout_prob : 0.0f;
  s.attention_dropout = training ? config_.attention_probs_dropout_prob : 0.0f;
  s.seed = seed;
  s.step = step;
  s.first_sample = b.first_sample;
  s.dtype = options_.compute_dtype;
  // bf16 GEMMs on bf16 operands: cuBLASLt's on a GPU; on the CPU oneDNN's only where the CPU has
  // bf16 dot products (a GPU run's checkpoint evaluated on a CPU without them falls back).
  s.native_bf16_gemm = options_.native_bf16_gemm && s.dtype == core::DType::bf16 &&
                       kernels::ops::bf16_gemm_native(ctx_.op_context().device);
  return s;
}

core::Tensor BertForMaskedLM::encode(PassState& s, const core::MlmBatch& b) {
  auto x = embeddings_->forward(s, b.input_ids.data(), b.token_type_ids.empty() ? nullptr : b.token_type_ids.data());
  for (auto& layer : layers_) x = layer->forward(s, x);
  return x;
}

void BertForMaskedLM::set_recompute(Recompute recompute, RecomputeMethod method, int num_layers) {
  ModelOptions next = options_;
  next.recompute = recompute;
  next.recompute_method = method;
  next.recompute_num_layers = num_layers;
  for (auto& layer : layers_) layer->set_recompute(next, config_.num_hidden_layers);
  options_ = next;
}

void BertForMaskedLM::release_all() {
  for (auto& layer : layers_) layer->release();
  head_->release();
}

StepStats BertForMaskedLM::forward_backward(const core::MlmBatch& batch, float grad_scale, std::uint64_t seed,
                                            std::uint64_t step) {
  validate(batch, batch.masked_positions, &batch.masked_labels);
  StepStats stats;
  if (batch.masked_positions.empty()) {
    // Note [A rank without masked tokens announces like the others]
    // The data-parallel peers issue their collectives in the order of the announcements, so a
    // rank whose micro-batch has nothing to learn from still makes every announcement, in
    // backward's order: its gradients are final as they are, and its lookup writes no rows.
    for (std::size_t stage = 0; stage < ready_stages_.size(); ++stage) {
      announce(stage);
      if (stage == 0 && rows_hook_) rows_hook_(word_index_, {});
    }
    return stats;
  }
  PassState s = make_pass(batch, /*training=*/true, seed, step);
  s.grads_zero = grads_zero_;
  grads_zero_ = false;  // from here on (even if the pass throws) the gradients may hold values
  // forward_s: embeddings, encoder, head and the loss (whose fused kernel also writes d logits,
  // O(M V), small beside the head's GEMMs); backward_s: the head, encoder and embeddings
  // backward. Wall time on this thread (metrics.jsonl time_forward_s / time_backward_s).
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  try {
    const auto t0 = Clock::now();
    auto hidden = encode(s, batch);  // [B, T, C]
    auto dlogits = head_->loss(s, hidden, batch.masked_positions, batch.masked_labels, grad_scale, &stats);  // [M, V]
    const auto t1 = Clock::now();
    auto dhidden = head_->backward(s, std::move(dlogits), batch.masked_positions);  // [B, T, C]
    hidden.reset();
    std::size_t stage = 0;
    announce(stage++);
    if (rows_hook_) rows_hook_(word_index_, embeddings_->word_rows_to_write(s));
    for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) {
      dhidden = (*it)->backward(s, dhidden);
      announce(stage++);
    }
    embeddings_->backward(s, dhidden);
    announce(stage);
    stats.forward_s = seconds(t0, t1);
    stats.backward_s = seconds(t1, Clock::now());
  } catch (...) {
    release_all();
    throw;
  }
  return stats;
}

StepStats BertForMaskedLM::evaluate(const core::MlmBatch& batch) {
  validate(batch, batch.masked_positions, &batch.masked_labels);
  StepStats stats;
  if (batch.masked_positions.empty()) return stats;
  PassState s = make_pass(batch, /*training=*/false, 0, 0);
  auto hidden = encode(s, batch);
  auto logits = head_->logits(s, hidden, batch.masked_positions);  // [M, V] (or [M, Vp/tp])
  hidden.reset();
  head_->evaluate(s, logits, batch.masked_labels, &stats);
  return stats;
}

namespace {

// Note [Padding a prompt for sequence parallelism]
// Sequence parallelism splits every sample's tokens evenly, so a prompt (fill-mask) of any
// length is padded to the next multiple of the group size with masked-out keys: padding keys
// get probability exactly 0 in every attention row, the real tokens keep their positions, and
// the predictions at the real positions are those of the unpadded prompt.
core::MlmBatch padded_to_multiple(const core::MlmBatch& b, int multiple, std::vector<std::int32_t>& positions) {
  const int T = b.seq_length, Tp = (T + multiple - 1) / multiple * multiple;
  core::MlmBatch p;
  p.batch_size = b.batch_size;
  p.seq_length = Tp;
  p.first_sample = b.first_sample;
  const std::size_t n = static_cast<std::size_t>(b.batch_size) * Tp;
  p.input_ids.assign(n, 0);
  p.token_type_ids.assign(n, 0);
  p.attention_mask.assign(n, 0.0f);
  for (int r = 0; r < b.batch_size; ++r) {
    for (int t = 0; t < T; ++t) {
      const std::size_t from = static_cast<std::size_t>(r) * T + t, to = std::size_t(r) * Tp + t;
      p.input_ids[to] = b.input_ids[from];
      if (!b.token_type_ids.empty()) p.token_type_ids[to] = b.token_type_ids[from];
      p.attention_mask[to] = b.attention_mask.empty() ? 1.0f : b.attention_mask[from];
    }
  }
  for (auto& pos : positions) pos = pos / T * Tp + pos % T;
  return p;
}

}  // namespace

std::vector<float> BertForMaskedLM::predict_log_probs(const core::MlmBatch& unpadded,
                                                      const std::vector<std::int32_t>& at) {
  std::vector<std::int32_t> positions = at;
  // Note [Padding a prompt for sequence parallelism]
  const bool pad =
      tp_.sp() && unpadded.seq_length % tp_.size() != 0 && unpadded.batch_size >= 1 && unpadded.seq_length >= 1;
  if (pad) validate(unpadded, positions, nullptr, /*any_length=*/true);
  const core::MlmBatch batch = pad ? padded_to_multiple(unpadded, tp_.size(), positions) : unpadded;
  validate(batch, positions, nullptr);
  const int P = static_cast<int>(positions.size()), V = config_.vocab_size;
  if (P == 0 || ctx_.dry_run()) return std::vector<float>(static_cast<std::size_t>(P) * V);
  PassState s = make_pass(batch, /*training=*/false, 0, 0);
  auto hidden = encode(s, batch);
  auto logits = head_->logits(s, hidden, positions);  // [P, V] (or [P, Vp/tp])
  return head_->log_probs(s, logits);
}

void BertForMaskedLM::reduce_sequence_parallel_gradients() {
  if (!tp_.sp()) return;
  auto& ps = params_.parameters();
  for (std::size_t i = 0; i < ps.size(); ++i) {
    auto& p = ps[i];
    if (!sequence_parallel_partial(p)) continue;
    if (ctx_.dry_run()) {
      // nothing to sum
    } else if (p.grad.dtype() == core::DType::f32) {
      tp_.all_reduce(p.grad.data<float>(), p.grad.numel());
    } else {
      std::vector<float> g(static_cast<std::size_t>(p.grad.numel()));  // f32 staging
      load_f32(g.data(), p.grad);
      tp_.all_reduce(g.data(), p.grad.numel());
      store_f32(p.grad, g.data(), p.grad.numel());
    }
    if (ready_hook_) ready_hook_(i);
  }
}

void BertForMaskedLM::zero_grad() {
  for (auto& b : params_.gradient_buckets()) b.buffer.zero_();
  grads_zero_ = true;
}

std::int64_t BertForMaskedLM::num_parameters() const {
  std::int64_t n = 0;
  for (const auto& p : params_.parameters()) {
    const std::int64_t numel = p.value.numel();
    if (!p.sharded()) {
      n += numel;
      continue;
    }
    // The unsharded tensor without padding: numel / shard extent x valid extent.
    const std::int64_t extent = p.value.shape()[p.shard.sharding == Sharding::dim0 ? 0 : 1];
    n += numel / extent * p.shard.valid_extent;
  }
  return n;
}

double BertForMaskedLM::flops_per_step_token(int seq_length, double masked_fraction) const {
  // One token of a sequence of T: T token pairs for attention, masked_fraction of a head.
  return step_flops(1.0, static_cast<double>(seq_length), masked_fraction);
}

double BertForMaskedLM::step_flops(double tokens, double token_pairs, double masked) const {
  const double C = config_.hidden_size, I = config_.intermediate_size, V = config_.vocab_size;
  const double L = config_.num_hidden_layers;
  const double dense = 2.0 * (4.0 * C * C + 2.0 * C * I) * tokens;
  const double attention = 2.0 * 2.0 * C * token_pairs;
  const double head = 2.0 * (C * C + C * V) * masked;
  return 3.0 * (L * (dense + attention) + head);
}

}  // namespace memtrain::models
