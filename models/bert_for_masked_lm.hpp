#pragma once
// BERT for masked-language-model pre-training (Devlin et al. 2019; Hugging Face
// BertForMaskedLM without the NSP head): embeddings, num_hidden_layers post-LN encoder layers,
// MLM head tied to the word embeddings. Forward and backward are written per layer; each layer
// keeps what its backward needs (tag activation) and frees it as soon as its backward has run.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "models/bert_config.hpp"
#include "models/bert_embeddings.hpp"
#include "models/bert_layer.hpp"
#include "models/mlm_head.hpp"
#include "models/model_options.hpp"
#include "models/parameter_set.hpp"
#include "models/step_stats.hpp"
#include "runtime/core/context.hpp"
#include "runtime/core/mlm_batch.hpp"

namespace memtrain::models {

class BertForMaskedLM {
 public:
  // Allocates every parameter (tag parameter) and a zeroed gradient (tag gradient) from ctx's
  // allocator, plus an f32 master (tag master_weight) of each 16-bit parameter; values are
  // uninitialised until init_parameters or a checkpoint load.
  // options: storage dtype, activation checkpointing and attention core (model_options.hpp).
  // With compute_dtype f16/bf16, weights, activations and gradients are stored in 16 bits and
  // computed on in float (Note [fp32 arithmetic on 16-bit storage], f32_access.hpp); the loss
  // and LayerNorm statistics stay f32.
  // tp: the tensor-parallel group (Megatron-LM, Shoeybi et al. 2019): with tp.size() > 1 each
  // rank holds its shard of the column- and row-parallel projections and of the
  // vocabulary-parallel word table and decoder (padded to tp.padded_vocab_size rows), every
  // other parameter whole; forward_backward, evaluate and predict_log_probs are then
  // collective over the group (every rank passes the same batch).
  // Throws memtrain::ConfigError when hidden_size % num_attention_heads != 0, a size is < 1,
  // compute_dtype is not f32, f16 or bf16, or tp.size() does not divide num_attention_heads
  // or intermediate_size.
  BertForMaskedLM(const BertConfig& config, core::Context& ctx, ModelOptions options = {}, TensorParallel tp = {});

  // Hugging Face init (BertPreTrainedModel._init_weights): Linear and Embedding weights
  // ~ N(0, initializer_range), biases 0, LayerNorm weight 1 and bias 0. Each element is a pure
  // function of (seed, parameter name, element index) through Philox + Box-Muller, so it does
  // not depend on thread count or on which other parameters exist. A 16-bit parameter's master
  // gets the float draw and its value the rounding to nearest even, so fp32 and 16-bit runs
  // start from the same master weights. A tensor-parallel shard draws its elements of the
  // unsharded tensor (fill_normal_strided), and padded vocabulary rows are zero, so tp = 2
  // starts from exactly the weights of tp = 1.
  // on_draw, when given, sees every parameter's f32 draw (index, [numel] floats) before its
  // value is stored: with ModelOptions::master_weights false a sharded optimizer takes its
  // masters from it, so that they are the draw and not its 16-bit rounding.
  void init_parameters(std::uint64_t seed, const std::function<void(std::size_t, const float*)>& on_draw = {});

  // Forward, masked-LM loss and backward on one micro-batch. Parameter gradients ACCUMULATE.
  // The loss gradient is multiplied by grad_scale (= 1 / masked tokens of the global batch).
  // Dropout keyed by (seed, step, layer, site, batch.first_sample + b, element): Note
  // [Dropout keys]. A micro-batch without masked tokens contributes nothing and runs nothing,
  // but makes the hooks' announcements all the same (Note [A rank without masked tokens
  // announces like the others]).
  // Throws memtrain::RuntimeError for a malformed batch (sizes, ids out of range, positions
  // not ascending in [0, B*T), labels out of range), before touching any gradient.
  StepStats forward_backward(const core::MlmBatch& batch, float grad_scale, std::uint64_t seed, std::uint64_t step);
  // Loss and accuracy at the masked positions with dropout off; no gradients, and each layer's
  // activations are freed as soon as the next layer has consumed them.
  StepStats evaluate(const core::MlmBatch& batch);
  // log-softmax over the vocabulary at flat positions (b * T + t): [P, V] row-major. Under
  // sequence parallelism a batch of any length is padded first (Note [Padding a prompt for
  // sequence parallelism]).
  std::vector<float> predict_log_probs(const core::MlmBatch& batch, const std::vector<std::int32_t>& positions);

  // Hugging Face names, in Hugging Face's order (named_parameters()).
  // The context the model's tensors and ops run in.
  core::Context& context() const { return ctx_; }
  std::vector<Parameter>& parameters() { return params_.parameters(); }
  const std::vector<Parameter>& parameters() const { return params_.parameters(); }
  void zero_grad();
  // The flat buffers that hold every gradient, in the order backward finishes them (Note
  // [Gradients live in buckets]; entry keys are indices into parameters()).
  std::vector<comms::GradientBucket>& gradient_buckets() { return params_.gradient_buckets(); }
  // Called with a parameter's index as soon as its gradient is final in forward_backward (no
  // later micro-batch, layer or reduction writes it): after the head's backward for the head's
  // parameters, after each encoder layer's, after the embeddings' (the tied word embedding,
  // which the decoder and the embedding both write, among them). Under sequence parallelism the
  // partial LayerNorm gradients are announced by reduce_sequence_parallel_gradients instead.
  // The data-parallel gradient sync starts a bucket's all-reduce from it (Note [Buckets overlap
  // backward], comms/gradient_synchronizer.hpp). An empty function: nobody listens. Set it
  // only for a step's last micro-batch: earlier ones are not final.
  // rows_hook, when set, is called right after the head's backward with the tied word
  // embedding's index and the rows of its table (shard) that the embedding lookup will still
  // write (repeats kept): every other row is final then (Note [The tied embedding's rows are
  // summed in two parts], comms/gradient_synchronizer.hpp; the entry is marked split_rows).
  // The hook still hears the index after the embeddings' backward.
  using RowsReadyHook = std::function<void(std::size_t, const std::vector<std::int32_t>&)>;
  void set_gradient_ready_hook(std::function<void(std::size_t)> hook, RowsReadyHook rows_hook = {}) {
    ready_hook_ = std::move(hook);
    rows_hook_ = std::move(rows_hook);
  }
  // Under sequence parallelism the LayerNorms of the embeddings and encoder layers see only
  // this rank's tokens, so their gradients are partial: sums them over the tensor-parallel
  // group (once per step, after the last micro-batch; Note [Sequence-parallel regions]).
  // No-op otherwise and in a dry run. Collective over the group.
  void reduce_sequence_parallel_gradients();
  // Trainable scalars of the whole (unsharded, unpadded) model; the decoder weight is the
  // word-embedding table and is counted once.
  std::int64_t num_parameters() const;
  const TensorParallel& tensor_parallel() const { return tp_; }
  // Training FLOPs (forward + backward = 3 x forward) per token of a micro-batch of sequences
  // of seq_length tokens: per layer 2 x (4 C^2 + 2 C I) for the projections and 2 x 2 T C for
  // scores and context (Narayanan et al. 2021, eq. 3, which has FFN 4C and logits everywhere), plus
  // the MLM head 2 x (C^2 + C V) at the masked fraction of tokens (the head runs there only).
  double flops_per_step_token(int seq_length, double masked_fraction = 0.15) const;
  // Training FLOPs of micro-batches as they ran, by the same count: `tokens` = sum of B x T,
  // `token_pairs` = sum of B x T^2 (the attention scores and context grow with T per token),
  // `masked` = masked positions (the head runs there only). Exact for dynamic sequence
  // lengths and any masking probability, where flops_per_step_token is the nominal figure.
  // Counts are doubles so that flops_per_step_token can pass a fraction of a masked token.
  double step_flops(double tokens, double token_pairs, double masked) const;

  const BertConfig& config() const { return config_; }
  const ModelOptions& options() const { return options_; }

  // Changes activation checkpointing between steps (no forward pass's tensors kept): every
  // layer is checkpointed, and runs its attention core, as a model built with these settings
  // would. The parameters, gradients and what each step computes do not change: full and
  // selective recompute are bitwise (Note [Full recompute]). Throws memtrain::RuntimeError
  // while a forward pass's tensors are kept.
  void set_recompute(Recompute recompute, RecomputeMethod method, int num_layers);

  // Chooses the path of the bf16 GEMMs from the next pass on (ModelOptions::native_bf16_gemm):
  // oneDNN on the bf16 operands as stored (true), or sgemm on float views (false). The
  // parameters and what the allocator sees do not change (Note [bf16 GEMMs through oneDNN]),
  // only the order of the fp32 sums, so a run switches before its first step or at a resume,
  // never between two steps of one trajectory (precision.bf16_gemm: auto, bf16_gemm_choice.hpp
  // in runtime/train). Ignored unless compute_dtype is bf16, and on a CPU without bf16 dot
  // products (make_pass falls back as for a model built with it).
  void set_native_bf16_gemm(bool native) { options_.native_bf16_gemm = native; }

 private:
  PassState make_pass(const core::MlmBatch& batch, bool training, std::uint64_t seed, std::uint64_t step);
  // Embeddings and every encoder layer: hidden [B, T, C].
  core::Tensor encode(PassState& s, const core::MlmBatch& batch);
  // any_length: skip the sequence-parallel divisibility check (a prompt padded afterwards).
  void validate(const core::MlmBatch& batch, const std::vector<std::int32_t>& positions,
                const std::vector<std::int32_t>* labels, bool any_length = false) const;
  void release_all();
  // Tells the ready hook about the parameters of backward stage `stage` (ready_stages_).
  void announce(std::size_t stage);
  // True for a gradient that reduce_sequence_parallel_gradients completes.
  bool sequence_parallel_partial(const Parameter& p) const;

  BertConfig config_;
  ModelOptions options_;
  TensorParallel tp_;
  core::Context& ctx_;
  ParameterSet params_;
  std::unique_ptr<BertEmbeddings> embeddings_;
  std::vector<std::unique_ptr<BertLayer>> layers_;
  std::unique_ptr<MlmHead> head_;
  // Parameter indices per backward stage, in the order backward runs them: the head, encoder
  // layers L-1 .. 0, the embeddings (word embeddings last).
  std::vector<std::vector<std::size_t>> ready_stages_;
  std::function<void(std::size_t)> ready_hook_;
  RowsReadyHook rows_hook_;
  bool grads_zero_ = false;     // zero_grad ran and no backward has written since (PassState::grads_zero)
  std::size_t word_index_ = 0;  // of the tied word embedding in parameters()
};

}  // namespace memtrain::models
